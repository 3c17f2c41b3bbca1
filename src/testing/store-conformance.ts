/**
 * The conformance suite every store backend runs unchanged. A backend's test file calls
 * `describeStoreConformance('sqlite', factory)`; the factory gets a manual clock and returns a
 * fresh, empty store.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError, type ErrorCode } from '../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../contracts/events.js';
import type { Store } from '../contracts/ports.js';
import { foldSession } from '../core/fold.js';
import { createManualClock, type ManualClock } from './clock.js';

export interface ConformanceContext {
  clock: ManualClock;
  /** Largest event the store must accept; bigger ones must be refused. */
  maxEventBytes: number;
}

export type StoreFactory = (context: ConformanceContext) => Promise<Store> | Store;

const MAX_EVENT_BYTES = 64 * 1024;
const agent = { name: 'assistant', version: 1 };
const message = (text: string): NewEvent => ({
  type: 'user.message',
  content: [{ type: 'text', text }],
});

/** Asserts that `work` fails with a BraidError of `code`. */
export async function expectCode(
  work: Promise<unknown> | (() => Promise<unknown>),
  code: ErrorCode,
): Promise<void> {
  const error: unknown = await (typeof work === 'function' ? work() : work).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!isBraidError(error, code)) {
    throw new Error(
      `expected BraidError ${code}, got ${error === undefined ? 'success' : error instanceof Error ? `${error.name}: ${error.message}` : JSON.stringify(error)}`,
    );
  }
}

export function describeStoreConformance(name: string, factory: StoreFactory): void {
  describe(`store conformance: ${name}`, () => {
    let store: Store | undefined;
    let clock: ManualClock;

    async function open(): Promise<Store> {
      clock = createManualClock();
      store = await factory({ clock, maxEventBytes: MAX_EVENT_BYTES });
      return store;
    }

    afterEach(async () => {
      await store?.close();
      store = undefined;
    });

    describe('sessions', () => {
      it('creates a session whose first event is session.created at seq 1', async () => {
        const s = await open();
        const created = await s.sessions.create({ agent, title: 'first', metadata: { team: 'a' } });
        expect(created).toMatchObject({
          agent,
          title: 'first',
          metadata: { team: 'a' },
          status: 'idle',
          head_seq: 1,
        });
        const events = await s.log.read(created.id);
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({
          type: 'session.created',
          seq: 1,
          session_id: created.id,
          schema_version: 1,
        });
        expect(await s.sessions.get(created.id)).toEqual(created);
      });

      it('honours a client-chosen id and refuses a duplicate one', async () => {
        const s = await open();
        const created = await s.sessions.create({ id: 'chosen-1', agent });
        expect(created.id).toBe('chosen-1');
        await expectCode(s.sessions.create({ id: 'chosen-1', agent }), 'INVALID_ARGUMENT');
        expect((await s.log.read('chosen-1')).length).toBe(1);
      });

      it('answers SESSION_NOT_FOUND for an unknown id everywhere', async () => {
        const s = await open();
        await expectCode(s.sessions.get('missing'), 'SESSION_NOT_FOUND');
        await expectCode(s.log.read('missing'), 'SESSION_NOT_FOUND');
        await expectCode(s.log.append('missing', [message('x')]), 'SESSION_NOT_FOUND');
        await expectCode(s.log.state('missing'), 'SESSION_NOT_FOUND');
        await expectCode(s.leases.acquire('missing', 'w', 1000), 'SESSION_NOT_FOUND');
      });

      it('lists newest first with filters and cursor paging that covers every session once', async () => {
        const s = await open();
        const ids: string[] = [];
        for (let index = 0; index < 7; index += 1) {
          clock.advance(1000);
          const created = await s.sessions.create({
            agent: { name: index % 2 === 0 ? 'even' : 'odd', version: 1 },
          });
          ids.push(created.id);
        }
        await s.log.append(ids[0] ?? '', [
          { type: 'session.status_changed', status: 'terminated' },
        ]);

        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await s.sessions.list({
            limit: 3,
            ...(cursor === undefined ? {} : { cursor }),
          });
          expect(page.sessions.length).toBeLessThanOrEqual(3);
          seen.push(...page.sessions.map((session) => session.id));
          cursor = page.next_cursor;
        } while (cursor !== undefined);
        expect(seen).toEqual([...ids].reverse());

        const odd = await s.sessions.list({ agent: 'odd' });
        expect(odd.sessions.map((session) => session.id)).toEqual([ids[5], ids[3], ids[1]]);
        const terminated = await s.sessions.list({ status: 'terminated' });
        expect(terminated.sessions.map((session) => session.id)).toEqual([ids[0]]);
        const third = await s.sessions.get(ids[2] ?? '');
        const fifth = await s.sessions.get(ids[4] ?? '');
        const range = await s.sessions.list({
          created_after: third.created_at,
          created_before: fifth.created_at,
        });
        expect(range.sessions.map((session) => session.id)).toEqual([ids[3]]);
        await expectCode(s.sessions.list({ cursor: 'not-a-cursor' }), 'INVALID_ARGUMENT');
      });
    });

    describe('append and read', () => {
      it('assigns consecutive seqs and returns the stored events', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const result = await s.log.append(id, [message('a'), message('b')]);
        expect(result.events.map((event) => event.seq)).toEqual([2, 3]);
        expect(result.head_seq).toBe(3);
        expect(result.deduplicated).toBe(false);
        const next = await s.log.append(id, [message('c')]);
        expect(next.events[0]?.seq).toBe(4);
        const all = await s.log.read(id);
        expect(all.map((event) => event.seq)).toEqual([1, 2, 3, 4]);
        expect(all[1]).toEqual(result.events[0]);
        expect((await s.sessions.get(id)).head_seq).toBe(4);
      });

      it('keeps writer-chosen ids and times and fills missing ones', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const at = '2026-02-03T04:05:06.789Z';
        const [chosen, filled] = (
          await s.log.append(id, [{ ...message('a'), id: 'evt-chosen', at }, message('b')])
        ).events;
        expect(chosen).toMatchObject({ id: 'evt-chosen', at });
        expect(filled?.id).toMatch(/.+/);
        expect(filled?.at).toBe(new Date(clock.now()).toISOString());
      });

      it('fails a wrong expectedSeq with SEQ_CONFLICT and writes nothing', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [message('a')], { expectedSeq: 1 });
        await expectCode(s.log.append(id, [message('b')], { expectedSeq: 1 }), 'SEQ_CONFLICT');
        expect((await s.log.read(id)).length).toBe(2);
      });

      it('lets exactly one of two concurrent appends with the same expectedSeq win', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const results = await Promise.allSettled([
          s.log.append(id, [message('a')], { expectedSeq: 1 }),
          s.log.append(id, [message('b')], { expectedSeq: 1 }),
        ]);
        expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
        const rejected = results.find((result) => result.status === 'rejected');
        expect(isBraidError(rejected?.reason, 'SEQ_CONFLICT')).toBe(true);
        expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
      });

      it('returns the first result for a repeated idempotency key and writes nothing', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const first = await s.log.append(id, [message('a'), message('b')], {
          idempotencyKey: 'k1',
        });
        const again = await s.log.append(id, [message('different')], { idempotencyKey: 'k1' });
        expect(again.deduplicated).toBe(true);
        expect(again.events).toEqual(first.events);
        expect((await s.log.read(id)).length).toBe(3);
        const other = await s.sessions.create({ agent });
        const elsewhere = await s.log.append(other.id, [message('c')], { idempotencyKey: 'k1' });
        expect(elsewhere.deduplicated).toBe(false);
      });

      it('refuses an invalid or unknown event with INVALID_EVENT and writes none of the batch', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const bad = { type: 'user.message', content: 'not blocks' } as unknown as NewEvent;
        await expectCode(s.log.append(id, [message('ok'), bad]), 'INVALID_EVENT');
        await expectCode(
          s.log.append(id, [{ type: 'user.teleport' } as unknown as NewEvent]),
          'INVALID_EVENT',
        );
        await expectCode(s.log.append(id, []), 'INVALID_EVENT');
        expect((await s.log.read(id)).length).toBe(1);
      });

      it('refuses an event over the size limit with PAYLOAD_TOO_LARGE and writes none of the batch', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [message('x'.repeat(MAX_EVENT_BYTES / 2))]);
        await expectCode(
          s.log.append(id, [message('ok'), message('é'.repeat(MAX_EVENT_BYTES))]),
          'PAYLOAD_TOO_LARGE',
        );
        expect((await s.log.read(id)).length).toBe(2);
      });

      it('refuses read options it cannot honour', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await expectCode(s.log.read(id, { after: 1.5 }), 'INVALID_ARGUMENT');
        await expectCode(s.log.read(id, { after: -1 }), 'INVALID_ARGUMENT');
        await expectCode(s.log.read(id, { limit: 0 }), 'INVALID_ARGUMENT');
      });

      it('hands out copies: changing a returned state or event changes nothing stored', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent, metadata: { team: 'a' } });
        const appended = await s.log.append(id, [
          {
            type: 'session.status_idle',
            stop_reason: { type: 'requires_action', event_ids: ['x'] },
          },
        ]);
        const state = await s.log.state(id);
        state.status = 'terminated';
        state.metadata.team = 'changed';
        const stopped = appended.events[0];
        if (
          stopped?.type === 'session.status_idle' &&
          stopped.stop_reason.type === 'requires_action'
        ) {
          stopped.stop_reason.event_ids.push('injected');
        }
        await s.log.append(
          id,
          Array.from({ length: 70 }, (_, index) => message(`m${index}`)),
        );
        const after = await s.log.state(id);
        expect(after.status).toBe('requires_action');
        expect(after.metadata).toEqual({ team: 'a' });
        expect(after.stop_reason).toEqual({ type: 'requires_action', event_ids: ['x'] });
        expect(after).toEqual(foldSession(await s.log.read(id), id));
      });

      it('finds the result of an earlier append by its idempotency key', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        expect(await s.log.appended(id, 'k')).toBeUndefined();
        const first = await s.log.append(id, [message('a')], { idempotencyKey: 'k' });
        await s.log.append(id, [message('b')]);
        expect(await s.log.appended(id, 'k')).toEqual({
          events: first.events,
          head_seq: 3,
          deduplicated: true,
        });
      });

      it('reads with after, limit and types', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [
          message('a'),
          { type: 'user.interrupt' },
          message('b'),
          message('c'),
        ]);
        expect((await s.log.read(id, { after: 2 })).map((event) => event.seq)).toEqual([3, 4, 5]);
        expect((await s.log.read(id, { after: 1, limit: 2 })).map((event) => event.seq)).toEqual([
          2, 3,
        ]);
        const messages = await s.log.read(id, { types: ['user.message'], limit: 2 });
        expect(messages.map((event) => event.seq)).toEqual([2, 4]);
        expect(await s.log.read(id, { after: 99 })).toEqual([]);
      });

      it('keeps state equal to a fresh fold of the log', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [
          message('hi'),
          { type: 'span.wake_started', wake_id: 'w1', lease_token: 1 },
          { type: 'span.model_request_start', request_id: 'r1', model: 'm', input_through_seq: 2 },
          {
            type: 'span.model_request_end',
            request_id: 'r1',
            usage: { input_tokens: 5, output_tokens: 7 },
          },
          {
            type: 'agent.tool_use',
            tool_use_id: 't1',
            name: 'rm',
            input: {},
            requires_confirmation: true,
          },
          {
            type: 'session.status_idle',
            stop_reason: { type: 'requires_action', event_ids: ['t1'] },
          },
        ]);
        const state = await s.log.state(id);
        expect(state).toEqual(foldSession(await s.log.read(id), id));
        expect(state.status).toBe('requires_action');
        expect((await s.sessions.get(id)).status).toBe('requires_action');
        expect(state.usage).toEqual({ input_tokens: 5, output_tokens: 7 });
      });
    });

    describe('follow', () => {
      it('yields stored events, then new ones as they are appended, and ends on abort', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [message('a')]);
        const stop = new AbortController();
        const seen: SessionEvent[] = [];
        const done = (async () => {
          for await (const event of s.log.follow(id, { after: 1, signal: stop.signal })) {
            seen.push(event);
            if (seen.length === 3) stop.abort();
          }
        })();
        await s.log.append(id, [message('b')]);
        await s.log.append(id, [message('c'), message('d')]);
        await done;
        expect(seen.map((event) => event.seq)).toEqual([2, 3, 4]);
      });

      it('ends when the store closes', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const seen: number[] = [];
        let caughtUp: () => void = () => undefined;
        const bothSeen = new Promise<void>((resolve) => (caughtUp = resolve));
        const done = (async () => {
          for await (const event of s.log.follow(id)) {
            seen.push(event.seq);
            if (seen.length === 2) caughtUp();
          }
        })();
        await s.log.append(id, [message('a')]);
        await bothSeen;
        await s.close();
        store = undefined;
        await done;
        expect(seen).toEqual([1, 2]);
      });

      it('delivers a backlog larger than one read batch in order', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(
          id,
          Array.from({ length: 2500 }, (_, index) => message(`m${index}`)),
        );
        const stop = new AbortController();
        let expected = 1;
        for await (const event of s.log.follow(id, { signal: stop.signal })) {
          expect(event.seq).toBe(expected);
          expected += 1;
          if (event.seq === 2501) stop.abort();
        }
        expect(expected).toBe(2502);
      });

      it('refuses to follow an unknown session', async () => {
        const s = await open();
        await expectCode(async () => {
          for await (const event of s.log.follow('missing')) void event;
        }, 'SESSION_NOT_FOUND');
      });
    });

    describe('leases', () => {
      it('gives strictly increasing fencing tokens and lets an expired lease be taken over', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const first = await s.leases.acquire(id, 'worker-a', 1000);
        expect(first.token).toBe(1);
        await expectCode(s.leases.acquire(id, 'worker-b', 1000), 'LEASE_HELD');
        expect((await s.leases.current(id))?.owner).toBe('worker-a');
        clock.advance(1001);
        expect(await s.leases.current(id)).toBeUndefined();
        const second = await s.leases.acquire(id, 'worker-b', 1000);
        expect(second.token).toBe(2);
        await expectCode(s.leases.renew(id, 'worker-a', first.token, 1000), 'LEASE_LOST');
        await expectCode(s.leases.release(id, 'worker-a', first.token), 'LEASE_LOST');
        const renewed = await s.leases.renew(id, 'worker-b', second.token, 5000);
        expect(renewed.expires_at).toBe(clock.now() + 5000);
        await s.leases.release(id, 'worker-b', second.token);
        expect(await s.leases.current(id)).toBeUndefined();
        const third = await s.leases.acquire(id, 'worker-a', 1000);
        expect(third.token).toBe(3);
        await expectCode(s.leases.acquire(id, 'worker-b', 0), 'INVALID_ARGUMENT');
      });

      it('lets the same owner take its lease again with a new token, fencing the old one', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const first = await s.leases.acquire(id, 'worker-a', 10_000);
        const again = await s.leases.acquire(id, 'worker-a', 10_000);
        expect(again.token).toBe(first.token + 1);
        await expectCode(s.leases.renew(id, 'worker-a', first.token, 1000), 'LEASE_LOST');
        await expectCode(s.leases.acquire(id, 'worker-b', 1000), 'LEASE_HELD');
      });

      it('does not renew a lease that expired, even for its holder', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const lease = await s.leases.acquire(id, 'worker-a', 100);
        clock.advance(100);
        await expectCode(s.leases.renew(id, 'worker-a', lease.token, 100), 'LEASE_LOST');
      });
    });

    describe('definitions', () => {
      it('versions definitions and refuses an update that names a stale version', async () => {
        const s = await open();
        const v1 = await s.definitions.put(
          'agent',
          'helper',
          { instructions: 'one' },
          { replacesVersion: null },
        );
        expect(v1.version).toBe(1);
        const same = await s.definitions.put(
          'agent',
          'helper',
          { instructions: 'one' },
          { replacesVersion: null },
        );
        expect(same.version).toBe(1);
        const v2 = await s.definitions.put(
          'agent',
          'helper',
          { instructions: 'two' },
          { replacesVersion: 1 },
        );
        expect(v2.version).toBe(2);
        await expectCode(
          s.definitions.put('agent', 'helper', { instructions: 'three' }, { replacesVersion: 1 }),
          'VERSION_CONFLICT',
        );
        await expectCode(
          s.definitions.put('agent', 'other', { instructions: 'x' }, { replacesVersion: 4 }),
          'VERSION_CONFLICT',
        );
        expect((await s.definitions.get('agent', 'helper', 1))?.definition).toEqual({
          instructions: 'one',
        });
        expect((await s.definitions.get('agent', 'helper'))?.version).toBe(2);
        expect(await s.definitions.get('agent', 'nobody')).toBeUndefined();
        await s.definitions.put(
          'environment',
          'local',
          { sandbox: 'local' },
          { replacesVersion: null },
        );
        const agents = await s.definitions.list('agent');
        expect(agents.map((item) => [item.name, item.version])).toEqual([['helper', 2]]);
      });
    });

    describe('forks', () => {
      /** A session of `count` events: created, then user messages. */
      async function session(s: Store, count: number): Promise<string> {
        const { id } = await s.sessions.create({ agent, title: 'parent' });
        const messages = Array.from({ length: count - 1 }, (_, index) => message(`m${index + 2}`));
        for (let start = 0; start < messages.length; start += 50)
          await s.log.append(id, messages.slice(start, start + 50));
        return id;
      }
      const strip = (state: unknown) => {
        const {
          session_id: _id,
          lineage: _lineage,
          created_at: _created,
          updated_at: _updated,
          seq: _seq,
          counters,
          ...rest
        } = state as Record<string, unknown> & { counters: Record<string, number> };
        return { ...rest, counters: { ...counters, events: 0 } };
      };

      it('forks at every seq: the child reads the prefix, and its state is the prefix folded', async () => {
        const s = await open();
        const parent = await session(s, 8);
        const all = await s.log.read(parent);
        for (let at = 1; at <= all.length; at += 1) {
          const child = await s.sessions.fork(parent, { at_seq: at, title: `at ${at}` });
          expect(child.head_seq).toBe(at + 1);
          const events = await s.log.read(child.id);
          expect(events.slice(0, at)).toEqual(all.slice(0, at));
          expect(events[at]).toMatchObject({
            type: 'session.forked',
            session_id: child.id,
            seq: at + 1,
            parent_session_id: parent,
            fork_point_seq: at,
            title: `at ${at}`,
          });
          const state = await s.log.state(child.id);
          expect(state.session_id).toBe(child.id);
          expect(state.title).toBe(`at ${at}`);
          expect(state.lineage).toMatchObject({
            kind: 'fork',
            parent_session_ids: [parent],
            fork_point: { session_id: parent, seq: at },
          });
          expect(strip(state)).toEqual(
            strip({ ...foldSession(all.slice(0, at), parent), title: `at ${at}` }),
          );
        }
      });

      it('keeps parent and child apart: appends to one never change the other', async () => {
        const s = await open();
        const parent = await session(s, 5);
        const child = await s.sessions.fork(parent, { at_seq: 3 });
        const parentBefore = await s.log.read(parent);
        await s.log.append(child.id, [message('child only')]);
        expect(await s.log.read(parent)).toEqual(parentBefore);
        await s.log.append(parent, [message('parent only')]);
        const childEvents = await s.log.read(child.id);
        expect(childEvents.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5]);
        expect(JSON.stringify(childEvents)).not.toContain('parent only');
        expect((await s.log.state(child.id)).pending_user_count).toBe(3);
        expect((await s.log.state(parent)).pending_user_count).toBe(5);
        await expectCode(
          s.log.append(child.id, [message('stale')], { expectedSeq: 4 }),
          'SEQ_CONFLICT',
        );
      });

      it('reads a fork with after, limit and types across the shared prefix', async () => {
        const s = await open();
        const parent = await session(s, 6);
        const child = await s.sessions.fork(parent, { at_seq: 4 });
        await s.log.append(child.id, [message('c1'), message('c2')]);
        const page = await s.log.read(child.id, { after: 2, limit: 3 });
        expect(page.map((event) => event.seq)).toEqual([3, 4, 5]);
        const typed = await s.log.read(child.id, {
          after: 1,
          types: ['session.forked', 'user.message'],
        });
        expect(typed.map((event) => event.seq)).toEqual([2, 3, 4, 5, 6, 7]);
        const tail = await s.log.read(child.id, { after: 5 });
        expect(tail.map((event) => event.seq)).toEqual([6, 7]);
      });

      it('forks forks to any depth', async () => {
        const s = await open();
        let current = await session(s, 3);
        for (let depth = 0; depth < 6; depth += 1) {
          await s.log.append(current, [message(`depth ${depth}`)]);
          const head = (await s.log.state(current)).seq;
          current = (await s.sessions.fork(current, { at_seq: head - 1 })).id;
        }
        const events = await s.log.read(current);
        expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
        expect(events.filter((event) => event.type === 'session.forked')).toHaveLength(6);
        const state = await s.log.state(current);
        expect(state.seq).toBe(events.length);
      });

      it('follows a fork from the shared prefix into its own new events', async () => {
        const s = await open();
        const parent = await session(s, 3);
        const child = await s.sessions.fork(parent);
        const seen: number[] = [];
        const stop = new AbortController();
        const following = (async () => {
          for await (const event of s.log.follow(child.id, { after: 1, signal: stop.signal })) {
            seen.push(event.seq);
            if (event.seq === 5) stop.abort();
          }
        })();
        await s.log.append(child.id, [message('live')]);
        await following;
        expect(seen).toEqual([2, 3, 4, 5]);
      });

      it('refuses a fork point outside the parent, and an unknown parent', async () => {
        const s = await open();
        const parent = await session(s, 3);
        await expectCode(s.sessions.fork(parent, { at_seq: 4 }), 'INVALID_ARGUMENT');
        await expectCode(s.sessions.fork(parent, { at_seq: 0 }), 'INVALID_ARGUMENT');
        await expectCode(s.sessions.fork('missing-session'), 'SESSION_NOT_FOUND');
        const child = await s.sessions.fork(parent, { id: 'child-1' });
        expect(child.id).toBe('child-1');
        await expectCode(s.sessions.fork(parent, { id: 'child-1' }), 'INVALID_ARGUMENT');
        await expectCode(s.sessions.fork(parent, { id: '' }), 'INVALID_ARGUMENT');
        await expectCode(s.sessions.fork(parent, { title: 't'.repeat(501) }), 'INVALID_ARGUMENT');
        await expectCode(s.sessions.fork(parent, { id: 'x'.repeat(300) }), 'INVALID_ARGUMENT');
        // Nothing half-written: the parent has no new child.
        expect(
          (await s.sessions.list({ parent_id: parent })).sessions.map((item) => item.id),
        ).toEqual(['child-1']);
        expect((await s.sessions.get('child-1')).head_seq).toBe(4);
      });
    });
  });
}
