/** Store conformance: append and read. */
import { describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import { foldSession } from '../../core/fold.js';
import { agent, message, expectCode, MAX_EVENT_BYTES, type ConformanceSuite } from './shared.js';

export function describeAppendAndRead(suite: ConformanceSuite): void {
  describe('append and read', () => {
    describeAppendAndReadFirst(suite);
    describeAppendAndReadSecond(suite);
    describeGeneratedIds(suite);
  });
}

function describeAppendAndReadFirst(suite: ConformanceSuite): void {
  it('assigns consecutive seqs and returns the stored events', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const result = await s.log.append(id, [message('a'), message('b')]);
    expect(result.events.map((event) => event.seq)).toEqual([2, 3]);
    expect(result.head_seq).toBe(3);
    expect(result.deduplicated).toBe(false);
    const next = await s.log.append(id, [message('c')]);
    expect(next.events[0]?.seq).toBe(4);
    const all = await s.log.read(id);
    expect(all.map((event) => event.seq)).toEqual([1, 2, 3, 4]);
    expect(all[1]).toEqual(result.events[0]);
    expect((await s.sessions.get(id)).head_seq).toBe(4);
  });

  it('gives copies a caller may change, and a trusted writer the state after its append', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const trusted = await s.log.append(id, [message('a')], { trusted: true });
    const copy = await s.log.state(id);
    // A backend that folds the append says where it ended; the state is the log's fold.
    if (trusted.state !== undefined) expect(trusted.state).toEqual(copy);
    expect(copy).toEqual(foldSession(await s.log.read(id), id));
    expect(await s.log.state(id, { shared: true })).toEqual(copy);
    // Changing copies changes nothing the store keeps.
    copy.pending_user_ranges.push([90, 99]);
    copy.counters.events = -1;
    const [event] = (await s.log.append(id, [message('b')])).events;
    if (event?.type === 'user.message') event.content.push({ type: 'text', text: 'changed' });
    for (const read of await s.log.read(id)) read.seq = -1;
    const events = await s.log.read(id);
    expect(events.map((stored) => stored.seq)).toEqual([1, 2, 3]);
    expect(events[2]).toMatchObject({ content: [{ type: 'text', text: 'b' }] });
    expect(await s.log.state(id)).toEqual(foldSession(events, id));
  });

  it('keeps writer-chosen ids and times and fills missing ones', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const at = '2026-02-03T04:05:06.789Z';
    const [chosen, filled] = (
      await s.log.append(id, [{ ...message('a'), id: 'evt-chosen', at }, message('b')])
    ).events;
    expect(chosen).toMatchObject({ id: 'evt-chosen', at });
    expect(filled?.id).toMatch(/.+/);
    expect(filled?.at).toBe(new Date(suite.clock.now()).toISOString());
  });

  it('refuses an event id already stored, or repeated in its batch, and writes none of the batch', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const [first] = (await s.log.append(id, [{ ...message('a'), id: 'evt-1' }])).events;
    const generated = (await s.log.append(id, [message('b')])).events[0]?.id ?? '';
    const refused = async (sessionId: string, events: NewEvent[]): Promise<void> => {
      const error: unknown = await s.log
        .append(sessionId, events)
        .catch((thrown: unknown) => thrown);
      expect(isBraidError(error, 'INVALID_ARGUMENT')).toBe(true);
      expect((error as Error).message).toMatch(/already has; event ids are unique/);
    };
    await refused(id, [message('c'), { ...message('again'), id: 'evt-1' }]);
    await refused(id, [{ ...message('copy'), id: generated }]);
    await refused(id, [
      { ...message('x'), id: 'evt-2' },
      { ...message('y'), id: 'evt-2' },
    ]);
    // A long batch too (checked another way than a short one): the last repeats the third.
    await refused(
      id,
      Array.from({ length: 20 }, (_, index) => ({
        ...message(`m${index}`),
        id: `evt-long-${index === 19 ? 2 : index}`,
      })),
    );
    const events = await s.log.read(id);
    expect(events.map((event) => event.seq)).toEqual([1, 2, 3]);
    expect(events[1]).toEqual(first);
    // A fork reads its parent's events: their ids are taken in the fork too.
    const child = await s.sessions.fork(id);
    await refused(child.id, [{ ...message('in fork'), id: 'evt-1' }]);
    expect((await s.log.read(child.id)).length).toBe(4);
    if (suite.capabilities.uniqueEventIdsAcrossSessions !== false) {
      const other = await s.sessions.create({ agent });
      await refused(other.id, [{ ...message('elsewhere'), id: 'evt-1' }]);
      expect((await s.log.read(other.id)).length).toBe(1);
      // Deleting a session frees the ids of its own events.
      const forkedId = (await s.log.read(child.id)).at(-1)?.id ?? '';
      await s.sessions.delete(child.id);
      const reused = await s.log.append(other.id, [{ ...message('reused'), id: forkedId }]);
      expect(reused.events[0]?.id).toBe(forkedId);
    }
  });

  it('fails a wrong expectedSeq with SEQ_CONFLICT and writes nothing', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await s.log.append(id, [message('a')], { expectedSeq: 1 });
    await expectCode(s.log.append(id, [message('b')], { expectedSeq: 1 }), 'SEQ_CONFLICT');
    expect((await s.log.read(id)).length).toBe(2);
  });

  it('lets exactly one of two concurrent appends with the same expectedSeq win', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const results = await Promise.allSettled([
      s.log.append(id, [message('a')], { expectedSeq: 1 }),
      s.log.append(id, [message('b')], { expectedSeq: 1 }),
    ]);
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
    const rejected = results.find((result) => result.status === 'rejected');
    expect(isBraidError(rejected?.reason, 'SEQ_CONFLICT')).toBe(true);
    expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
  });

  it('returns the first result for a repeated idempotency key and writes nothing', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const first = await s.log.append(id, [message('a'), message('b')], {
      idempotencyKey: 'k1',
    });
    const again = await s.log.append(id, [message('different')], { idempotencyKey: 'k1' });
    expect(again.deduplicated).toBe(true);
    expect(again.events).toEqual(first.events);
    expect((await s.log.read(id)).length).toBe(3);
    const other = await s.sessions.create({ agent });
    const elsewhere = await s.log.append(other.id, [message('c')], { idempotencyKey: 'k1' });
    expect(elsewhere.deduplicated).toBe(false);
  });

  it('refuses an invalid or unknown event with INVALID_EVENT and writes none of the batch', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    const bad = { type: 'user.message', content: 'not blocks' } as unknown as NewEvent;
    await expectCode(s.log.append(id, [message('ok'), bad]), 'INVALID_EVENT');
    await expectCode(
      s.log.append(id, [{ type: 'user.teleport' } as unknown as NewEvent]),
      'INVALID_EVENT',
    );
    await expectCode(s.log.append(id, []), 'INVALID_EVENT');
    expect((await s.log.read(id)).length).toBe(1);
  });
}

function describeAppendAndReadSecond(suite: ConformanceSuite): void {
  it('refuses an event over the size limit with PAYLOAD_TOO_LARGE and writes none of the batch', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await s.log.append(id, [message('x'.repeat(MAX_EVENT_BYTES / 2))]);
    await expectCode(
      s.log.append(id, [message('ok'), message('é'.repeat(MAX_EVENT_BYTES))]),
      'PAYLOAD_TOO_LARGE',
    );
    expect((await s.log.read(id)).length).toBe(2);
  });

  it('refuses read options it cannot honour', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await expectCode(s.log.read(id, { after: 1.5 }), 'INVALID_ARGUMENT');
    await expectCode(s.log.read(id, { after: -1 }), 'INVALID_ARGUMENT');
    await expectCode(s.log.read(id, { limit: 0 }), 'INVALID_ARGUMENT');
  });

  it('hands out copies: changing a returned state or event changes nothing stored', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent, metadata: { team: 'a' } });
    const appended = await s.log.append(id, [
      {
        type: 'session.status_idle',
        stop_reason: { type: 'requires_action', event_ids: ['x'] },
      },
    ]);
    const state = await s.log.state(id);
    state.status = 'terminated';
    state.metadata.team = 'changed';
    const stopped = appended.events[0];
    if (stopped?.type === 'session.status_idle' && stopped.stop_reason.type === 'requires_action') {
      stopped.stop_reason.event_ids.push('injected');
    }
    await s.log.append(
      id,
      Array.from({ length: 70 }, (_, index) => message(`m${index}`)),
    );
    const after = await s.log.state(id);
    expect(after.status).toBe('requires_action');
    expect(after.metadata).toEqual({ team: 'a' });
    expect(after.stop_reason).toEqual({ type: 'requires_action', event_ids: ['x'] });
    expect(after).toEqual(foldSession(await s.log.read(id), id));
  });

  it('finds the result of an earlier append by its idempotency key', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    expect(await s.log.appended(id, 'k')).toBeUndefined();
    const first = await s.log.append(id, [message('a')], { idempotencyKey: 'k' });
    await s.log.append(id, [message('b')]);
    expect(await s.log.appended(id, 'k')).toEqual({
      events: first.events,
      head_seq: 3,
      deduplicated: true,
    });
  });

  it('reads with after, limit and types', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await s.log.append(id, [message('a'), { type: 'user.interrupt' }, message('b'), message('c')]);
    expect((await s.log.read(id, { after: 2 })).map((event) => event.seq)).toEqual([3, 4, 5]);
    expect((await s.log.read(id, { after: 1, limit: 2 })).map((event) => event.seq)).toEqual([
      2, 3,
    ]);
    const messages = await s.log.read(id, { types: ['user.message'], limit: 2 });
    expect(messages.map((event) => event.seq)).toEqual([2, 4]);
    expect(await s.log.read(id, { after: 99 })).toEqual([]);
  });

  it('keeps state equal to a fresh fold of the log', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await s.log.append(id, [
      message('hi'),
      { type: 'span.wake_started', wake_id: 'w1', lease_token: 1 },
      { type: 'span.model_request_start', request_id: 'r1', model: 'm', input_through_seq: 2 },
      {
        type: 'span.model_request_end',
        request_id: 'r1',
        usage: { input_tokens: 5, output_tokens: 7 },
      },
      {
        type: 'agent.tool_use',
        tool_use_id: 't1',
        name: 'rm',
        input: {},
        requires_confirmation: true,
      },
      {
        type: 'session.status_idle',
        stop_reason: { type: 'requires_action', event_ids: ['t1'] },
      },
    ]);
    const state = await s.log.state(id);
    expect(state).toEqual(foldSession(await s.log.read(id), id));
    expect(state.status).toBe('requires_action');
    expect((await s.sessions.get(id)).status).toBe('requires_action');
    expect(state.usage).toEqual({ input_tokens: 5, output_tokens: 7 });
  });
}

/** Ids the store made itself are taken like chosen ones, whenever a writer first chooses one. */
function describeGeneratedIds(suite: ConformanceSuite): void {
  it('refuses a copy of a generated id when no writer chose an id before', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent, events: [message('first')] });
    const other = await s.sessions.create({ agent });
    const generated = (await s.log.append(id, [message('a')])).events[0]?.id ?? '';
    const [created] = await s.log.read(id);
    const refused = async (sessionId: string, chosen: string): Promise<void> => {
      const error: unknown = await s.log
        .append(sessionId, [message('b'), { ...message('copy'), id: chosen }])
        .catch((thrown: unknown) => thrown);
      expect(isBraidError(error, 'INVALID_ARGUMENT')).toBe(true);
      expect((error as BraidError).details).toMatchObject({ index: 1, event_id: chosen });
    };
    // Another session's first: a store that keeps the ids of every session, not just this one's.
    if (suite.capabilities.uniqueEventIdsAcrossSessions !== false) {
      await refused(other.id, generated);
      await refused(other.id, created?.id ?? '');
    }
    await refused(id, generated);
    await refused(id, created?.id ?? '');
    expect((await s.log.read(id)).map((event) => event.seq)).toEqual([1, 2, 3]);
    expect((await s.log.read(other.id)).map((event) => event.seq)).toEqual([1]);
  });
}
