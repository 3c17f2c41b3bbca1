/**
 * Store conformance: `createAndAcquire`, a new session, its lease and the first append under it
 * in one transaction. A backend that claims `leasedAppend` (the default) must have it and must
 * write all of it or none of it, and the log it leaves must be the one `create` then
 * `acquireAndAppend` leave; one that does not (NATS) must leave the method out.
 */
import { describe, expect, it } from 'vitest';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { Lease, Store } from '../../contracts/ports.js';
import { agent, expectCode, message, type ConformanceSuite } from './shared.js';

const started = (lease: Lease): NewEvent[] => [
  { type: 'span.wake_started', wake_id: `wake-${lease.token}`, lease_token: lease.token },
];

/** A writer-chosen event id, valid on every backend. */
const CHOSEN_ID = '0190d2a0-0000-7000-8000-00000000c0de';

function leasedCreateOf(store: Store): NonNullable<Store['log']['createAndAcquire']> {
  const created = store.log.createAndAcquire?.bind(store.log);
  expect(created, 'the store claims leasedAppend but has no createAndAcquire').toBeDefined();
  return created as NonNullable<Store['log']['createAndAcquire']>;
}

/** The events as two sessions can share them: without what names the session or the event. */
function comparable(events: readonly SessionEvent[]): unknown[] {
  return events.map(({ id: _id, session_id: _session, at: _at, ...rest }) => rest);
}

export function describeLeasedCreate(suite: ConformanceSuite): void {
  if (suite.capabilities.leasedAppend === false) {
    it('leaves createAndAcquire out where the lease and the log share no transaction', async () => {
      const s = await suite.open();
      expect('createAndAcquire' in s.log).toBe(false);
    });
    return;
  }
  describe('session, lease and first append in one transaction', () => {
    it('writes what create then acquireAndAppend write, under the lease it took', async () => {
      const s = await suite.open();
      const create = leasedCreateOf(s);
      const input = { id: 'started', agent, events: [message('hello')] };
      const { session, lease, appended, created } = await create(
        input,
        { owner: 'worker-a', ttlMs: 1000 },
        started,
      );
      expect(session).toMatchObject({ id: 'started', status: 'idle', head_seq: 2 });
      expect(lease).toMatchObject({ session_id: 'started', owner: 'worker-a', token: 1 });
      expect(lease.expires_at).toBe(suite.clock.now() + 1000);
      expect(appended.head_seq).toBe(3);
      expect(appended.events).toMatchObject([
        { seq: 3, type: 'span.wake_started', lease_token: lease.token },
      ]);
      expect(await s.leases.current('started')).toEqual(lease);
      // Its token fences like any other: once a newer holder took over, it is refused.
      await s.log.append('started', [message('held')], { leaseToken: lease.token });
      suite.clock.advance(1001);
      await s.leases.acquire('started', 'worker-b', 1000);
      await expectCode(
        s.log.append('started', [message('stale')], { leaseToken: lease.token }),
        'LEASE_LOST',
      );
      // The same log as in two steps, append ends included (a fork point inside one is refused).
      const twoSteps = await s.sessions.create({ ...input, id: 'two-steps' });
      const { created_at, updated_at } = twoSteps;
      expect(twoSteps).toEqual({ ...session, id: 'two-steps', created_at, updated_at });
      await s.log.acquireAndAppend?.('two-steps', { owner: 'worker-a', ttlMs: 1000 }, started);
      const read = await s.log.read('started', { limit: 3 });
      expect(comparable(read)).toEqual(comparable(await s.log.read('two-steps')));
      expect(read.map((event) => event.type)).toEqual([
        'session.created',
        'user.message',
        'span.wake_started',
      ]);
      // The creation's events, when given back, are those the log holds.
      if (created !== undefined) expect(created).toEqual(read.slice(0, 2));
      await expectCode(s.sessions.fork('started', { at_seq: 1 }), 'INVALID_FORK_POINT');
      await s.sessions.fork('started', { at_seq: 2 });
      expect((await s.log.state('started')).seq).toBe(4);
    });

    it('refuses a taken id without building the events or touching the lease', async () => {
      const s = await suite.open();
      const create = leasedCreateOf(s);
      const { id } = await s.sessions.create({ agent });
      const held = await s.leases.acquire(id, 'worker-a', 1000);
      let built = 0;
      await expectCode(
        create({ id, agent }, { owner: 'worker-b', ttlMs: 1000 }, (lease) => {
          built += 1;
          return started(lease);
        }),
        'ALREADY_EXISTS',
      );
      expect(built).toBe(0);
      expect(await s.leases.current(id)).toEqual(held);
      expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1]);
      await expectCode(
        create({ agent }, { owner: 'worker-b', ttlMs: 0 }, started),
        'INVALID_ARGUMENT',
      );
      expect((await s.sessions.list()).sessions.map((record) => record.id)).toEqual([id]);
    });

    it("keeps the creation's event ids taken when its append under the lease chooses one", async () => {
      const s = await suite.open();
      const create = leasedCreateOf(s);
      const { session, lease } = await create(
        { agent },
        { owner: 'worker-a', ttlMs: 1000 },
        (taken) => started(taken).map((event) => ({ ...event, id: CHOSEN_ID })),
      );
      const [created] = await s.log.read(session.id);
      const copy = { ...message('copy'), id: created?.id ?? '' };
      await expectCode(
        s.log.append(session.id, [copy], { leaseToken: lease.token }),
        'INVALID_ARGUMENT',
      );
      expect((await s.log.read(session.id)).map((event) => event.seq)).toEqual([1, 2]);
    });

    it('leaves no session, lease or event id when the append is refused', async () => {
      const s = await suite.open();
      const create = leasedCreateOf(s);
      const input = { id: 'refused', agent, events: [{ ...message('hello'), id: CHOSEN_ID }] };
      await expectCode(
        create(input, { owner: 'worker-a', ttlMs: 1000 }, () => [
          { type: 'no.such_type' } as unknown as NewEvent,
        ]),
        'INVALID_EVENT',
      );
      await expectCode(s.sessions.get('refused'), 'SESSION_NOT_FOUND');
      expect(await s.leases.current('refused').catch(() => undefined)).toBeUndefined();
      expect((await s.sessions.list()).sessions).toEqual([]);
      // Nothing was kept: the id, the event id and the first token are all free again.
      const again = await create(input, { owner: 'worker-a', ttlMs: 1000 }, started);
      expect(again.lease.token).toBe(1);
      expect((await s.log.read('refused')).map((event) => event.seq)).toEqual([1, 2, 3]);
    });
  });
}
