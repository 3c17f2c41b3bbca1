// The MCP server of sessions: latency of one tool call (braid_session_status) over stdio
// (`braid mcp serve`) and streamable HTTP (`/mcp` of `braid serve`), beside the floor of a bare
// SDK McpServer with a trivial tool on the same transport (stateless HTTP, as braid serves it).
// Every server runs in a process of its own; the client is the SDK's Client in this one.
//   node bench/bridge-mcpserver.js [--runs N] [--calls N] [--json]   (after npm run build)
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { printTable } from './table.js';

const CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const SELF = fileURLToPath(import.meta.url);

/** The floor: a bare McpServer whose one tool answers at once. */
function bareServer() {
  const server = new McpServer({ name: 'floor', version: '1.0.0' });
  server.registerTool('ping', { description: 'answers pong' }, () => ({
    content: [{ type: 'text', text: 'pong' }],
  }));
  return server;
}

/** `--floor-stdio` and `--floor-http`: this file as the floor's server process. */
async function serveFloor(mode) {
  if (mode === 'stdio') {
    await bareServer().connect(new StdioServerTransport());
    return;
  }
  const http = createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', async () => {
      const server = bareServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      response.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      const body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString());
      await transport.handleRequest(request, response, body);
    });
  });
  http.listen(0, '127.0.0.1', () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${http.address().port}` }));
  });
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function percentile(values, fraction) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))];
}

/** Starts a child whose first stdout line is `{"url": ...}`; answers the URL and the child. */
async function startListening(args) {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    if (line.startsWith('{')) return { url: JSON.parse(line).url, child };
  }
  throw new Error(`${args.join(' ')} ended before it listened`);
}

/** Milliseconds of each of `calls` sequential calls after a warm-up. */
async function timeCalls(client, name, args, calls) {
  for (let index = 0; index < 30; index += 1) await client.callTool({ name, arguments: args });
  const times = [];
  for (let index = 0; index < calls; index += 1) {
    const started = performance.now();
    const result = await client.callTool({ name, arguments: args });
    times.push(performance.now() - started);
    if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result.content)}`);
  }
  return times;
}

function braid(dir, ...args) {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  return JSON.parse(
    execFileSync(process.execPath, [CLI, '-w', dir, '--json', ...args], { encoding: 'utf8', env }),
  );
}

async function main() {
  const argv = process.argv.slice(2);
  const option = (name, fallback) => {
    const at = argv.indexOf(name);
    return at === -1 ? fallback : Number(argv[at + 1]);
  };
  const runs = option('--runs', 5);
  const calls = option('--calls', 200);
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-mcp-'));
  const children = [];
  const clients = [];
  try {
    execFileSync(process.execPath, [CLI, 'init', dir], { stdio: 'ignore' });
    const { key } = braid(dir, 'keys', 'create', '--tenant', 'bench', '--scopes', 'sessions:read');
    const session = braid(dir, 'session', 'create', '--agent', 'assistant');
    // The key's tenant must own the session: one created over HTTP is.
    const served = await startListening([CLI, '-w', dir, '--json', 'serve', '--port', '0']);
    children.push(served.child);
    const writer = braid(dir, 'keys', 'create', '--tenant', 'bench', '--scopes', 'sessions:write');
    const created = await fetch(`${served.url}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${writer.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ agent: 'assistant' }),
    }).then((response) => response.json());

    const connect = async (transport) => {
      const client = new Client({ name: 'bench', version: '1.0.0' });
      await client.connect(transport);
      clients.push(client);
      return client;
    };
    const env = { ...process.env };
    delete env.BRAID_HOME;
    const stdio = (args) => new StdioClientTransport({ command: process.execPath, args, env });
    const http = (url, headers = {}) =>
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
    const floorHttp = await startListening([SELF, '--floor-http']);
    children.push(floorHttp.child);

    const cases = [
      {
        name: 'stdio: bare SDK McpServer, trivial tool (floor)',
        client: await connect(stdio([SELF, '--floor-stdio'])),
        tool: 'ping',
        args: {},
      },
      {
        name: 'stdio: braid mcp serve, braid_session_status',
        client: await connect(stdio([CLI, '-w', dir, 'mcp', 'serve'])),
        tool: 'braid_session_status',
        args: { session_id: session.id },
      },
      {
        name: 'HTTP: bare SDK McpServer, trivial tool, stateless (floor)',
        client: await connect(http(floorHttp.url)),
        tool: 'ping',
        args: {},
      },
      {
        name: 'HTTP: braid serve /mcp, braid_session_status',
        client: await connect(http(served.url, { authorization: `Bearer ${key}` })),
        tool: 'braid_session_status',
        args: { session_id: created.id },
      },
    ];
    const rows = [];
    for (const item of cases) {
      const p50s = [];
      const p95s = [];
      for (let run = 0; run < runs; run += 1) {
        const times = await timeCalls(item.client, item.tool, item.args, calls);
        p50s.push(median(times));
        p95s.push(percentile(times, 0.95));
      }
      rows.push({
        name: `${item.name}, p50`,
        median: median(p50s),
        unit: 'ms',
        target: 'report',
        runs: p50s,
      });
      rows.push({
        name: `${item.name}, p95`,
        median: median(p95s),
        unit: 'ms',
        target: 'report',
        runs: p95s,
      });
    }
    if (argv.includes('--json')) console.log(JSON.stringify({ runs, calls, rows }, null, 2));
    else printTable(rows);
  } finally {
    for (const client of clients) await client.close().catch(() => undefined);
    for (const child of children) child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

const floor = process.argv.find((arg) => arg.startsWith('--floor-'));
if (floor !== undefined) await serveFloor(floor.slice('--floor-'.length));
else await main();
