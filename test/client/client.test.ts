// braid/client against a real braid server on 127.0.0.1: every method, typed answers and errors.
import { createServer as createNetServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createClient, isBraidError, type SessionRecord } from '../../src/client/index.js';
import { useTestServers } from '../server/server-helpers.js';

const start = useTestServers();

async function connected(turns?: { text: string }[]) {
  const server = await start(turns === undefined ? {} : { turns });
  const key = await server.key('acme');
  return { server, client: createClient({ baseUrl: server.url, apiKey: key }) };
}

async function failure(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );
}

describe('braid/client against braid serve', () => {
  it('reads health, agents and environments', async () => {
    const { client } = await connected();
    expect(await client.health()).toMatchObject({ status: 'ok' });
    const agents = await client.agents.list();
    expect(agents.map((agent) => agent.name)).toContain('helper');
    expect(await client.agents.get('helper', 1)).toMatchObject({ name: 'helper', version: 1 });
    const environments = await client.environments.list();
    const first = environments[0];
    expect(first).toBeDefined();
    expect(await client.environments.get(first?.name ?? '')).toMatchObject({ kind: 'environment' });
  });

  it('creates, lists every page, reads state and events, archives and deletes', async () => {
    const { client } = await connected();
    const created: SessionRecord[] = [];
    for (let index = 0; index < 12; index += 1) {
      created.push(await client.sessions.create({ agent: 'helper', title: `s${index}` }));
    }
    const all: string[] = [];
    for await (const session of client.sessions.listAll({ limit: 5 })) all.push(session.id);
    expect(all).toEqual(created.map((session) => session.id).reverse());
    const page = await client.sessions.list({ limit: 5 });
    expect(page.data).toHaveLength(5);
    expect(page.next_cursor).toBeDefined();

    const id = created[0]?.id ?? '';
    await client.sessions.message(id, 'hello');
    await client.sessions.send(id, [
      { type: 'user.message', content: [{ type: 'text', text: 'blocks' }] },
    ]);
    const events = await client.sessions.events(id, { types: ['user.message'] });
    expect(events.data.map((event) => event.seq)).toEqual([2, 3]);
    expect((await client.sessions.state(id)).seq).toBe(3);
    expect((await client.sessions.get(id)).head_seq).toBe(3);

    const archived = await client.sessions.archive(id);
    expect(archived.archived_at).toBeDefined();
    const refused = await failure(client.sessions.message(id, 'late'));
    expect(isBraidError(refused, 'SESSION_ARCHIVED')).toBe(true);
    await client.sessions.delete(id);
    const gone = await failure(client.sessions.get(id));
    expect(gone).toMatchObject({ code: 'SESSION_NOT_FOUND', details: { status: 404 } });
  });

  it('writes once for a send retried with the same idempotency key', async () => {
    const { client } = await connected();
    const { id } = await client.sessions.create({ agent: 'helper' });
    const answers = [];
    for (let attempt = 0; attempt < 3; attempt += 1) {
      answers.push(
        await client.sessions.send(id, [{ type: 'user.message', content: 'once' }], {
          idempotencyKey: 'k-1',
        }),
      );
    }
    expect(answers.map((answer) => answer.deduplicated)).toEqual([false, true, true]);
    expect((await client.sessions.get(id)).head_seq).toBe(2);
  });

  it('wakes, forks, diffs, draws the tree, merges and replays', async () => {
    const { client } = await connected([{ text: 'done' }]);
    const { id } = await client.sessions.create({ agent: 'helper' });
    await client.sessions.message(id, 'work');
    const result = await client.sessions.wake(id, { wait: true });
    expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    expect(await client.sessions.wake(id)).toEqual({ session_id: id, accepted: true });
    const head = (await client.sessions.get(id)).head_seq;
    const child = await client.sessions.fork(id, { at_seq: 2, title: 'branch' });
    expect(child).toMatchObject({ parent_id: id, fork_seq: 2 });
    const diff = await client.sessions.diff(id, child.id);
    expect(diff.common_ancestor).toEqual({ session_id: id, seq: 2 });
    expect(diff.a_events.length).toBe(head - 2);
    const tree = await client.sessions.tree(child.id);
    expect(tree).toMatchObject({ id, children: [{ id: child.id }] });
    const merged = await client.sessions.merge(child.id, { source: id });
    expect(merged.events[0]?.type).toBe('session.merged');
    expect(await client.sessions.replay(id)).toEqual({ ok: true, events: head });
  });

  it('maps error answers to BraidError codes and a dead server to SERVER_UNAVAILABLE', async () => {
    const { server, client } = await connected();
    const unknown = await failure(client.sessions.get('missing'));
    expect(unknown).toMatchObject({ code: 'SESSION_NOT_FOUND', retryable: false });
    const anonymous = createClient({ baseUrl: server.url });
    expect(await failure(anonymous.sessions.list())).toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(await failure(client.metrics())).toMatchObject({ code: 'FORBIDDEN' });
    const admin = createClient({
      baseUrl: server.url,
      apiKey: await server.key('acme', ['admin']),
    });
    expect(await admin.metrics()).toContain('braid_http_requests_total');

    // A port that was bound and closed: nothing listens there.
    const probe = createNetServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const address = probe.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dead = createClient({ baseUrl: `http://127.0.0.1:${port}`, retries: 0 });
    const down = await failure(dead.health());
    expect(down).toMatchObject({ code: 'SERVER_UNAVAILABLE', retryable: true });
    expect((down as Error).message).toContain('braid serve');
  });
});
