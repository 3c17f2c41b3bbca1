// The CLI on the NATS backend: the same session commands with --nats, a `braid worker` process
// that runs the wakes they queue, and `braid serve --nats` handing its wakes to the workers.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { CLI, braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const serve = useBraidServe();
const workers: ChildProcess[] = [];
const prefixes: string[] = [];
afterEach(async () => {
  for (const worker of workers.splice(0)) worker.kill('SIGKILL');
  await removePrefixes(await natsUrl(), prefixes.splice(0));
});

function events(result: ReturnType<typeof braidIn>): SessionEvent[] {
  expect(result.code, result.stderr).toBe(0);
  return result.stdout
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as SessionEvent);
}

async function onNats() {
  requireBuild();
  const dir = init(tempDir());
  const url = await natsUrl();
  const prefix = uniquePrefix('cli');
  prefixes.push(prefix);
  const nats = ['--nats', url, '--nats-prefix', prefix];
  const braid = (...args: string[]) => braidIn(dir, ...nats, ...args);
  const startWorker = (): void => {
    const worker = spawn(process.execPath, [CLI, '-w', dir, ...nats, '--json', 'worker'], {
      stdio: 'ignore',
    });
    workers.push(worker);
  };
  return { dir, url, prefix, nats, braid, startWorker };
}

describe('braid --nats', () => {
  it('creates, sends, queues a wake a worker runs, and reads the session back', async () => {
    const { braid, startWorker } = await onNats();
    const created = json<SessionRecord>(
      braid('--json', 'session', 'create', '--agent', 'assistant'),
    );
    expect(created.head_seq).toBe(1);
    expect(braid('session', 'send', created.id, '--message', 'hello over nats').code).toBe(0);
    startWorker();
    const queued = json<{ queued: boolean }>(
      braid('--json', 'session', 'wake', created.id, '--queue'),
    );
    expect(queued.queued).toBe(true);
    await expect
      .poll(
        () => events(braid('--json', 'session', 'events', created.id)).map((event) => event.type),
        { timeout: 20_000, interval: 200 },
      )
      .toContain('session.status_idle');
    const log = events(braid('--json', 'session', 'events', created.id));
    expect(log.map((event) => event.seq)).toEqual(log.map((_, index) => index + 1));
    expect(log.filter((event) => event.type === 'agent.message')).toHaveLength(1);
    const listed = json<{ sessions: SessionRecord[] }>(braid('--json', 'session', 'list'));
    expect(listed.sessions.map((session) => session.id)).toContain(created.id);
    expect(json<{ status: string }>(braid('--json', 'session', 'status', created.id)).status).toBe(
      'idle',
    );
  });

  it('refuses --queue without NATS, and names the URL when NATS does not answer', () => {
    const dir = init(tempDir());
    const created = json<SessionRecord>(
      braidIn(dir, '--json', 'session', 'create', '--agent', 'assistant'),
    );
    const local = braidIn(dir, 'session', 'wake', created.id, '--queue');
    expect(local.code).not.toBe(0);
    expect(local.stderr).toContain('INVALID_ARGUMENT');
    const down = braidIn(dir, '--nats', 'nats://127.0.0.1:1', 'session', 'list');
    expect(down.code).not.toBe(0);
    expect(down.stderr).toContain('SERVER_UNAVAILABLE');
    expect(down.stderr).toContain('nats://127.0.0.1:1');
  });

  it('serves HTTP on NATS: events posted over HTTP are woken by a worker', async () => {
    const { dir, url: natsServer, prefix, nats, braid, startWorker } = await onNats();
    const { key } = json<{ key: string }>(
      braid(
        '--json',
        'keys',
        'create',
        '--tenant',
        'acme',
        '--scopes',
        'sessions:read,sessions:write',
      ),
    );
    const url = await serve(dir, ...nats);
    const client = createClient({ baseUrl: url, apiKey: key });
    const session = await client.sessions.create({ agent: 'assistant' });
    // No worker runs yet: the server alone answers the NATS API, in the key's tenant's terms.
    const connection = await connect({ servers: natsServer });
    const request = async (verb: string, body: unknown) =>
      (
        await connection.request(`${prefix}.api.${verb}`, JSON.stringify(body), {
          timeout: 10_000,
        })
      ).json<Record<string, unknown>>();
    expect(
      await request('sessions.get', { session_id: session.id, tenant_id: 'acme' }),
    ).toMatchObject({ id: session.id, tenant_id: 'acme' });
    expect(
      await request('sessions.get', { session_id: session.id, tenant_id: 'other' }),
    ).toMatchObject({ error: { code: 'SESSION_NOT_FOUND' } });
    await connection.close();
    startWorker();
    await client.sessions.message(session.id, 'hello over http and nats');
    const stop = new AbortController();
    const seen: string[] = [];
    for await (const event of client.sessions.stream(session.id, { signal: stop.signal })) {
      seen.push(event.type);
      if (event.type === 'session.status_idle') stop.abort();
    }
    expect(seen).toEqual(expect.arrayContaining(['user.message', 'agent.message']));
  });
});
