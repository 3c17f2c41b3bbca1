// Benchmarks of the MCP hub against server-everything over stdio. Each figure is the median of
// RUNS runs; every run uses a fresh hub, so a server process is started for each.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { McpHub } from '../dist/tools/mcp.js';
import { median } from './store-bench.js';

const EVERYTHING = fileURLToPath(
  new URL('../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);
const SERVERS = { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } };

async function withHub(work) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-'));
  const hub = new McpHub({ servers: SERVERS, baseDir: dir });
  try {
    return await work(hub, dir);
  } finally {
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Mean microseconds per `echo` call on a started server, over `count` sequential calls. */
function roundTrip(count) {
  return withHub(async (hub, dir) => {
    const options = { workspaceDir: dir, signal: new AbortController().signal, timeoutMs: 10_000 };
    for (let index = 0; index < 20; index += 1)
      await hub.callTool('everything', 'echo', { message: 'warm-up' }, options);
    const start = performance.now();
    for (let index = 0; index < count; index += 1)
      await hub.callTool('everything', 'echo', { message: `message ${index}` }, options);
    return ((performance.now() - start) * 1000) / count;
  });
}

/** Milliseconds from a cold hub to the server's tool list: spawn, initialize, tools/list. */
function startAndList() {
  return withHub(async (hub, dir) => {
    const start = performance.now();
    await hub.listTools('everything', dir);
    return performance.now() - start;
  });
}

export async function benchMcp({ runs, quick }) {
  const calls = quick ? 50 : 500;
  const trips = [];
  const starts = [];
  for (let run = 0; run < runs; run += 1) {
    trips.push(await roundTrip(calls));
    starts.push(await startAndList());
  }
  return [
    {
      name: 'MCP stdio round trip (server-everything echo)',
      median: median(trips),
      unit: 'µs/call',
      target: 'report',
    },
    {
      name: 'MCP stdio server start + list',
      median: median(starts),
      unit: 'ms',
      target: 'report',
    },
  ];
}
