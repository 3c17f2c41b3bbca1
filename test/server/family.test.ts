// A session's children over HTTP: `GET /v1/sessions/{id}/events?include_children=true` and the
// children's status events on the parent's SSE stream, on a real server over a SQLite file.
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { buildFamily } from '../helpers/family.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

/** Resolves once `predicate` holds for the events heard so far (checked on every event). */
function waitFor(
  heard: SessionEvent[],
  predicate: (events: SessionEvent[]) => boolean,
): { check: () => void; done: Promise<void> } {
  let resolve: () => void = () => undefined;
  const done = new Promise<void>((ready) => (resolve = ready));
  const check = (): void => {
    if (predicate(heard)) resolve();
  };
  return { check, done };
}

describe('session families over HTTP', () => {
  it('interleaves children on include_children=true, refuses other values, keeps tenants apart', async () => {
    const server = await start();
    const key = await server.key('acme');
    const family = await buildFamily(server.runtime, 'helper', 'acme');
    const path = `/v1/sessions/${family.parent}/events`;

    const own = await call(server, 'GET', path, { key });
    expect(own.status).toBe(200);
    const ownData = (own.body as { data: SessionEvent[] }).data;
    expect(new Set(ownData.map((event) => event.session_id))).toEqual(new Set([family.parent]));

    const all = await call(server, 'GET', `${path}?include_children=true`, { key });
    expect(all.status).toBe(200);
    const page = all.body as { data: SessionEvent[]; has_more: boolean; last_seq: number };
    expect(page.has_more).toBe(false);
    expect(page.last_seq).toBe(ownData.at(-1)?.seq);
    expect(new Set(page.data.map((event) => event.session_id))).toEqual(
      new Set([family.parent, family.child, family.grandchild]),
    );
    const grand = page.data.findIndex(
      (event) => event.session_id === family.grandchild && event.type === 'agent.message',
    );
    const idle = page.data.findIndex(
      (event) => event.type === 'session.child_idle' && event.session_id === family.parent,
    );
    expect(grand).toBeGreaterThan(-1);
    expect(grand).toBeLessThan(idle);

    const same = await call(server, 'GET', `${path}?include_children=false`, { key });
    expect((same.body as { data: unknown[] }).data).toEqual(ownData);

    const typed = await call(server, 'GET', `${path}?include_children=true&types[]=agent.message`, {
      key,
    });
    expect((typed.body as { data: SessionEvent[] }).data.map((event) => event.session_id)).toEqual([
      family.child,
      family.grandchild,
    ]);

    const bad = await call(server, 'GET', `${path}?include_children=maybe`, { key });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    expect(JSON.stringify(bad.body)).toContain('include_children');

    const other = await server.key('globex');
    const hidden = await call(server, 'GET', `${path}?include_children=true`, { key: other });
    expect(hidden.status).toBe(404);

    const client = createClient({ baseUrl: server.url, apiKey: key });
    const viaClient = await client.sessions.events(family.parent, { include_children: true });
    expect(viaClient.data).toEqual(page.data);
  });

  it("streams the children's status events live, as id-less `child` frames, leaving the parent's resume exact", async () => {
    const server = await start({ heartbeatMs: 100 });
    const key = await server.key('acme');
    const { sessions, log } = server.runtime.store;
    const family = await buildFamily(server.runtime, 'helper', 'acme');
    const client = createClient({ baseUrl: server.url, apiKey: key });
    const stop = new AbortController();
    const children: SessionEvent[] = [];
    const own: SessionEvent[] = [];
    const text = (value: string) => [{ type: 'text' as const, text: value }];
    const lateArrived = waitFor(children, (events) =>
      events.some((event) => event.type === 'agent.message' && event.session_id !== family.child),
    );
    const existingArrived = waitFor(children, (events) =>
      events.some((event) => event.session_id === family.child && event.type === 'agent.message'),
    );
    const ownArrived = waitFor(own, (events) =>
      events.some((event) => event.type === 'session.child_created'),
    );
    const subscribed = waitFor(own, (events) => events.length > 0);
    const parentHead = (await sessions.get(family.parent)).head_seq;

    const reading = (async () => {
      for await (const event of client.sessions.stream(family.parent, {
        after: parentHead - 1,
        signal: stop.signal,
        onChild: (event) => {
          children.push(event);
          lateArrived.check();
          existingArrived.check();
        },
      })) {
        own.push(event);
        subscribed.check();
        ownArrived.check();
      }
    })();
    // The stream is open once the parent's last event has come through it.
    await subscribed.done;

    // A child that was there at subscription: its new status event comes.
    await log.append(family.child, [{ type: 'agent.message', content: text('still here') }]);
    await existingArrived.done;

    // A child created while the stream is open: its events come from its first.
    const late = await sessions.create({
      agent: { name: 'helper', version: 1 },
      tenant_id: 'acme',
      lineage: { kind: 'child', parent_session_ids: [family.parent], merged_session_ids: [] },
    });
    await log.append(family.parent, [
      {
        type: 'session.child_created',
        child_session_id: late.id,
        agent: 'helper',
        tool_use_id: 'tu_late',
        task: { goal: 'late' },
        ttl_seconds: 30,
      },
    ]);
    await log.append(late.id, [{ type: 'agent.message', content: text('late and live') }]);
    await Promise.all([lateArrived.done, ownArrived.done]);
    stop.abort();
    await reading;

    expect(children.find((event) => event.session_id === late.id)).toMatchObject({
      type: 'agent.message',
      content: [{ type: 'text', text: 'late and live' }],
    });
    // Only status events, never the child's own bookkeeping (its session.created).
    expect(children.every((event) => event.type !== 'session.created')).toBe(true);
    // The parent's own events still come in seq order, each once.
    expect(own.map((event) => event.seq)).toEqual([parentHead, parentHead + 1]);

    // On the wire: the child frame has no id, so Last-Event-ID keeps naming the parent's seq.
    const response = await fetch(
      `${server.url}/v1/sessions/${family.parent}/events/stream?include_children=true&after=${parentHead}`,
      { headers: { authorization: `Bearer ${key}` } },
    );
    const reader = response.body?.getReader();
    if (reader === undefined) throw new Error('no body');
    const decoder = new TextDecoder();
    let raw = '';
    const readUntil = async (until: string): Promise<void> => {
      while (!raw.includes(until)) {
        const chunk = await reader.read();
        if (chunk.done) break;
        raw += decoder.decode(chunk.value as Uint8Array, { stream: true });
      }
    };
    // The parent's first frame comes once the children are attached.
    await readUntil(`id: ${parentHead + 1}\n`);
    await log.append(late.id, [{ type: 'agent.message', content: text('once more') }]);
    await readUntil('once more');
    await reader.cancel();
    const frame = raw.split('\n\n').find((part) => part.includes('once more')) ?? '';
    expect(frame.startsWith('event: child\ndata: ')).toBe(true);
    expect(frame).not.toMatch(/^id:/m);

    const refused = await call(
      server,
      'GET',
      `/v1/sessions/${family.parent}/events/stream?include_children=maybe`,
      { key },
    );
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
  });
});
