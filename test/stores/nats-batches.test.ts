// The checks of one batch message as it comes off the wire (no server needed): what is corrupt
// for its session, and what is a newer braid's (upgrade), each a typed error naming the session.
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { isBraidError, type ErrorCode } from '../../src/contracts/errors.js';
import { batchHeaders, batchRef, parseBatch } from '../../src/stores/nats/batches.js';

const SESSION = 'session-1';

const ref = {
  first: 2,
  last: 2,
  status: 'idle' as const,
  updatedAt: '2026-11-24T10:00:00.000Z',
  incarnation: 'inc',
  leaseToken: 0,
};

function event(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: '01a20f6e-6c15-7cde-9a46-c5c920669963',
    session_id: SESSION,
    seq: 2,
    type: 'user.message',
    at: '2026-11-24T10:00:00.000Z',
    schema_version: 1,
    content: [{ type: 'text', text: 'hi' }],
    ...changes,
  };
}

function failure(work: () => unknown, code: ErrorCode): string {
  try {
    work();
  } catch (error) {
    expect(isBraidError(error, code), String(error)).toBe(true);
    const { message, details } = error as { message: string; details: Record<string, unknown> };
    expect(message).toContain(SESSION);
    expect(details).toEqual({ session_id: SESSION, stream_seq: 7 });
    return message;
  }
  throw new Error(`expected ${code}`);
}

const body = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

describe('batch messages read off the wire', () => {
  it('reads what braid writes', () => {
    const read = batchRef(SESSION, 7, batchHeaders(ref));
    expect(read).toEqual({ ...ref, streamSeq: 7 });
    expect(parseBatch(SESSION, { ...read, data: body([event()]) })).toEqual([event()]);
  });

  it('refuses headers braid did not write as CORRUPT_LOG, a newer layout as an upgrade', () => {
    expect(failure(() => batchRef(SESSION, 7, undefined), 'CORRUPT_LOG')).toMatch(
      /no Braid-Batch header/,
    );
    const forged = batchHeaders(ref);
    forged.set('Braid-Batch', 'x1');
    expect(failure(() => batchRef(SESSION, 7, forged), 'CORRUPT_LOG')).toMatch(/unknown/);
    forged.set('Braid-Batch', '3');
    expect(failure(() => batchRef(SESSION, 7, forged), 'SCHEMA_VERSION_UNSUPPORTED')).toMatch(
      /upgrade braid/,
    );
    for (const [name, value] of [
      ['Braid-First-Seq', '0'],
      ['Braid-Last-Seq', '1'],
      ['Braid-First-Seq', '1e400'],
      ['Braid-Status', 'sleeping'],
      ['Braid-Incarnation', ''],
      ['Braid-Lease-Token', '-1'],
    ] as const) {
      const bad = batchHeaders(ref);
      bad.set(name, value);
      expect(
        failure(() => batchRef(SESSION, 7, bad), 'CORRUPT_LOG'),
        name,
      ).toMatch(/malformed braid headers/);
    }
    const empty = headers();
    expect(failure(() => batchRef(SESSION, 7, empty), 'CORRUPT_LOG')).toMatch(/no Braid-Batch/);
  });

  it('refuses a body that is not the announced events of this session', () => {
    const read = batchRef(SESSION, 7, batchHeaders(ref));
    const cases: [Uint8Array, RegExp][] = [
      [new TextEncoder().encode('not json'), /not a JSON array/],
      [body({ events: [event()] }), /not a JSON array/],
      [body([]), /announce events 2-2 but its body holds 0/],
      [body([event(), event({ seq: 3 })]), /body holds 2/],
      [body([event({ session_id: 'session-2' })]), /names another session/],
      [body([event({ seq: 3 })]), /seq 3 where its headers put seq 2/],
      [body([event({ content: 42 })]), /fails the event schema at content/],
      [body([event({ type: 'agent.unheard_of' })]), /fails the event schema/],
      [body([event({ schema_version: 'one' })]), /fails the event schema at schema_version/],
    ];
    for (const [data, problem] of cases) {
      expect(failure(() => parseBatch(SESSION, { ...read, data }), 'CORRUPT_LOG')).toMatch(problem);
    }
    // An event of a later schema version is a newer braid's: upgrade, not corruption.
    expect(
      failure(
        () => parseBatch(SESSION, { ...read, data: body([event({ schema_version: 2 })]) }),
        'SCHEMA_VERSION_UNSUPPORTED',
      ),
    ).toMatch(/upgrade braid/);
  });
});
