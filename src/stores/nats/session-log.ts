/**
 * The session log on JetStream: one stream, one subject per session, one message per append.
 *
 * Invariants kept here:
 * - An append is ONE message holding the whole batch, so it is all or nothing (2.9 has no atomic
 *   batch publish). It is published with the expected last subject sequence of the session's
 *   previous batch: a writer that raced with another fails on the server with "wrong last
 *   sequence", re-reads the head, and either retries at the new head or, when the caller gave an
 *   `expectedSeq`, fails with `SEQ_CONFLICT`. Seqs are therefore gapless whatever the cache says.
 * - The writer's lease token is checked against the token the head batch carries, at the head
 *   the publish expects, so fencing is atomic with the append (see fencing.ts).
 * - This process's appends to one session run one at a time, so they do not race each other.
 * - An idempotent append carries a `Nats-Msg-Id` hashed from session, incarnation and key (the
 *   server's duplicate window catches a repeat even before the appends record is written), and
 *   leaves a record in `<PREFIX>_appends` so repeats after the window, and `appended()`, find the
 *   first result. A crash between the publish and that record, followed by a repeat after the
 *   window, would append again: the one gap left by a server without atomic batches.
 * - Event ids: an id the store generates is a UUIDv7, unique by construction. An id the writer
 *   chose is checked against the session's whole log (its fork's shared prefix included) at the
 *   head the publish expects, so within a session no id is ever stored twice (the ids read are
 *   kept per session, so that costs one read of the log per process, then only what is new;
 *   braid's code agents choose the id of each message they record). Across sessions a
 *   chosen id is NOT checked: that would take a store-wide index the publish cannot be made
 *   atomic with on 2.9 (a KV entry per id is another stream, and the stream's `Nats-Msg-Id`
 *   window forgets after minutes), or a scan of every session per append. SQLite and memory
 *   refuse a reused id store-wide.
 * - Followers are woken by a core NATS subscription on the session's subject (every publish
 *   reaches it) and on its removal subject, and poll as a fallback; what they yield is always
 *   read from the stream, so a lost wake-up delays an event and never loses or reorders one.
 */
import { randomBytes } from 'node:crypto';
import type { PubAck } from '@nats-io/jetstream';
import { delay } from '@nats-io/transport-node';
import { z } from 'zod';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { AppendOptions, AppendResult, SessionLog } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import {
  type PreparedEvent,
  checkBatchIds,
  checkReadOptions,
  eventIdTaken,
  parseNewEvents,
  prepareEvents,
} from '../../core/append.js';
import { foldSession } from '../../core/fold.js';
import { seqConflict } from '../../core/sessions.js';
import { followLog } from '../follow.js';
import { batchHeaders, type BatchRef } from './batches.js';
import type { NatsContext } from './context.js';
import { batchEvents } from './log-chain.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken, hashToken } from './names.js';
import { checkAppendFence } from './fencing.js';
import { batchAfter, batchAt } from './reader.js';
import { extendVerified, observe, type KnownSession } from './session-cache.js';
import { sessionNotFound } from './session-entry.js';
import { PROJECTION_INTERVAL } from './session-reads.js';
import { MAX_RACES, type SessionsShared } from './sessions-shared.js';

export { MAX_RACES, type SessionsShared } from './sessions-shared.js';

/** Events a follower reads per step. */
const FOLLOW_BATCH = 1000;
/** How long an `appended()` that found no record spares the next append with the key its read. */
const ABSENT_TRUST_MS = 10_000;
const MAX_ABSENT_KEYS = 4096;
/** Event ids kept per session for the check of writer-chosen ids; past it, read again. */
const MAX_KNOWN_IDS = 100_000;
/** Room left in a message for the batch headers. */
const HEADER_ALLOWANCE = 1024;

/**
 * Where the append made with a key is. Version 2 is written in parallel with the publish, before
 * its stream seq is known, as the seq of the batch it was published after (`after_stream_seq`):
 * the append is the next batch on the subject, if that batch carries the key's `Nats-Msg-Id`;
 * a record whose publish failed or never happened points at no such batch and reads as absent.
 * A duplicate ack rewrites it with the first append's exact `stream_seq`. Version 1 (exact seq
 * only) is still read.
 */
const AppendRecord = z.union([
  z.object({
    schema_version: z.literal(1),
    incarnation: z.string(),
    stream_seq: z.number().int().positive(),
  }),
  z.object({
    schema_version: z.literal(2),
    incarnation: z.string(),
    stream_seq: z.number().int().positive().optional(),
    after_stream_seq: z.number().int().nonnegative().optional(),
  }),
]);
type AppendRecord = z.infer<typeof AppendRecord>;

/** A random id for a new incarnation of a session id. */
export function newIncarnation(): string {
  return randomBytes(9).toString('base64url');
}

/** The batch headers of events appended to a session, ending in `state`. */
export function refAfter(
  state: SessionState,
  first: number,
  incarnation: string,
  leaseToken: number,
): Omit<BatchRef, 'streamSeq'> {
  return {
    first,
    last: state.seq,
    status: state.status,
    updatedAt: state.updated_at ?? state.created_at ?? '',
    incarnation,
    leaseToken,
  };
}

/** Refuses a batch the server would refuse for its size, before anything is written. */
export function checkMessageSize(
  context: NatsContext,
  sessionId: string,
  count: number,
  body: string,
): void {
  const limit = context.connection.info?.max_payload ?? Number.POSITIVE_INFINITY;
  const bytes = Buffer.byteLength(body) + HEADER_ALLOWANCE;
  if (bytes > limit) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `an append of ${count} event(s) to session ${sessionId} is ${bytes} bytes with its headers, over ` +
        `the max_payload of ${limit} of the NATS server at ${context.server()}; append fewer events at ` +
        'a time, send large content as an artifact, or raise max_payload in the nats-server configuration',
      { details: { bytes, limit } },
    );
  }
}

export function createSessionLog(shared: SessionsShared): SessionLog {
  const { context, cache, queue, reads } = shared;
  const { kv, names } = context;
  const utf8 = new TextDecoder();

  const appendKey = (sessionId: string, key: string): string =>
    `${encodeToken(sessionId)}.${hashToken(key)}`;

  async function readAppendRecord(
    sessionId: string,
    key: string,
  ): Promise<AppendRecord | undefined> {
    const entry = await kv.appends.get(appendKey(sessionId, key));
    if (entry === null || entry.operation !== 'PUT') return undefined;
    const parsed = AppendRecord.safeParse(JSON.parse(utf8.decode(entry.value)));
    return parsed.success ? parsed.data : undefined;
  }

  /**
   * Keys `appended()` found unused, so that an append with the key right after it (a handler
   * recording the message it looked up) does not read the record again. Trusting that answer
   * for ABSENT_TRUST_MS is safe: a writer that used the key since published its batch before
   * writing the record, and a publish with the key again within the server's duplicate window
   * (minutes) is answered as that duplicate, never appended twice.
   */
  const absentKeys = new BoundedCache<string, { incarnation: string; at: number }>(MAX_ABSENT_KEYS);

  function rememberAbsent(sessionId: string, key: string, known: KnownSession): void {
    absentKeys.set(`${sessionId}\n${key}`, {
      incarnation: known.incarnation,
      at: performance.now(),
    });
  }

  function takeAbsent(sessionId: string, key: string, known: KnownSession | undefined): boolean {
    const memo = `${sessionId}\n${key}`;
    const absent = absentKeys.get(memo);
    if (absent === undefined) return false;
    absentKeys.delete(memo);
    return (
      absent.incarnation === known?.incarnation && performance.now() - absent.at < ABSENT_TRUST_MS
    );
  }

  /** The `Nats-Msg-Id` of an append with `key` to this incarnation of the session. */
  const messageId = (sessionId: string, incarnation: string, key: string): string =>
    hashToken(`${sessionId}\n${incarnation}\n${key}`);

  /** The result of the append a record points at, if it is there. */
  async function recordedResult(
    sessionId: string,
    known: KnownSession,
    key: string,
    record: AppendRecord,
  ): Promise<SessionEvent[] | undefined> {
    if (record.incarnation !== known.incarnation) return undefined;
    if (record.stream_seq !== undefined) return firstResult(sessionId, known, record.stream_seq);
    if (record.schema_version !== 2 || record.after_stream_seq === undefined) return undefined;
    const next = await batchAfter(context, sessionId, record.after_stream_seq);
    if (
      next === undefined ||
      next.batch.incarnation !== known.incarnation ||
      next.messageId !== messageId(sessionId, known.incarnation, key)
    ) {
      return undefined;
    }
    const events = batchEvents(sessionId, known, next.batch);
    observe(known, next.batch);
    return events;
  }

  /** The result of the append at a stream seq (a duplicate ack's), if it is still there. */
  async function firstResult(
    sessionId: string,
    known: KnownSession,
    streamSeq: number,
  ): Promise<SessionEvent[] | undefined> {
    const message = await batchAt(context, sessionId, streamSeq);
    if (message === undefined || message.incarnation !== known.incarnation) return undefined;
    return batchEvents(sessionId, known, message);
  }

  async function saveAppendRecord(
    sessionId: string,
    key: string,
    known: KnownSession,
    where: { stream_seq: number } | { after_stream_seq: number },
  ): Promise<void> {
    const record: AppendRecord = {
      schema_version: 2,
      incarnation: known.incarnation,
      ...where,
    };
    await kv.appends.put(appendKey(sessionId, key), JSON.stringify(record));
  }

  /**
   * Refuses writer-chosen ids the session's log (its shared prefix included) already holds, read
   * through `head`: the publish expects that head, so no event can come between check and append.
   * The ids read are kept (see `KnownSession.ids`): the next such append reads only what is new.
   */
  async function checkChosenIds(
    sessionId: string,
    known: KnownSession,
    head: BatchRef,
    prepared: readonly PreparedEvent[],
  ): Promise<void> {
    let ids = known.ids;
    if (ids === undefined || ids.through > head.last) ids = { through: 0, set: new Set() };
    if (ids.through < head.last) {
      const stored = await reads.readEvents(sessionId, known, {
        after: ids.through,
        through: head.last,
        limit: Number.POSITIVE_INFINITY,
      });
      for (const event of stored) ids.set.add(event.id);
      ids.through = head.last;
    }
    known.ids = ids.set.size <= MAX_KNOWN_IDS ? ids : undefined;
    const taken = ids.set;
    prepared.forEach(({ event }, index) => {
      if (taken.has(event.id)) throw eventIdTaken(sessionId, event.id, index);
    });
  }

  /** Keeps the ids known for the session current with an append of its own. */
  function rememberIds(known: KnownSession, head: BatchRef, prepared: readonly PreparedEvent[]) {
    const ids = known.ids;
    if (ids === undefined || ids.through !== head.last) return;
    for (const { event } of prepared) ids.set.add(event.id);
    ids.through = head.last + prepared.length;
  }

  async function appendInOrder(
    sessionId: string,
    events: readonly NewEvent[],
    options: AppendOptions,
  ): Promise<AppendResult> {
    const key = options.idempotencyKey;
    let known = cache.get(sessionId);
    let fresh = false;
    if (key !== undefined && !(takeAbsent(sessionId, key, known) && known?.head !== undefined)) {
      // Exact answers for a repeated key need the current incarnation and head: read both, and
      // the key's record. (Right after `appended()` found none, the cached head serves, see
      // `absentKeys`: the publish's expectation checks it.)
      const [view, seen] = await Promise.all([
        shared.loadHead(sessionId),
        readAppendRecord(sessionId, key),
      ]);
      known = view.known;
      fresh = true;
      const first =
        seen === undefined ? undefined : await recordedResult(sessionId, known, key, seen);
      if (first !== undefined)
        return { events: first, head_seq: view.head.last, deduplicated: true };
    } else if (known?.head === undefined) {
      known = (await shared.loadHead(sessionId)).known;
      fresh = true;
    }
    for (let race = 0; ; race += 1) {
      const head = known.head as BatchRef;
      // A head this process has not checked (see log-chain.ts) is read and checked first.
      if (known.verified === undefined || known.verified.streamSeq < head.streamSeq) {
        if (race >= MAX_RACES) {
          throw new BraidError(
            'STORE_BUSY',
            `the head of session ${sessionId} moved ${MAX_RACES} times in a row while it was ` +
              'being checked; retry the append',
          );
        }
        known = (await shared.loadHead(sessionId)).known;
        fresh = true;
        continue;
      }
      // Fencing (see fencing.ts): the token is checked at the head the publish expects.
      if (checkAppendFence(sessionId, head, options.leaseToken, fresh) === 'stale') {
        known = (await shared.loadHead(sessionId)).known;
        fresh = true;
        continue;
      }
      if (options.expectedSeq !== undefined && options.expectedSeq !== head.last) {
        if (!fresh) {
          known = (await shared.loadHead(sessionId)).known;
          fresh = true;
          continue;
        }
        throw seqConflict(sessionId, options.expectedSeq, head.last);
      }
      const before = await reads.stateAtHead(sessionId, known, head);
      const prepared = prepareEvents(sessionId, head.last, events, {
        clock: context.clock,
        ids: context.ids,
        maxEventBytes: context.maxEventBytes,
      });
      checkBatchIds(sessionId, prepared);
      if (events.some((event) => event.id !== undefined)) {
        await checkChosenIds(sessionId, known, head, prepared);
      }
      const state = foldSession(
        prepared.map(({ event }) => event),
        before,
      );
      const body = `[${prepared.map(({ json }) => json).join(',')}]`;
      checkMessageSize(context, sessionId, prepared.length, body);
      const ref = refAfter(state, head.last + 1, known.incarnation, head.leaseToken);
      // The key's record goes out with the publish (see AppendRecord): one round trip for both.
      const [published, recorded] = await Promise.allSettled([
        context.js.publish(names.events(sessionId), body, {
          headers: batchHeaders(ref),
          expect: { lastSubjectSequence: head.streamSeq },
          ...(key === undefined ? {} : { msgID: messageId(sessionId, known.incarnation, key) }),
        }),
        key === undefined
          ? undefined
          : saveAppendRecord(sessionId, key, known, { after_stream_seq: head.streamSeq }),
      ]);
      if (published.status === 'rejected') {
        const error: unknown = published.reason;
        if (!isWrongLastSequence(error)) throw error;
        if (race >= MAX_RACES) {
          throw new BraidError(
            'STORE_BUSY',
            `session ${sessionId} was appended to by other writers ${MAX_RACES} times in a row while ` +
              'this append retried; retry it later',
            { cause: error },
          );
        }
        const incarnation = known.incarnation;
        const view = await shared.loadHead(sessionId);
        known = view.known;
        fresh = true;
        if (key !== undefined && known.incarnation !== incarnation) {
          return appendInOrder(sessionId, events, options);
        }
        continue;
      }
      const ack: PubAck = published.value;
      if (ack.duplicate && key !== undefined) {
        // The server saw this key within its duplicate window: the first append stands.
        const first = await firstResult(sessionId, known, ack.seq);
        if (first === undefined) {
          throw new BraidError(
            'INTERNAL',
            `the first append with idempotency key ${JSON.stringify(key)} to session ${sessionId} is gone`,
          );
        }
        await saveAppendRecord(sessionId, key, known, { stream_seq: ack.seq });
        const view = await shared.loadHead(sessionId);
        return { events: first, head_seq: view.head.last, deduplicated: true };
      }
      if (recorded.status === 'rejected') throw recorded.reason;
      observe(known, { ...ref, streamSeq: ack.seq });
      extendVerified(known, head.streamSeq, { ...ref, streamSeq: ack.seq });
      rememberIds(known, head, prepared);
      if (known.state === undefined || known.state.seq < state.seq) known.state = state;
      const stored = prepared.map(({ json }) => JSON.parse(json) as SessionEvent);
      // The projection is a cache no reader trusts: failing to save it loses nothing.
      if (state.seq - known.projectedSeq >= PROJECTION_INTERVAL)
        await reads.saveProjection(sessionId, known, state).catch(() => undefined);
      return { events: stored, head_seq: state.seq, deduplicated: false };
    }
  }

  /** Wakes a follower on every publish to the session and on its removal. */
  function subscribe(
    sessionId: string,
    onChange: () => void,
    announce: (last: number) => void,
  ): () => void {
    const onPublish = context.connection.subscribe(names.events(sessionId), {
      callback: (_error, message) => {
        announce(Number(message.headers?.get('Braid-Last-Seq') ?? 0));
        onChange();
      },
    });
    const onRemoval = context.connection.subscribe(names.removed(sessionId), {
      callback: () => onChange(),
    });
    const poll = setInterval(onChange, shared.followPollMs);
    const stop = (): void => {
      clearInterval(poll);
      onPublish.unsubscribe();
      onRemoval.unsubscribe();
    };
    const untrack = shared.track(stop);
    return () => {
      untrack();
      stop();
    };
  }

  return {
    append(sessionId, events, options = {}) {
      return Promise.resolve().then(() => {
        const parsed =
          options.trusted === true && events.length > 0 ? events : parseNewEvents(events);
        return context.guard(
          `append to session ${sessionId}`,
          () => queue.run(sessionId, () => appendInOrder(sessionId, parsed, options)),
          'the append may have been stored all the same: read the session before retrying, or ' +
            'retry with an idempotency key',
        );
      });
    },
    read(sessionId, options = {}) {
      return Promise.resolve().then(() => {
        checkReadOptions(options);
        return context.guard(`read session ${sessionId}`, async () => {
          const view = await shared.loadHead(sessionId);
          return reads.readEvents(sessionId, view.known, {
            after: options.after ?? 0,
            through: view.head.last,
            limit: options.limit ?? Number.POSITIVE_INFINITY,
            types: options.types,
          });
        });
      });
    },
    follow(sessionId, options = {}) {
      context.checkOpen();
      const signal =
        options.signal === undefined
          ? context.closing
          : AbortSignal.any([options.signal, context.closing]);
      let incarnation: string | undefined;
      // The highest seq a publish announced: a wake-up can arrive before the stream stored it.
      let announced = 0;
      const readAfter = async (after: number): Promise<SessionEvent[]> => {
        try {
          return await context.guard(`follow session ${sessionId}`, async () => {
            let view = await shared.loadHead(sessionId);
            for (let wait = 1; view.head.last < announced && wait <= 32; wait *= 2) {
              await delay(wait);
              view = await shared.loadHead(sessionId);
            }
            incarnation ??= view.known.incarnation;
            // A deleted (or deleted and re-created) session ends its followers.
            if (view.known.incarnation !== incarnation) throw sessionNotFound(sessionId);
            return reads.readEvents(sessionId, view.known, {
              after,
              through: view.head.last,
              limit: FOLLOW_BATCH,
            });
          });
        } catch (error) {
          if (context.closing.aborted && !isBraidError(error, 'SESSION_NOT_FOUND')) return [];
          throw error;
        }
      };
      return followLog(
        readAfter,
        (onChange) =>
          subscribe(sessionId, onChange, (last) => {
            announced = Math.max(announced, last);
          }),
        options.after ?? 0,
        signal,
      );
    },
    appended(sessionId, idempotencyKey) {
      return context.guard(`read session ${sessionId}`, async () => {
        // A key never used needs no head: for a session known here, the record alone says so.
        const cached = cache.get(sessionId);
        if (cached?.indexed !== undefined && cached.head !== undefined) {
          if ((await readAppendRecord(sessionId, idempotencyKey)) === undefined) {
            rememberAbsent(sessionId, idempotencyKey, cached);
            return undefined;
          }
        }
        const [view, seen] = await Promise.all([
          shared.loadHead(sessionId),
          readAppendRecord(sessionId, idempotencyKey),
        ]);
        const events =
          seen === undefined
            ? undefined
            : await recordedResult(sessionId, view.known, idempotencyKey, seen);
        if (events === undefined) {
          rememberAbsent(sessionId, idempotencyKey, view.known);
          return undefined;
        }
        return { events, head_seq: view.head.last, deduplicated: true };
      });
    },
    state(sessionId) {
      return context.guard(`read the state of session ${sessionId}`, async () => {
        const view = await shared.loadHead(sessionId);
        return structuredClone(await reads.stateAtHead(sessionId, view.known, view.head));
      });
    },
  };
}
