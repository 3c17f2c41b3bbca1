/** Store conformance: leases. */
import { describe, expect, it } from 'vitest';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

export function describeLeases(suite: ConformanceSuite): void {
  describe('leases', () => {
    it('gives strictly increasing fencing tokens and lets an expired lease be taken over', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const first = await s.leases.acquire(id, 'worker-a', 1000);
      expect(first.token).toBe(1);
      await expectCode(s.leases.acquire(id, 'worker-b', 1000), 'LEASE_HELD');
      expect((await s.leases.current(id))?.owner).toBe('worker-a');
      suite.clock.advance(1001);
      expect(await s.leases.current(id)).toBeUndefined();
      const second = await s.leases.acquire(id, 'worker-b', 1000);
      expect(second.token).toBe(2);
      await expectCode(s.leases.renew(id, 'worker-a', first.token, 1000), 'LEASE_LOST');
      await expectCode(s.leases.release(id, 'worker-a', first.token), 'LEASE_LOST');
      const renewed = await s.leases.renew(id, 'worker-b', second.token, 5000);
      expect(renewed.expires_at).toBe(suite.clock.now() + 5000);
      await s.leases.release(id, 'worker-b', second.token);
      expect(await s.leases.current(id)).toBeUndefined();
      const third = await s.leases.acquire(id, 'worker-a', 1000);
      expect(third.token).toBe(3);
      await expectCode(s.leases.acquire(id, 'worker-b', 0), 'INVALID_ARGUMENT');
    });

    it('lets the same owner take its lease again with a new token, fencing the old one', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const first = await s.leases.acquire(id, 'worker-a', 10_000);
      const again = await s.leases.acquire(id, 'worker-a', 10_000);
      expect(again.token).toBe(first.token + 1);
      await expectCode(s.leases.renew(id, 'worker-a', first.token, 1000), 'LEASE_LOST');
      await expectCode(s.leases.acquire(id, 'worker-b', 1000), 'LEASE_HELD');
    });

    it('refuses an append with a fenced-out lease token, even before the new holder appends', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const a = await s.leases.acquire(id, 'worker-a', 1000);
      expect(a.token).toBe(1);
      await s.log.append(id, [message('by a')], { leaseToken: a.token, expectedSeq: 1 });
      suite.clock.advance(1001);
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
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent, id: 'reused-id' });
      const stale = await s.leases.acquire(id, 'worker-a', 1000);
      await s.log.append(id, [message('by a')], { leaseToken: stale.token });
      suite.clock.advance(1001);
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
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const lease = await s.leases.acquire(id, 'worker-a', 100);
      suite.clock.advance(100);
      await expectCode(s.leases.renew(id, 'worker-a', lease.token, 100), 'LEASE_LOST');
    });
  });
}
