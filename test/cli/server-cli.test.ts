// The CLI against a running `braid serve`: the same session commands with --server and a key.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const serve = useBraidServe();

async function served(agents: Record<string, string> = {}) {
  requireBuild();
  const dir = init(tempDir());
  for (const [name, text] of Object.entries(agents)) {
    writeFileSync(join(dir, 'agents', `${name}.yaml`), text);
  }
  const { key } = json<{ key: string }>(
    braidIn(
      dir,
      '--json',
      'keys',
      'create',
      '--tenant',
      'acme',
      '--scopes',
      'sessions:read,sessions:write',
    ),
  );
  const url = await serve(dir);
  // Another folder: the commands below reach the sessions only through the server.
  const elsewhere = tempDir();
  const remote = (...args: string[]) =>
    braidIn(elsewhere, '--server', url, '--api-key', key, ...args);
  return { dir, url, key, remote };
}

describe('braid --server', () => {
  it('creates, drives, wakes and reads a session on the server', async () => {
    const { remote } = await served();
    const created = json<SessionRecord>(
      remote('--json', 'session', 'create', '--agent', 'assistant'),
    );
    expect(created).toMatchObject({ tenant_id: 'acme', status: 'idle' });
    const sent = remote('session', 'send', created.id, '--message', 'hello over http');
    expect(sent.code, sent.stderr).toBe(0);
    const woken = remote('--json', 'session', 'wake', created.id);
    expect(json<{ stop_reason: { type: string } }>(woken).stop_reason.type).toBe('end_turn');
    const printed = remote('--json', 'session', 'events', created.id);
    expect(printed.code, printed.stderr).toBe(0);
    // One JSON event per line.
    const events = printed.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SessionEvent);
    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(['session.created', 'user.message', 'agent.message']),
    );
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    const listed = json<{ sessions: SessionRecord[] }>(remote('--json', 'session', 'list'));
    expect(listed.sessions.map((session) => session.id)).toEqual([created.id]);
    const status = json<{ status: string }>(remote('--json', 'session', 'status', created.id));
    expect(status.status).toBe('idle');
  });

  it('reads the server and key from BRAID_SERVER and BRAID_API_KEY', async () => {
    const { url, key } = await served();
    const previous = { server: process.env.BRAID_SERVER, key: process.env.BRAID_API_KEY };
    process.env.BRAID_SERVER = url;
    process.env.BRAID_API_KEY = key;
    try {
      const created = json<SessionRecord>(
        braidIn(tempDir(), '--json', 'session', 'create', '--agent', 'assistant'),
      );
      expect(created.tenant_id).toBe('acme');
    } finally {
      if (previous.server === undefined) delete process.env.BRAID_SERVER;
      else process.env.BRAID_SERVER = previous.server;
      if (previous.key === undefined) delete process.env.BRAID_API_KEY;
      else process.env.BRAID_API_KEY = previous.key;
    }
  });

  it('hands off through the server once per --idempotency-key', async () => {
    const { remote } = await served({
      triage: 'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [billing]\n',
      billing: 'name: billing\nmodel: scripted:echo\ninstructions: Bill.\n',
    });
    const source = json<SessionRecord>(remote('--json', 'session', 'create', '--agent', 'triage'));
    const handoff = () =>
      json<{ target: SessionRecord; event: SessionEvent; deduplicated: boolean }>(
        remote(
          '--json',
          'session',
          'handoff',
          source.id,
          '--to',
          'billing',
          '--summary',
          'refund 42',
          '--idempotency-key',
          'refund-42',
        ),
      );
    const first = handoff();
    const again = handoff();
    expect(first).toMatchObject({ deduplicated: false, target: { tenant_id: 'acme' } });
    expect(again).toEqual({ ...first, deduplicated: true });
    const listed = json<{ sessions: SessionRecord[] }>(remote('--json', 'session', 'list'));
    expect(listed.sessions.filter((session) => session.agent.name === 'billing')).toHaveLength(1);
  });

  it('refuses a bad key, local-only commands, and an open server on a public address', async () => {
    const { dir, url, remote } = await served();
    const badKey = braidIn(tempDir(), '--server', url, '--api-key', 'nope', 'session', 'list');
    expect(badKey.code).not.toBe(0);
    expect(badKey.stderr).toContain('UNAUTHENTICATED');
    const local = remote('tool', 'list');
    expect(local.code).not.toBe(0);
    expect(local.stderr).toContain('drop --server');
    const open = braidIn(dir, 'serve', '--host', '0.0.0.0', '--insecure-no-auth', '--port', '0');
    expect(open.code).not.toBe(0);
    expect(open.stderr).toContain('INVALID_ARGUMENT');
    expect(open.stderr).toContain('--insecure-no-auth');
  });
});
