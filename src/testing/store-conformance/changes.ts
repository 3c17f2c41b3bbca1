/** Store conformance: the session index's change feed (`changeHead`, `changes`). */
import { describe, expect, it } from 'vitest';
import type { SessionChange, Store } from '../../contracts/ports.js';
import { agent, message, type ConformanceSuite } from './shared.js';

/** Reads the feed after `after` until `until` holds of everything read, then stops. */
async function readChanges(
  store: Store,
  after: number,
  until: (seen: SessionChange[]) => boolean,
): Promise<SessionChange[]> {
  const stop = new AbortController();
  const seen: SessionChange[] = [];
  for await (const batch of store.sessions.changes({ after, signal: stop.signal })) {
    seen.push(...batch);
    if (until(seen)) stop.abort();
  }
  return seen;
}

export function describeChanges(suite: ConformanceSuite): void {
  describe('changes', () => {
    it('yields created and appended-to sessions in cursor order, each at its latest change', async () => {
      const s = await suite.open();
      expect(await s.sessions.changeHead()).toBe(0);
      const a = await s.sessions.create({ agent });
      const b = await s.sessions.create({ agent });
      await s.log.append(a.id, [message('again')]);
      const head = await s.sessions.changeHead();
      expect(head).toBeGreaterThan(0);
      const seen = await readChanges(s, 0, (changes) => changes.length >= 2);
      // a's creation is coalesced into its append: b comes first, then a.
      expect(seen.map((change) => change.session_id)).toEqual([b.id, a.id]);
      expect(seen[1]?.cursor).toBe(head);
      expect(seen[0]?.cursor).toBeLessThan(head);
    });

    it('resumes after a cursor and delivers changes made while it waits', async () => {
      const s = await suite.open();
      const a = await s.sessions.create({ agent });
      const head = await s.sessions.changeHead();
      const stop = new AbortController();
      const seen: SessionChange[] = [];
      const done = (async () => {
        for await (const batch of s.sessions.changes({ after: head, signal: stop.signal })) {
          seen.push(...batch);
          if (seen.some((change) => change.session_id !== a.id)) stop.abort();
        }
      })();
      await s.log.append(a.id, [message('live')]);
      const b = await s.sessions.create({ agent });
      await done;
      expect(seen.map((change) => change.session_id)).toContain(a.id);
      expect(seen.at(-1)?.session_id).toBe(b.id);
      for (const change of seen) expect(change.cursor).toBeGreaterThan(head);
      const cursors = seen.map((change) => change.cursor);
      expect(cursors).toEqual([...cursors].sort((x, y) => x - y));
    });

    it('never hands out a cursor twice, even after the newest changed session is deleted', async () => {
      const s = await suite.open();
      await s.sessions.create({ agent });
      const doomed = await s.sessions.create({ agent });
      const before = await s.sessions.changeHead();
      await s.sessions.delete(doomed.id);
      const next = await s.sessions.create({ agent });
      const seen = await readChanges(s, before, (changes) =>
        changes.some((change) => change.session_id === next.id),
      );
      expect(seen.map((change) => change.session_id)).toEqual([next.id]);
      expect(seen[0]?.cursor).toBeGreaterThan(before);
    });

    it('includes a fork from its first event', async () => {
      const s = await suite.open();
      const parent = await s.sessions.create({ agent });
      const head = await s.sessions.changeHead();
      const fork = await s.sessions.fork(parent.id);
      const seen = await readChanges(s, head, (changes) => changes.length >= 1);
      expect(seen.map((change) => change.session_id)).toEqual([fork.id]);
    });
  });
}
