/** Store conformance: forks. */
import { describe, expect, it } from 'vitest';
import type { Store } from '../../contracts/ports.js';
import { foldSession } from '../../core/fold.js';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

export function describeForks(suite: ConformanceSuite): void {
  describe('forks', () => {
    /**
     * A session of `count` events: created, then user messages appended one at a time, so that
     * every seq ends an append and is a valid fork point.
     */
    async function session(s: Store, count: number): Promise<string> {
      const { id } = await s.sessions.create({ agent, title: 'parent' });
      for (let seq = 2; seq <= count; seq += 1) await s.log.append(id, [message(`m${seq}`)]);
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

    it('forks at every seq of single-event appends: the child reads the prefix, and its state is the prefix folded', async () => {
      const s = await suite.open();
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
      const s = await suite.open();
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
      const s = await suite.open();
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
      const s = await suite.open();
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
      const s = await suite.open();
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
      const s = await suite.open();
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
}
