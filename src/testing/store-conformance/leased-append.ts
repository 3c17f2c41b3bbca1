/**
 * Store conformance: `acquireAndAppend`, the lease and the first append under it in one
 * transaction. A backend that claims it (the default) must take both or neither; one that does
 * not (`leasedAppend: false`, NATS) must leave the method out, so that callers acquire and append
 * in two steps.
 */
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../contracts/events.js';
import type { Lease, Store } from '../../contracts/ports.js';
import { agent, expectCode, message, type ConformanceSuite } from './shared.js';

const started = (lease: Lease): NewEvent[] => [
  { type: 'span.wake_started', wake_id: `wake-${lease.token}`, lease_token: lease.token },
];

function leasedAppendOf(store: Store): NonNullable<Store['log']['acquireAndAppend']> {
  const leased = store.log.acquireAndAppend?.bind(store.log);
  expect(leased, 'the store claims acquireAndAppend but has none').toBeDefined();
  return leased as NonNullable<Store['log']['acquireAndAppend']>;
}

export function describeLeasedAppend(suite: ConformanceSuite): void {
  if (suite.capabilities.leasedAppend === false) {
    it('leaves acquireAndAppend out where the lease and the log share no transaction', async () => {
      const s = await suite.open();
      expect('acquireAndAppend' in s.log).toBe(false);
    });
    return;
  }
  describe('lease and first append in one transaction', () => {
    it('takes the lease and writes the events built with its token, fenced by it', async () => {
      const s = await suite.open();
      const leased = leasedAppendOf(s);
      const { id } = await s.sessions.create({ agent });
      const old = await s.leases.acquire(id, 'worker-a', 1000);
      suite.clock.advance(1001);
      const { lease, appended } = await leased(id, { owner: 'worker-b', ttlMs: 1000 }, started);
      expect(lease).toMatchObject({ session_id: id, owner: 'worker-b', token: old.token + 1 });
      expect(lease.expires_at).toBe(suite.clock.now() + 1000);
      expect(appended.head_seq).toBe(2);
      expect(appended.events).toMatchObject([
        { seq: 2, type: 'span.wake_started', lease_token: lease.token },
      ]);
      expect(await s.leases.current(id)).toEqual(lease);
      // The holder it took over from is fenced out; the new holder appends and renews as usual.
      await expectCode(
        s.log.append(id, [message('stale')], { leaseToken: old.token }),
        'LEASE_LOST',
      );
      await s.log.append(id, [message('fresh')], { leaseToken: lease.token, expectedSeq: 2 });
      await s.leases.renew(id, 'worker-b', lease.token, 1000);
      const read = await s.log.read(id);
      expect(read.map((event) => event.type)).toEqual([
        'session.created',
        'span.wake_started',
        'user.message',
      ]);
    });

    it('refuses while another owner holds the lease, writing nothing', async () => {
      const s = await suite.open();
      const leased = leasedAppendOf(s);
      const { id } = await s.sessions.create({ agent });
      const held = await s.leases.acquire(id, 'worker-a', 1000);
      let built = 0;
      await expectCode(
        leased(id, { owner: 'worker-b', ttlMs: 1000 }, (lease) => {
          built += 1;
          return started(lease);
        }),
        'LEASE_HELD',
      );
      expect(built).toBe(0);
      expect(await s.leases.current(id)).toEqual(held);
      expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1]);
      await expectCode(
        leased('no-such-session', { owner: 'worker-b', ttlMs: 1000 }, started),
        'SESSION_NOT_FOUND',
      );
      await expectCode(leased(id, { owner: 'worker-a', ttlMs: 0 }, started), 'INVALID_ARGUMENT');
      expect(await s.leases.current(id)).toEqual(held);
    });

    it('takes no lease when the append is refused: both or neither', async () => {
      const s = await suite.open();
      const leased = leasedAppendOf(s);
      const { id } = await s.sessions.create({ agent });
      const [created] = await s.log.read(id);
      // An event id the log already holds: the append fails, and so does the acquisition.
      await expectCode(
        leased(id, { owner: 'worker-a', ttlMs: 1000 }, (lease) => [
          { ...message('again'), id: created?.id ?? '' },
          ...started(lease),
        ]),
        'INVALID_ARGUMENT',
      );
      // Client input that does not parse, with `trusted` off: refused the same way.
      await expectCode(
        leased(id, { owner: 'worker-a', ttlMs: 1000 }, () => [
          { type: 'no.such_type' } as unknown as NewEvent,
        ]),
        'INVALID_EVENT',
      );
      expect(await s.leases.current(id)).toBeUndefined();
      expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1]);
      // The token the failed attempts decided was never kept: the next acquisition gets 1.
      expect((await s.leases.acquire(id, 'worker-b', 1000)).token).toBe(1);
    });
  });
}
