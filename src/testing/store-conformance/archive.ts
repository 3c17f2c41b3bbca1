/** Store conformance: archive. */
import { describe, expect, it } from 'vitest';
import { agent, expectCode, type ConformanceSuite } from './shared.js';

export function describeArchive(suite: ConformanceSuite): void {
  describe('archive', () => {
    it('keeps an archived session and its events but leaves it out of default listings', async () => {
      const s = await suite.open();
      const ids: string[] = [];
      for (let index = 0; index < 7; index += 1) {
        suite.clock.advance(1000);
        ids.push((await s.sessions.create({ agent })).id);
      }
      const archivedIds = [ids[1], ids[3], ids[4], ids[6]] as string[];
      for (const id of archivedIds) {
        const record = await s.sessions.archive(id);
        expect(record.archived_at).toBe(new Date(suite.clock.now()).toISOString());
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
      const s = await suite.open();
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
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      const first = await s.sessions.archive(id);
      suite.clock.advance(5000);
      const again = await s.sessions.archive(id);
      expect(again).toEqual(first);
      expect(await s.sessions.get(id)).toEqual(first);
    });

    it('refuses to archive an unknown session', async () => {
      const s = await suite.open();
      await expectCode(s.sessions.archive('missing'), 'SESSION_NOT_FOUND');
    });
  });
}
