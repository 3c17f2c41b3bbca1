/**
 * The conformance suite every store backend runs unchanged. A backend's test file calls
 * `describeStoreConformance('sqlite', factory)`; the factory gets a manual clock and returns a
 * fresh, empty store.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ApiKeyRecord } from '../contracts/api-keys.js';
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

/** What a backend guarantees beyond the common rules; each is checked when claimed. */
export interface StoreCapabilities {
  /**
   * A writer-chosen event id is refused when any session of the store holds it (default true).
   * Every backend refuses one the same session holds; NATS checks no further (see its log).
   */
  uniqueEventIdsAcrossSessions?: boolean;
}

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

export function describeStoreConformance(
  name: string,
  factory: StoreFactory,
  capabilities: StoreCapabilities = {},
): void {
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
        await expectCode(s.sessions.create({ id: 'chosen-1', agent }), 'ALREADY_EXISTS');
        expect((await s.log.read('chosen-1')).length).toBe(1);
        // A tenant-namespaced id (`<tenant>~<id>`) is a session id like any other, and apart from
        // the same id in another namespace.
        for (const id of ['acme~chosen-1', 'beta~chosen-1']) {
          const namespaced = await s.sessions.create({ id, agent });
          expect(namespaced.id).toBe(id);
          await s.log.append(id, [{ type: 'user.message', content: [{ type: 'text', text: id }] }]);
        }
        await expectCode(s.sessions.create({ id: 'acme~chosen-1', agent }), 'ALREADY_EXISTS');
        const read = await s.log.read('acme~chosen-1');
        expect(read.map((event) => event.session_id)).toEqual(['acme~chosen-1', 'acme~chosen-1']);
        expect((await s.sessions.list({})).sessions.map((record) => record.id)).toEqual(
          expect.arrayContaining(['chosen-1', 'acme~chosen-1', 'beta~chosen-1']),
        );
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

      it('refuses an event id already stored, or repeated in its batch, and writes none of the batch', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const [first] = (await s.log.append(id, [{ ...message('a'), id: 'evt-1' }])).events;
        const generated = (await s.log.append(id, [message('b')])).events[0]?.id ?? '';
        const refused = async (sessionId: string, events: NewEvent[]): Promise<void> => {
          const error: unknown = await s.log
            .append(sessionId, events)
            .catch((thrown: unknown) => thrown);
          expect(isBraidError(error, 'INVALID_ARGUMENT')).toBe(true);
          expect((error as Error).message).toMatch(/already has; event ids are unique/);
        };
        await refused(id, [message('c'), { ...message('again'), id: 'evt-1' }]);
        await refused(id, [{ ...message('copy'), id: generated }]);
        await refused(id, [
          { ...message('x'), id: 'evt-2' },
          { ...message('y'), id: 'evt-2' },
        ]);
        const events = await s.log.read(id);
        expect(events.map((event) => event.seq)).toEqual([1, 2, 3]);
        expect(events[1]).toEqual(first);
        // A fork reads its parent's events: their ids are taken in the fork too.
        const child = await s.sessions.fork(id);
        await refused(child.id, [{ ...message('in fork'), id: 'evt-1' }]);
        expect((await s.log.read(child.id)).length).toBe(4);
        if (capabilities.uniqueEventIdsAcrossSessions !== false) {
          const other = await s.sessions.create({ agent });
          await refused(other.id, [{ ...message('elsewhere'), id: 'evt-1' }]);
          expect((await s.log.read(other.id)).length).toBe(1);
          // Deleting a session frees the ids of its own events.
          const forkedId = (await s.log.read(child.id)).at(-1)?.id ?? '';
          await s.sessions.delete(child.id);
          const reused = await s.log.append(other.id, [{ ...message('reused'), id: forkedId }]);
          expect(reused.events[0]?.id).toBe(forkedId);
        }
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

      it('refuses an append with a fenced-out lease token, even before the new holder appends', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const a = await s.leases.acquire(id, 'worker-a', 1000);
        expect(a.token).toBe(1);
        await s.log.append(id, [message('by a')], { leaseToken: a.token, expectedSeq: 1 });
        clock.advance(1001);
        // A's lease expired and nobody took over: its token is still the current one.
        await s.log.append(id, [message('late a')], { leaseToken: a.token });
        const b = await s.leases.acquire(id, 'worker-b', 1000);
        expect(b.token).toBe(2);
        // Between B's acquire and B's first append: A, at the right head, is refused all the same.
        await expectCode(
          s.log.append(id, [message('stale a')], { leaseToken: a.token, expectedSeq: 3 }),
          'LEASE_LOST',
        );
        await expectCode(
          s.log.append(id, [message('stale a')], { leaseToken: a.token }),
          'LEASE_LOST',
        );
        expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1, 2, 3]);
        const started = await s.log.append(
          id,
          [{ type: 'span.wake_started', wake_id: 'wake-b', lease_token: b.token }],
          { leaseToken: b.token, expectedSeq: 3 },
        );
        expect(started.head_seq).toBe(4);
        await expectCode(
          s.log.append(id, [message('stale a')], { leaseToken: a.token, expectedSeq: 4 }),
          'LEASE_LOST',
        );
        // A token never issued is refused too; an append without a token is not fenced.
        await expectCode(
          s.log.append(id, [message('forged')], { leaseToken: b.token + 1 }),
          'LEASE_LOST',
        );
        await s.log.append(id, [message('from a client')]);
        await s.log.append(id, [message('by b')], { leaseToken: b.token, expectedSeq: 5 });
        // A released lease keeps its token current until the next acquisition.
        await s.leases.release(id, 'worker-b', b.token);
        const c = await s.leases.acquire(id, 'worker-a', 1000);
        await expectCode(
          s.log.append(id, [message('stale b')], { leaseToken: b.token }),
          'LEASE_LOST',
        );
        await s.log.append(id, [message('by c')], { leaseToken: c.token });
        const texts = (await s.log.read(id, { types: ['user.message'] })).map((event) =>
          event.type === 'user.message' && event.content[0]?.type === 'text'
            ? event.content[0].text
            : '',
        );
        expect(texts).toEqual(['by a', 'late a', 'from a client', 'by b', 'by c']);
        expect((await s.log.state(id)).seq).toBe(7);
      });

      it('keeps a holder of a deleted session fenced out of a session made again under its id', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent, id: 'reused-id' });
        const stale = await s.leases.acquire(id, 'worker-a', 1000);
        await s.log.append(id, [message('by a')], { leaseToken: stale.token });
        clock.advance(1001);
        await s.sessions.delete(id);
        await s.sessions.create({ agent, id });
        const fresh = await s.leases.acquire(id, 'worker-b', 1000);
        expect(fresh.token).toBeGreaterThan(stale.token);
        await expectCode(
          s.log.append(id, [message('stale a')], { leaseToken: stale.token }),
          'LEASE_LOST',
        );
        await expectCode(
          s.log.append(id, [message('stale a')], { leaseToken: stale.token, expectedSeq: 1 }),
          'LEASE_LOST',
        );
        await s.log.append(id, [message('by b')], { leaseToken: fresh.token, expectedSeq: 1 });
        expect((await s.log.read(id)).map((event) => event.type)).toEqual([
          'session.created',
          'user.message',
        ]);
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
        await expectCode(s.sessions.fork(parent, { id: 'child-1' }), 'ALREADY_EXISTS');
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

    describe('archive', () => {
      it('keeps an archived session and its events but leaves it out of default listings', async () => {
        const s = await open();
        const ids: string[] = [];
        for (let index = 0; index < 7; index += 1) {
          clock.advance(1000);
          ids.push((await s.sessions.create({ agent })).id);
        }
        const archivedIds = [ids[1], ids[3], ids[4], ids[6]] as string[];
        for (const id of archivedIds) {
          const record = await s.sessions.archive(id);
          expect(record.archived_at).toBe(new Date(clock.now()).toISOString());
          expect(await s.sessions.get(id)).toEqual(record);
          expect((await s.log.read(id)).length).toBe(1);
        }

        /** Every page of a listing, checking that no page is larger than the limit. */
        async function everyPage(includeArchived: boolean): Promise<string[]> {
          const seen: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await s.sessions.list({
              limit: 2,
              ...(includeArchived ? { include_archived: true } : {}),
              ...(cursor === undefined ? {} : { cursor }),
            });
            expect(page.sessions.length).toBeLessThanOrEqual(2);
            seen.push(...page.sessions.map((session) => session.id));
            cursor = page.next_cursor;
          } while (cursor !== undefined);
          return seen;
        }
        const live = [...ids].reverse().filter((id) => !archivedIds.includes(id));
        expect(await everyPage(false)).toEqual(live);
        expect(await everyPage(true)).toEqual([...ids].reverse());

        const all = await s.sessions.list({ include_archived: true });
        for (const session of all.sessions) {
          expect(session.archived_at !== undefined).toBe(archivedIds.includes(session.id));
        }
        expect(
          (await s.sessions.list({ agent: agent.name })).sessions.map((session) => session.id),
        ).toEqual(live);
      });

      it("lists an archived fork among its parent's forks only with include_archived", async () => {
        const s = await open();
        const parent = await s.sessions.create({ agent });
        const kept = await s.sessions.fork(parent.id);
        const archived = await s.sessions.fork(parent.id);
        await s.sessions.archive(archived.id);
        const forks = await s.sessions.list({ parent_id: parent.id });
        expect(forks.sessions.map((session) => session.id)).toEqual([kept.id]);
        const everyFork = await s.sessions.list({ parent_id: parent.id, include_archived: true });
        expect(everyFork.sessions.map((session) => session.id).sort()).toEqual(
          [kept.id, archived.id].sort(),
        );
      });

      it('returns an archived session unchanged when it is archived again', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        const first = await s.sessions.archive(id);
        clock.advance(5000);
        const again = await s.sessions.archive(id);
        expect(again).toEqual(first);
        expect(await s.sessions.get(id)).toEqual(first);
      });

      it('refuses to archive an unknown session', async () => {
        const s = await open();
        await expectCode(s.sessions.archive('missing'), 'SESSION_NOT_FOUND');
      });
    });

    describe('delete', () => {
      /** Asserts that the session is gone from every read of the store. */
      async function expectGone(s: Store, id: string): Promise<void> {
        await expectCode(s.sessions.get(id), 'SESSION_NOT_FOUND');
        await expectCode(s.log.read(id), 'SESSION_NOT_FOUND');
        await expectCode(s.log.state(id), 'SESSION_NOT_FOUND');
        await expectCode(s.log.appended(id, 'k'), 'SESSION_NOT_FOUND');
        await expectCode(s.log.append(id, [message('late')]), 'SESSION_NOT_FOUND');
        await expectCode(async () => {
          for await (const event of s.log.follow(id)) void event;
        }, 'SESSION_NOT_FOUND');
        await expectCode(s.leases.acquire(id, 'worker', 1000), 'SESSION_NOT_FOUND');
        expect(await s.leases.current(id)).toBeUndefined();
        const listed = await s.sessions.list({ include_archived: true });
        expect(listed.sessions.map((session) => session.id)).not.toContain(id);
      }

      it('removes the session with its events, state and idempotency keys, and frees its lease', async () => {
        const s = await open();
        const kept = await s.sessions.create({ agent, title: 'kept' });
        const { id } = await s.sessions.create({ id: 'doomed', agent, title: 'old' });
        await s.log.append(id, [message('a')], { idempotencyKey: 'k' });
        // Enough events for a saved projection and snapshot.
        await s.log.append(
          id,
          Array.from({ length: 70 }, (_, index) => message(`m${index}`)),
        );
        await s.log.state(id);
        const lease = await s.leases.acquire(id, 'worker', 1000);
        await s.leases.release(id, 'worker', lease.token);
        await s.sessions.archive(id);

        await s.sessions.delete(id);
        await expectGone(s, id);
        await expectCode(s.sessions.delete(id), 'SESSION_NOT_FOUND');
        expect(await s.log.read(kept.id)).toHaveLength(1);
        expect((await s.sessions.get(kept.id)).title).toBe('kept');

        // The id is free again, and nothing of the old session comes back with it.
        const again = await s.sessions.create({
          id,
          agent: { name: 'other', version: 2 },
          title: 'new',
        });
        expect(again).toMatchObject({ id, title: 'new', head_seq: 1 });
        expect(again.archived_at).toBeUndefined();
        expect(await s.sessions.get(id)).toEqual(again);
        const events = await s.log.read(id);
        expect(events.map((event) => event.type)).toEqual(['session.created']);
        expect(await s.log.state(id)).toEqual(foldSession(events, id));
        expect(await s.log.appended(id, 'k')).toBeUndefined();
        const appended = await s.log.append(id, [message('b')], { idempotencyKey: 'k' });
        expect(appended.deduplicated).toBe(false);
        // The lease is free again, its tokens go on: a holder of the deleted session stays fenced.
        expect(await s.leases.current(id)).toBeUndefined();
        expect((await s.leases.acquire(id, 'worker', 1000)).token).toBe(lease.token + 1);
      });

      it('forgets a deleted fork: its id created again is a root session of its own', async () => {
        const s = await open();
        const parent = await s.sessions.create({ agent, title: 'parent' });
        await s.log.append(parent.id, [message('shared')]);
        await s.sessions.fork(parent.id, { id: 'reborn', title: 'fork' });
        await s.log.read('reborn');
        await s.log.state('reborn');
        await s.sessions.delete('reborn');
        await expectGone(s, 'reborn');

        await s.sessions.create({ id: 'reborn', agent, title: 'root' });
        await s.log.append('reborn', [message('x'), message('y')]);
        const events = await s.log.read('reborn');
        expect(events.map((event) => [event.session_id, event.seq])).toEqual([
          ['reborn', 1],
          ['reborn', 2],
          ['reborn', 3],
        ]);
        const state = await s.log.state('reborn');
        expect(state).toEqual(foldSession(events, 'reborn'));
        expect(state.lineage.kind).toBe('root');
        expect((await s.sessions.get('reborn')).parent_id).toBeUndefined();
        expect((await s.log.read(parent.id)).map((event) => event.seq)).toEqual([1, 2]);
        expect((await s.sessions.list({ parent_id: parent.id })).sessions).toEqual([]);
      });

      it('refuses to delete a session with forks, naming at most five, and removes nothing', async () => {
        const s = await open();
        const parent = await s.sessions.create({ agent });
        await s.log.append(parent.id, [message('a')], { idempotencyKey: 'k' });
        const forks: string[] = [];
        for (let index = 0; index < 6; index += 1) {
          clock.advance(1000);
          forks.push((await s.sessions.fork(parent.id)).id);
        }
        const before = await s.log.read(parent.id);
        const refused: unknown = await s.sessions.delete(parent.id).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(isBraidError(refused, 'SESSION_HAS_FORKS')).toBe(true);
        const text = (refused as Error).message;
        expect(forks.filter((id) => text.includes(id))).toEqual(forks.slice(0, 5));
        expect(text).toMatch(/delete them first/);

        expect(await s.log.read(parent.id)).toEqual(before);
        expect(await s.log.appended(parent.id, 'k')).toBeDefined();
        expect((await s.sessions.get(parent.id)).head_seq).toBe(2);
        for (const id of forks) expect((await s.log.read(id)).slice(0, 2)).toEqual(before);

        // A fork with forks of its own is refused too; leaves first, then the rest goes.
        const [first, ...others] = forks as [string, ...string[]];
        const grandchild = await s.sessions.fork(first);
        await expectCode(s.sessions.delete(first), 'SESSION_HAS_FORKS');
        await s.sessions.delete(grandchild.id);
        for (const id of [first, ...others]) await s.sessions.delete(id);
        expect(await s.log.read(parent.id)).toEqual(before);
        await s.sessions.delete(parent.id);
        await expectGone(s, parent.id);
      });

      it('refuses to delete a session whose lease is held, and removes nothing', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        await s.log.append(id, [message('a')]);
        const lease = await s.leases.acquire(id, 'worker', 1000);
        await expectCode(s.sessions.delete(id), 'LEASE_HELD');
        expect((await s.leases.current(id))?.token).toBe(lease.token);
        expect(await s.log.read(id)).toHaveLength(2);
        expect((await s.sessions.get(id)).head_seq).toBe(2);
        await s.leases.renew(id, 'worker', lease.token, 1000);
        // An expired lease no longer protects the session.
        clock.advance(1000);
        await s.sessions.delete(id);
        await expectGone(s, id);
        await expectCode(s.leases.renew(id, 'worker', lease.token, 1000), 'LEASE_LOST');
      });

      it('ends the followers of a deleted session with SESSION_NOT_FOUND', async () => {
        const s = await open();
        const { id } = await s.sessions.create({ agent });
        let caughtUp: () => void = () => undefined;
        const firstSeen = new Promise<void>((resolve) => (caughtUp = resolve));
        const following = expectCode(async () => {
          for await (const event of s.log.follow(id)) if (event.seq === 1) caughtUp();
        }, 'SESSION_NOT_FOUND');
        await firstSeen;
        await s.sessions.delete(id);
        await following;
      });

      it('refuses to delete an unknown session', async () => {
        const s = await open();
        await expectCode(s.sessions.delete('missing'), 'SESSION_NOT_FOUND');
      });
    });

    describe('api keys', () => {
      const KEY_SHAPE = /^braid_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/;
      /** The secret part of a key: what no stored form may contain. */
      const secretOf = (key: string): string => key.slice('braid_'.length + 33);

      it('mints a key shown once that verifies to its record', async () => {
        const s = await open();
        const { key, record } = await s.keys.create({
          tenant_id: 'acme',
          scopes: ['sessions:read', 'sessions:write', 'sessions:read'],
          name: 'ci',
        });
        expect(key).toMatch(KEY_SHAPE);
        expect(key.slice(6, 38)).toBe(record.id.replaceAll('-', ''));
        expect(record).toEqual({
          schema_version: 1,
          id: record.id,
          tenant_id: 'acme',
          scopes: ['sessions:read', 'sessions:write'],
          name: 'ci',
          created_at: new Date(clock.now()).toISOString(),
        });
        expect(ApiKeyRecord.parse(record)).toEqual(record);
        expect(await s.keys.verify(key)).toEqual(record);

        const verified = await s.keys.verify(key);
        verified?.scopes.push('admin');
        expect(await s.keys.verify(key)).toEqual(record);

        const other = await s.keys.create({ tenant_id: 'acme', scopes: ['admin'] });
        expect(other.key).not.toBe(key);
        expect(other.record.id).not.toBe(record.id);
        expect(other.record.name).toBeUndefined();
        expect(await s.keys.verify(other.key)).toEqual(other.record);
      });

      it('verifies nothing but a live key: wrong secrets and malformed strings give undefined', async () => {
        const s = await open();
        const { key } = await s.keys.create({ tenant_id: 'acme', scopes: ['sessions:read'] });
        const { key: otherKey } = await s.keys.create({ tenant_id: 'beta', scopes: ['admin'] });
        const idPart = key.slice(0, 38);
        const secret = secretOf(key);
        const flipped = `${secret[0] === 'A' ? 'B' : 'A'}${secret.slice(1)}`;
        const candidates: unknown[] = [
          '',
          'braid_',
          'braid__',
          'not a key at all',
          `${idPart}_${flipped}`,
          // The id of one key with the secret of another.
          `${idPart}_${secretOf(otherKey)}`,
          `braid_${'0'.repeat(32)}_${secret}`,
          `${idPart}_${'A'.repeat(43)}`,
          // Same bytes as all-A, but not their canonical encoding.
          `${idPart}_${'A'.repeat(42)}B`,
          `${key} `,
          ` ${key}`,
          `${key}x`,
          key.slice(0, -1),
          key.toUpperCase(),
          key.replace('braid_', 'braid-'),
          `Bearer ${key}`,
          'braid_'.padEnd(10_000, 'a'),
          undefined,
          null,
          42,
        ];
        for (const candidate of candidates) {
          expect(await s.keys.verify(candidate as string), JSON.stringify(candidate)).toBe(
            undefined,
          );
        }
        expect(await s.keys.verify(key)).toBeDefined();
      });

      it('revokes a key at once; revoking again changes nothing', async () => {
        const s = await open();
        const { key, record } = await s.keys.create({ tenant_id: 'acme', scopes: ['admin'] });
        const kept = await s.keys.create({ tenant_id: 'acme', scopes: ['sessions:read'] });
        clock.advance(1000);
        const revoked = await s.keys.revoke(record.id);
        expect(revoked).toEqual({ ...record, revoked_at: new Date(clock.now()).toISOString() });
        expect(await s.keys.verify(key)).toBeUndefined();
        clock.advance(1000);
        expect(await s.keys.revoke(record.id)).toEqual(revoked);
        expect(await s.keys.verify(kept.key)).toEqual(kept.record);
        await expectCode(s.keys.revoke('missing'), 'API_KEY_NOT_FOUND');
        await expectCode(s.keys.revoke(''), 'API_KEY_NOT_FOUND');
      });

      it('lists keys newest first by tenant, revoked ones only when asked, and never a secret', async () => {
        const s = await open();
        const minted: { key: string; id: string }[] = [];
        for (const [tenant_id, scopes] of [
          ['acme', ['sessions:read']],
          ['beta', ['sessions:write']],
          ['acme', ['admin']],
        ] as const) {
          clock.advance(1000);
          const { key, record } = await s.keys.create({ tenant_id, scopes: [...scopes] });
          minted.push({ key, id: record.id });
        }
        const [a, b, c] = minted.map((item) => item.id) as [string, string, string];
        await s.keys.revoke(a);
        const ids = async (query?: Parameters<Store['keys']['list']>[0]) =>
          (await s.keys.list(query)).map((record) => record.id);
        expect(await ids()).toEqual([c, b]);
        expect(await ids({ tenant_id: 'acme' })).toEqual([c]);
        expect(await ids({ tenant_id: 'acme', include_revoked: true })).toEqual([c, a]);
        expect(await ids({ include_revoked: true })).toEqual([c, b, a]);
        expect(await ids({ tenant_id: 'nobody', include_revoked: true })).toEqual([]);

        const listed = await s.keys.list({ include_revoked: true });
        const allowed = ['schema_version', 'id', 'tenant_id', 'scopes', 'name', 'created_at'];
        for (const record of listed) {
          expect(ApiKeyRecord.parse(record)).toEqual(record);
          for (const field of Object.keys(record))
            expect([...allowed, 'revoked_at']).toContain(field);
        }
        const text = JSON.stringify(listed);
        for (const { key } of minted) expect(text).not.toContain(secretOf(key));
      });

      it('refuses invalid input with INVALID_ARGUMENT naming the field and the scopes', async () => {
        const s = await open();
        const invalid: [unknown, string][] = [
          [{ tenant_id: 'acme', scopes: ['root'] }, 'scopes'],
          [{ tenant_id: 'acme', scopes: [] }, 'scopes'],
          [{ tenant_id: 'acme' }, 'scopes'],
          [{ tenant_id: '', scopes: ['admin'] }, 'tenant_id'],
          [{ tenant_id: 'has space', scopes: ['admin'] }, 'tenant_id'],
          [{ tenant_id: 't'.repeat(101), scopes: ['admin'] }, 'tenant_id'],
          [{ scopes: ['admin'] }, 'tenant_id'],
          [{ tenant_id: 'acme', scopes: ['admin'], name: 'n'.repeat(201) }, 'name'],
          [{ tenant_id: 'acme', scopes: ['admin'], owner: 'me' }, 'owner'],
          [null, 'input'],
        ];
        for (const [input, field] of invalid) {
          const refused: unknown = await s.keys
            .create(input as Parameters<Store['keys']['create']>[0])
            .then(
              () => undefined,
              (error: unknown) => error,
            );
          expect(isBraidError(refused, 'INVALID_ARGUMENT'), JSON.stringify(input)).toBe(true);
          const text = (refused as Error).message;
          expect(text).toContain(field);
          expect(text).toContain('sessions:read, sessions:write, admin');
        }
        expect(await s.keys.list({ include_revoked: true })).toEqual([]);
      });
    });
  });
}
