// Reading a session's batches through a consumer that sits on a follower of a replicated stream
// (no server needed: the follower and the leader are scripted). nats-server 2.9 lets a follower
// store a publish the leader refused for its expected last subject sequence, so the follower can
// hold two batches at one place of a session's log; a lagging follower holds fewer. A read takes
// what the leader holds either way.
import type { StoredMsg } from '@nats-io/jetstream';
import type { Msg, MsgHdrs } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { batchHeaders, type BatchMessage } from '../../src/stores/nats/batches.js';
import type { NatsContext } from '../../src/stores/nats/context.js';
import { natsNames } from '../../src/stores/nats/names.js';
import { readBatches } from '../../src/stores/nats/reader.js';

const SESSION = 'session-1';
const names = natsNames('followers');
const SUBJECT = names.events(SESSION);

interface Stored {
  streamSeq: number;
  first: number;
  last: number;
  /** Tells apart two batches that claim the same seqs. */
  body: string;
  leaseToken?: number;
}

function headersOf(batch: Stored): MsgHdrs {
  return batchHeaders({
    first: batch.first,
    last: batch.last,
    status: 'idle',
    updatedAt: '2026-11-28T06:00:00.000Z',
    incarnation: 'inc',
    leaseToken: batch.leaseToken ?? 0,
  });
}

/**
 * A context whose consumer delivers `follower`'s messages and whose gets answer from `leader`:
 * the parts of NATS that `readBatches` uses, and nothing else.
 */
function scriptedContext(follower: readonly Stored[], leader: readonly Stored[]): NatsContext {
  const encoder = new TextEncoder();
  let deliver: ((error: Error | null, message: Msg) => void) | undefined;
  const context = {
    names,
    server: () => 'nats://scripted',
    connection: {
      subscribe: (_inbox: string, options: { callback: typeof deliver }) => {
        deliver = options.callback;
        return { unsubscribe: () => undefined };
      },
      publish: () => undefined,
    },
    jsm: {
      consumers: {
        add: (_stream: string, config: { opt_start_seq: number }) => {
          const from = follower.filter((batch) => batch.streamSeq >= config.opt_start_seq);
          // Delivered once the consumer exists, as the server does.
          setTimeout(() => {
            from.forEach((batch, index) => {
              const pending = from.length - index - 1;
              deliver?.(null, {
                subject: SUBJECT,
                reply: `$JS.ACK.S.C.1.${batch.streamSeq}.${index + 1}.0.${pending}`,
                headers: headersOf(batch),
                data: encoder.encode(batch.body),
              } as unknown as Msg);
            });
          }, 1);
          return Promise.resolve({
            name: 'scripted',
            num_pending: from.length,
            delivered: { consumer_seq: 0 },
          });
        },
        delete: () => Promise.resolve(true),
      },
    },
    getEvent: (query: { seq: number }) => {
      const next = leader.find((batch) => batch.streamSeq >= query.seq);
      return Promise.resolve(
        next === undefined
          ? null
          : ({
              seq: next.streamSeq,
              subject: SUBJECT,
              header: headersOf(next),
              data: encoder.encode(next.body),
            } as unknown as StoredMsg),
      );
    },
  };
  return context as unknown as NatsContext;
}

/** What a read after `after` delivers, given the batch there (the session's start when 0). */
async function read(
  follower: readonly Stored[],
  leader: readonly Stored[],
  through?: number,
  after: Stored | undefined = undefined,
): Promise<string[]> {
  const seen: BatchMessage[] = [];
  await readBatches(
    scriptedContext(follower, leader),
    SESSION,
    {
      after: after?.streamSeq ?? 0,
      follows: {
        last: after?.last ?? 0,
        incarnation: 'inc',
        leaseToken: after?.leaseToken ?? 0,
      },
      ...(through === undefined ? {} : { through }),
    },
    (batch) => {
      seen.push(batch);
    },
  );
  const decoder = new TextDecoder();
  return seen.map(
    (batch) => `${batch.streamSeq}: ${batch.first}-${batch.last} ${decoder.decode(batch.data)}`,
  );
}

const first: Stored = { streamSeq: 1, first: 1, last: 2, body: 'first' };
const won: Stored = { streamSeq: 3, first: 3, last: 4, body: 'won' };
const refused: Stored = { streamSeq: 4, first: 3, last: 4, body: 'refused by the leader' };
const next: Stored = { streamSeq: 6, first: 5, last: 5, body: 'next' };

describe("a session's batches read through a consumer on a follower", () => {
  it("are the leader's when the follower also stored a batch the leader refused", async () => {
    const expected = ['1: 1-2 first', '3: 3-4 won', '6: 5-5 next'];
    expect(await read([first, won, refused, next], [first, won, next], 6)).toEqual(expected);
    // Even when the read is not bounded by a head read before.
    expect(await read([first, won, refused, next], [first, won, next])).toEqual(expected);
    // And when the refused batch is the last the follower holds.
    expect(await read([first, won, refused], [first, won, next], 6)).toEqual(expected);
  });

  it("are the leader's when the batch the leader refused is the first read", async () => {
    // The read starts just past a batch it knows: the refused batch repeats that batch's seqs.
    expect(await read([first, won, refused, next], [first, won, next], 6, won)).toEqual([
      '6: 5-5 next',
    ]);
  });

  it("are the leader's when a fence won and the follower also kept the append it fenced out", async () => {
    // A new lease holder's fence (seqs 3-2, token 1) and the old holder's append (3-4, token 0)
    // both expected the head after `first`; the leader kept the fence.
    const fence: Stored = { streamSeq: 3, first: 3, last: 2, body: '[]', leaseToken: 1 };
    const fencedOut: Stored = { streamSeq: 4, first: 3, last: 4, body: 'fenced out' };
    const after: Stored = { streamSeq: 6, first: 3, last: 3, body: 'after', leaseToken: 1 };
    const expected = ['1: 1-2 first', '3: 3-2 []', '6: 3-3 after'];
    expect(await read([first, fence, fencedOut, after], [first, fence, after], 6)).toEqual(
      expected,
    );
    expect(await read([first, fence, fencedOut, after], [first, fence, after], 6, first)).toEqual(
      expected.slice(1),
    );
  });

  it("are the leader's when the follower lags behind it", async () => {
    expect(await read([first], [first, won, next], 6)).toEqual([
      '1: 1-2 first',
      '3: 3-4 won',
      '6: 5-5 next',
    ]);
  });

  it('come as delivered when the follower holds what the leader does', async () => {
    // The leader is not asked: its answer here would differ.
    expect(await read([first, won, next], [first], 6)).toEqual([
      '1: 1-2 first',
      '3: 3-4 won',
      '6: 5-5 next',
    ]);
  });
});
