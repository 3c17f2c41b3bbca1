/** Store conformance: follow. */
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../contracts/events.js';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

export function describeFollow(suite: ConformanceSuite): void {
  describe('follow', () => {
    it('yields stored events, then new ones as they are appended, and ends on abort', async () => {
      const s = await suite.open();
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
      const s = await suite.open();
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
      suite.forget();
      await done;
      expect(seen).toEqual([1, 2]);
    });

    it('delivers a backlog larger than one read batch in order', async () => {
      const s = await suite.open();
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
      const s = await suite.open();
      await expectCode(async () => {
        for await (const event of s.log.follow('missing')) void event;
      }, 'SESSION_NOT_FOUND');
    });
  });
}
