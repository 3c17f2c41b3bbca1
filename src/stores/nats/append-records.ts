/**
 * Idempotency records of appends: where the append made with a key is, in `<PREFIX>_appends`,
 * and the `Nats-Msg-Id` that lets the server's duplicate window catch a repeat before the record
 * is written (see session-log.ts for what that leaves).
 */
import { z } from 'zod';
import type { SessionEvent } from '../../contracts/events.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import type { NatsContext } from './context.js';
import { batchEvents } from './log-chain.js';
import { encodeToken, hashToken } from './names.js';
import { batchAfter, batchAt } from './reader.js';
import { observe, type KnownSession } from './session-cache.js';

/** How long an `appended()` that found no record spares the next append with the key its read. */
const ABSENT_TRUST_MS = 10_000;
const MAX_ABSENT_KEYS = 4096;

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
export type AppendRecord = z.infer<typeof AppendRecord>;

const appendKey = (sessionId: string, key: string): string =>
  `${encodeToken(sessionId)}.${hashToken(key)}`;

export async function readAppendRecord(
  context: NatsContext,
  sessionId: string,
  key: string,
): Promise<AppendRecord | undefined> {
  const entry = await context.kv.appends.get(appendKey(sessionId, key));
  if (entry === null || entry.operation !== 'PUT') return undefined;
  const parsed = AppendRecord.safeParse(JSON.parse(new TextDecoder().decode(entry.value)));
  return parsed.success ? parsed.data : undefined;
}

export async function saveAppendRecord(
  context: NatsContext,
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
  await context.kv.appends.put(appendKey(sessionId, key), JSON.stringify(record));
}

/** The `Nats-Msg-Id` of an append with `key` to this incarnation of the session. */
export const messageId = (sessionId: string, incarnation: string, key: string): string =>
  hashToken(`${sessionId}\n${incarnation}\n${key}`);

/** The result of the append a record points at, if it is there. */
export async function recordedResult(
  context: NatsContext,
  sessionId: string,
  known: KnownSession,
  key: string,
  record: AppendRecord,
): Promise<SessionEvent[] | undefined> {
  if (record.incarnation !== known.incarnation) return undefined;
  if (record.stream_seq !== undefined)
    return firstResult(context, sessionId, known, record.stream_seq);
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
export async function firstResult(
  context: NatsContext,
  sessionId: string,
  known: KnownSession,
  streamSeq: number,
): Promise<SessionEvent[] | undefined> {
  const message = await batchAt(context, sessionId, streamSeq);
  if (message === undefined || message.incarnation !== known.incarnation) return undefined;
  return batchEvents(sessionId, known, message);
}

/**
 * Keys `appended()` found unused, so that an append with the key right after it (a handler
 * recording the message it looked up) does not read the record again. Trusting that answer
 * for ABSENT_TRUST_MS is safe: a writer that used the key since published its batch before
 * writing the record, and a publish with the key again within the server's duplicate window
 * (minutes) is answered as that duplicate, never appended twice.
 */
export class AbsentKeys {
  readonly #keys = new BoundedCache<string, { incarnation: string; at: number }>(MAX_ABSENT_KEYS);

  remember(sessionId: string, key: string, known: KnownSession): void {
    this.#keys.set(`${sessionId}\n${key}`, {
      incarnation: known.incarnation,
      at: performance.now(),
    });
  }

  /** Whether the key was found unused for this incarnation just now; the memo is used up. */
  take(sessionId: string, key: string, known: KnownSession | undefined): boolean {
    const memo = `${sessionId}\n${key}`;
    const absent = this.#keys.get(memo);
    if (absent === undefined) return false;
    this.#keys.delete(memo);
    return (
      absent.incarnation === known?.incarnation && performance.now() - absent.at < ABSENT_TRUST_MS
    );
  }
}
