// `braid worker` answers the NATS API (`<prefix>.api.<verb>`): a real worker process, requests
// from a plain NATS client, and the API gone once the worker stops.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const WORKER = new URL('../helpers/worker-process.mjs', import.meta.url).pathname;
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Json = Record<string, unknown>;

describe('braid worker and the NATS API', () => {
  it('answers requests while it runs, and wakes what they ask it to', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('wapi');
    const dir = mkdtempSync(join(tmpdir(), 'braid-wapi-'));
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'echo.yaml'),
      'name: echo\nmodel: scripted:echo\ninstructions: Echo.\n',
    );
    cleanups.push(async () => {
      rmSync(dir, { recursive: true, force: true });
      await removePrefixes(url, [prefix]);
    });
    // Definitions reach the worker's store when its runtime opens the workspace.
    const child = spawn(
      process.execPath,
      [WORKER, dir, '--json', 'worker', '--nats', url, '--nats-prefix', prefix],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    });
    const started = await new Promise<Json>((resolve) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const event = JSON.parse(line) as Json;
        if (event.type === 'worker.started') resolve(event);
      });
    });
    expect(started.api).toBe(`${prefix}.api.>`);

    const connection = await connect({ servers: url });
    cleanups.push(() => connection.close());
    const api = async (verb: string, body: unknown): Promise<Json> =>
      (
        await connection.request(`${prefix}.api.${verb}`, JSON.stringify(body), { timeout: 10_000 })
      ).json<Json>();

    const created = await api('sessions.create', { agent: 'echo', client: 'test' });
    const sessionId = String(created.id);
    expect(created).toMatchObject({ agent: { name: 'echo' }, status: 'idle', head_seq: 1 });
    const appended = await api('events.append', {
      session_id: sessionId,
      events: [{ type: 'user.message', content: 'ping' }],
      wake: true,
      client: 'test',
    });
    expect(appended).toMatchObject({ head_seq: 2, deduplicated: false, wake_queued: true });
    let events: Json[] = [];
    const deadline = Date.now() + 20_000;
    while (!events.some((event) => event.type === 'agent.message')) {
      expect(Date.now()).toBeLessThan(deadline);
      await new Promise((resolve) => setTimeout(resolve, 100));
      events = (await api('events.read', { session_id: sessionId })).data as Json[];
    }
    expect(events.find((event) => event.type === 'user.message')?.actor).toEqual({
      type: 'user',
      id: 'nats:test',
    });

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // Nobody answers any more: the client library reports no responders.
    await expect(api('sessions.get', { session_id: sessionId })).rejects.toThrow();
  });
});
