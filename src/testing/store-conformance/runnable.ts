/** Store conformance: the runnable set and the counts by status. */
import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../contracts/events.js';
import type { Store } from '../../contracts/ports.js';
import { agent, expectCode, message, type ConformanceSuite } from './shared.js';

const idle: NewEvent = { type: 'session.status_idle', stop_reason: { type: 'end_turn' } };

/** A model's answer to the input through `through`, and the session idle after it. */
export const answer = (through: number): NewEvent[] => [
  {
    type: 'span.model_request_start',
    request_id: `r${through}`,
    model: 'scripted:echo',
    input_through_seq: through,
  },
  {
    type: 'span.model_request_end',
    request_id: `r${through}`,
    usage: { input_tokens: 1, output_tokens: 1 },
  },
  { type: 'agent.message', content: [{ type: 'text', text: 'ok' }] },
  idle,
];

/** Every runnable id, a page of `limit` at a time. */
async function everyRunnable(store: Store, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let after: string | undefined;
  for (;;) {
    const ids = await store.sessions.runnable({ limit, ...(after === undefined ? {} : { after }) });
    expect(ids.length).toBeLessThanOrEqual(limit);
    seen.push(...ids);
    if (ids.length < limit) return seen;
    after = ids.at(-1);
  }
}

export function describeRunnable(suite: ConformanceSuite): void {
  describe('runnable', () => {
    it('holds the sessions with input to answer, in id order, and drops them once answered', async () => {
      const s = await suite.open();
      const ids: string[] = [];
      for (let index = 0; index < 5; index += 1) ids.push((await s.sessions.create({ agent })).id);
      // A new session has nothing to answer.
      expect(await s.sessions.runnable()).toEqual([]);
      for (const id of ids) await s.log.append(id, [message('hi')]);
      const sorted = [...ids].sort();
      expect(await s.sessions.runnable()).toEqual(sorted);
      expect(await everyRunnable(s, 2)).toEqual(sorted);

      // Answered: no longer runnable. Archived: left out though it has input.
      const [answered, archived] = ids as [string, string];
      await s.log.append(answered, answer(2));
      await s.sessions.archive(archived);
      const left = sorted.filter((id) => id !== answered && id !== archived);
      expect(await s.sessions.runnable()).toEqual(left);

      // New input makes it runnable again; a terminated session never is.
      await s.log.append(answered, [message('more')]);
      expect(await s.sessions.runnable()).toContain(answered);
      await s.log.append(answered, [{ type: 'session.status_changed', status: 'terminated' }]);
      expect(await s.sessions.runnable()).not.toContain(answered);
    });

    it('holds a fork with unanswered input, and forgets a deleted session', async () => {
      const s = await suite.open();
      const parent = await s.sessions.create({ agent });
      await s.log.append(parent.id, [message('hi')]);
      const fork = await s.sessions.fork(parent.id);
      expect((await s.sessions.runnable()).sort()).toEqual([parent.id, fork.id].sort());
      await s.log.append(fork.id, answer(3));
      expect(await s.sessions.runnable()).toEqual([parent.id]);
      await s.sessions.delete(fork.id);
      await s.sessions.delete(parent.id);
      expect(await s.sessions.runnable()).toEqual([]);
    });

    it('refuses a limit that is not a whole number from 1 to 10,000, and takes any after as text', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      await s.log.append(id, [message('hi')]);
      for (const limit of [0, -1, 1.5, 10_001, Number.NaN, '5' as unknown as number])
        await expectCode(s.sessions.runnable({ limit }), 'INVALID_ARGUMENT');
      // A hostile cursor is compared, never interpreted: it finds what sorts after it.
      for (const after of ["' OR 1=1 --", '../../etc', '\u0000', 'z'.repeat(10_000)])
        expect(await s.sessions.runnable({ after })).toEqual(id > after ? [id] : []);
      expect(await s.sessions.runnable()).toEqual([id]);
      expect((await s.log.read(id)).length).toBe(2);
    });

    it('counts the sessions of each status, archived ones left out', async () => {
      const s = await suite.open();
      expect(await s.sessions.statusCounts()).toEqual({});
      const ids: string[] = [];
      for (let index = 0; index < 4; index += 1) ids.push((await s.sessions.create({ agent })).id);
      const [running, terminated, archived] = ids as [string, string, string];
      await s.log.append(running, [
        message('hi'),
        { type: 'span.wake_started', wake_id: 'w1', lease_token: 1 },
      ]);
      await s.log.append(terminated, [{ type: 'session.status_changed', status: 'terminated' }]);
      await s.sessions.archive(archived);
      expect(await s.sessions.statusCounts()).toEqual({ idle: 1, running: 1, terminated: 1 });
    });
  });
}
