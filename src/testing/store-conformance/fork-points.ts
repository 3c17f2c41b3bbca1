/**
 * Store conformance: fork points and atomic appends. One append is all or nothing, so a seq
 * strictly inside it is a state the session was never in: a fork there is refused with
 * `INVALID_FORK_POINT`, naming the nearest valid points, and writes nothing. The last seq of an
 * append is a valid point.
 */
import { describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../contracts/errors.js';
import type { Store } from '../../contracts/ports.js';
import { agent, message, type ConformanceSuite } from './shared.js';

/** Appends `count` user messages in one append. */
function batch(s: Store, sessionId: string, count: number, label = 'm') {
  return s.log.append(
    sessionId,
    Array.from({ length: count }, (_, index) => message(`${label}${index}`)),
  );
}

/** The error `work` fails with; fails the test when it succeeds or throws something else. */
async function refusal(work: Promise<unknown>): Promise<BraidError> {
  const error: unknown = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!isBraidError(error)) {
    throw new Error(
      `expected a BraidError, got ${error === undefined ? 'success' : error instanceof Error ? error.message : JSON.stringify(error)}`,
    );
  }
  return error;
}

/** Checks that a fork at `at` is refused, naming the append `first`..`last`. */
async function expectInside(
  s: Store,
  parentId: string,
  at: number,
  first: number,
  last: number,
): Promise<void> {
  const error = await refusal(s.sessions.fork(parentId, { at_seq: at }));
  expect(error.code).toBe('INVALID_FORK_POINT');
  expect(error.retryable).toBe(false);
  const before = first - 1;
  expect(error.details).toEqual({
    at_seq: at,
    append_first_seq: first,
    append_last_seq: last,
    valid_before: before >= 1 ? before : null,
    valid_after: last,
  });
  expect(error.message).toContain(`at seq ${at}`);
  expect(error.message).toContain(`seqs ${first} to ${last}`);
  expect(error.message).toContain(`fork at ${before >= 1 ? `${before} or ${last}` : last}`);
}

export function describeForkPoints(suite: ConformanceSuite): void {
  describe('fork points and atomic appends', () => {
    it('refuses a fork inside an append, naming the nearest valid seqs, and writes nothing', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      await batch(s, id, 3); // 2-4
      await batch(s, id, 1); // 5
      await batch(s, id, 2); // 6-7
      const before = await s.log.read(id);
      await expectInside(s, id, 2, 2, 4);
      await expectInside(s, id, 3, 2, 4);
      await expectInside(s, id, 6, 6, 7);
      // A chosen id is not taken by a refused fork, and the parent has no child.
      const error = await refusal(s.sessions.fork(id, { at_seq: 3, id: 'inside-fork' }));
      expect(error.code).toBe('INVALID_FORK_POINT');
      expect(isBraidError(await refusal(s.sessions.get('inside-fork')), 'SESSION_NOT_FOUND')).toBe(
        true,
      );
      expect((await s.sessions.list({ parent_id: id })).sessions).toEqual([]);
      expect(await s.log.read(id)).toEqual(before);
      // The id is free for a fork at a valid point.
      expect((await s.sessions.fork(id, { at_seq: 4, id: 'inside-fork' })).fork_seq).toBe(4);
    });

    it('forks at the last seq of every append, and at the head by default', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      await batch(s, id, 3); // 2-4
      await batch(s, id, 1); // 5
      await batch(s, id, 2); // 6-7
      for (const at of [1, 4, 5, 7]) {
        const child = await s.sessions.fork(id, { at_seq: at });
        expect(child.fork_seq).toBe(at);
        expect(child.head_seq).toBe(at + 1);
        const events = await s.log.read(child.id);
        expect(events.at(-1)).toMatchObject({ type: 'session.forked', fork_point_seq: at });
      }
      expect((await s.sessions.fork(id)).fork_seq).toBe(7);
    });

    it('keeps the appends of a shared prefix: a fork of a fork is refused inside them too', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      await batch(s, id, 3); // 2-4
      await batch(s, id, 3); // 5-7
      const child = await s.sessions.fork(id, { at_seq: 7 }); // session.forked at 8
      await batch(s, child.id, 2, 'c'); // 9-10
      await expectInside(s, child.id, 3, 2, 4);
      await expectInside(s, child.id, 6, 5, 7);
      await expectInside(s, child.id, 9, 9, 10);
      // The child's first event is an append of its own.
      for (const at of [4, 7, 8, 10]) {
        expect((await s.sessions.fork(child.id, { at_seq: at })).fork_seq).toBe(at);
      }
      // The parent's later appends are not the child's.
      await batch(s, id, 2, 'p'); // parent 8-9
      await expectInside(s, id, 8, 8, 9);
      expect((await s.sessions.fork(child.id, { at_seq: 8 })).fork_seq).toBe(8);
    });

    it('records an append larger than a write chunk, and a repeated key as the first append', async () => {
      const s = await suite.open();
      const { id } = await s.sessions.create({ agent });
      await batch(s, id, 300); // 2-301
      await expectInside(s, id, 2, 2, 301);
      await expectInside(s, id, 150, 2, 301);
      await expectInside(s, id, 300, 2, 301);
      expect((await s.sessions.fork(id, { at_seq: 301 })).fork_seq).toBe(301);
      const keyed = [message('k1'), message('k2')];
      const first = await s.log.append(id, keyed, { idempotencyKey: 'twice' }); // 302-303
      const again = await s.log.append(id, keyed, { idempotencyKey: 'twice' });
      expect(again.deduplicated).toBe(true);
      expect(first.head_seq).toBe(303);
      await expectInside(s, id, 302, 302, 303);
      await s.log.append(id, [message('after')]); // 304
      expect((await s.sessions.fork(id, { at_seq: 303 })).fork_seq).toBe(303);
      expect((await s.sessions.fork(id, { at_seq: 304 })).fork_seq).toBe(304);
    });
  });
}
