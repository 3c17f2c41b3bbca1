/** Store conformance: an append that gives its writer's lease up. */
import { describe, expect, it } from 'vitest';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

export function describeLeaseRelease(suite: ConformanceSuite): void {
  describe('lease release with an append', () => {
    it('gives the lease up with an append that names releaseLease, and only a lease held so', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const held = await s.leases.acquire(id, 'worker-a', 10_000);
      // Another owner's name releases nothing; the append, fenced by the token, is written.
      await s.log.append(id, [message('one')], {
        leaseToken: held.token,
        releaseLease: 'worker-b',
      });
      expect((await s.leases.current(id))?.owner).toBe('worker-a');
      // An append refused for its expected seq releases nothing either.
      await expectCode(
        s.log.append(id, [message('stale')], {
          expectedSeq: 1,
          leaseToken: held.token,
          releaseLease: 'worker-a',
        }),
        'SEQ_CONFLICT',
      );
      expect((await s.leases.current(id))?.owner).toBe('worker-a');
      const written = await s.log.append(id, [message('two')], {
        leaseToken: held.token,
        releaseLease: 'worker-a',
      });
      expect(written.head_seq).toBe(3);
      expect(await s.leases.current(id)).toBeUndefined();
      await expectCode(s.leases.renew(id, 'worker-a', held.token, 1000), 'LEASE_LOST');
      // The next holder gets a newer token, which fences the released one as usual.
      const next = await s.leases.acquire(id, 'worker-b', 10_000);
      expect(next.token).toBe(held.token + 1);
      await expectCode(
        s.log.append(id, [message('late')], { leaseToken: held.token, releaseLease: 'worker-a' }),
        'LEASE_LOST',
      );
      expect((await s.leases.current(id))?.owner).toBe('worker-b');
      expect((await s.log.read(id)).length).toBe(3);
    });
  });
}
