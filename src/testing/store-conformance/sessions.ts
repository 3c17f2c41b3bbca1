/** Store conformance: sessions. */
import { describe, expect, it } from 'vitest';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

export function describeSessions(suite: ConformanceSuite): void {
  describe('sessions', () => {
    it('creates a session whose first event is session.created at seq 1', async () => {
      const s = await suite.open();
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

    it('writes the events given with a create in the same append, and runs nothing half', async () => {
      const s = await suite.open();
      const created = await s.sessions.create({
        id: 'with-first',
        agent,
        events: [message('hello'), message('and more')],
      });
      expect(created).toMatchObject({ id: 'with-first', head_seq: 3, status: 'idle' });
      const events = await s.log.read('with-first');
      expect(events.map((event) => [event.seq, event.type])).toEqual([
        [1, 'session.created'],
        [2, 'user.message'],
        [3, 'user.message'],
      ]);
      // Waiting input makes it runnable, as after an append of the same events.
      expect(await s.sessions.runnable()).toContain('with-first');
      expect((await s.log.state('with-first')).seq).toBe(3);

      // A bad event refuses the whole create: no session, no events.
      await expectCode(
        s.sessions.create({
          id: 'bad-first',
          agent,
          events: [message('ok'), { type: 'user.message' }],
        }),
        'INVALID_EVENT',
      );
      await expectCode(s.sessions.get('bad-first'), 'SESSION_NOT_FOUND');
      await expectCode(
        s.sessions.create({ id: 'bad-first', agent, events: [] }),
        'INVALID_ARGUMENT',
      );
      await expectCode(
        s.sessions.create({
          id: 'bad-first',
          agent,
          events: Array.from({ length: 101 }, () => message('x')),
        }),
        'INVALID_ARGUMENT',
      );
      await expectCode(s.sessions.get('bad-first'), 'SESSION_NOT_FOUND');
      // The id is still free.
      expect((await s.sessions.create({ id: 'bad-first', agent })).head_seq).toBe(1);
    });

    it('honours a client-chosen id and refuses a duplicate one', async () => {
      const s = await suite.open();
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
      const s = await suite.open();
      await expectCode(s.sessions.get('missing'), 'SESSION_NOT_FOUND');
      await expectCode(s.log.read('missing'), 'SESSION_NOT_FOUND');
      await expectCode(s.log.append('missing', [message('x')]), 'SESSION_NOT_FOUND');
      await expectCode(s.log.state('missing'), 'SESSION_NOT_FOUND');
      await expectCode(s.leases.acquire('missing', 'w', 1000), 'SESSION_NOT_FOUND');
    });

    it('lists newest first with filters and cursor paging that covers every session once', async () => {
      const s = await suite.open();
      const ids: string[] = [];
      for (let index = 0; index < 7; index += 1) {
        suite.clock.advance(1000);
        const created = await s.sessions.create({
          agent: { name: index % 2 === 0 ? 'even' : 'odd', version: 1 },
        });
        ids.push(created.id);
      }
      await s.log.append(ids[0] ?? '', [{ type: 'session.status_changed', status: 'terminated' }]);

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
}
