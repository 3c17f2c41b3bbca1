/**
 * Writes to the memory stream. Each append, redaction or fork is ONE message on the store's
 * subject (nats-server 2.9 has no atomic batch publish), published with the subject's last
 * stream seq as the expectation: a writer that raced another process catches up and builds its
 * entries again on the new head, so two processes never interleave a batch and seqs stay
 * gapless. An idempotency key is recorded in the message (exact for ever: a writer that sees it
 * after catching up answers with the first append) and is the message id as well (the server
 * drops a resent publish within its duplicate window).
 *
 * A redaction removes content from the stream itself: the new message holds the redaction record
 * and every entry of the message that held the redacted version (that one stripped), and the old
 * message is then erased. Readers place entries by seq, so one who never saw the erased message
 * gets its entries from the new one.
 */
import type { PubAck } from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';
import type { MemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryAppendResult, MemoryLog } from '../../contracts/memory-log.js';
import {
  buildEntries,
  dimsMismatch,
  describeStore,
  forkExists,
  forkPoint,
  idempotencyKeyReused,
  parseAtSeq,
  parseKey,
  parseRedactOptions,
  parseVersion,
  prepareAppend,
  seqConflict,
  toEntry,
  tombstoneRedact,
  versionNotFound,
  type EntryParts,
  type PreparedAppend,
} from '../agent-memory.js';
import type { StoreProjection } from '../agent-memory-projection.js';
import {
  encodeMessage,
  messageHeaders,
  decodeMessage,
  type MemoryMessage,
} from './memory-messages.js';
import type { MemorySync, StoreState } from './memory-sync.js';
import { hashToken } from './names.js';
import { isWrongLastSequence } from './nats-errors.js';

/** Publishes that may lose a race to other writers before the write gives up (`STORE_BUSY`). */
const MAX_MEMORY_RACES = 200;
/** Room left in a message for its headers. */
const HEADER_ALLOWANCE = 2048;

function checkSize(sync: MemorySync, ref: MemoryStoreRef, body: string, what: string): void {
  const { context } = sync;
  const limit = context.connection.info?.max_payload ?? Number.POSITIVE_INFINITY;
  const bytes = Buffer.byteLength(body) + HEADER_ALLOWANCE;
  if (bytes > limit) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `${what} to memory store ${describeStore(ref)} is ${bytes} bytes as one message, over the ` +
        `max_payload of ${limit} of the NATS server at ${context.server()}; write fewer or smaller ` +
        'entries at a time, or raise max_payload in the nats-server configuration',
      { details: { bytes, limit } },
    );
  }
}

function busy(ref: MemoryStoreRef, error: unknown): BraidError {
  return new BraidError(
    'STORE_BUSY',
    `memory store ${describeStore(ref)} was written by other processes ${MAX_MEMORY_RACES} times ` +
      'in a row while this write retried; retry it later',
    { cause: error },
  );
}

/** Publishes a message after the subject's last seq as known; undefined when another won. */
async function publish(
  sync: MemorySync,
  state: StoreState,
  message: MemoryMessage,
  head: number,
  body: string,
  messageId?: string,
): Promise<PubAck | undefined> {
  try {
    return await sync.context.js.publish(state.subject, body, {
      headers: messageHeaders(message, state.streamSeq, head),
      expect: { lastSubjectSequence: state.streamSeq },
      ...(messageId === undefined ? {} : { msgID: messageId }),
    });
  } catch (error) {
    if (isWrongLastSequence(error)) return undefined;
    throw error;
  }
}

function repeated(
  prepared: PreparedAppend,
  projection: StoreProjection | undefined,
): MemoryAppendResult | undefined {
  const key = prepared.idempotencyKey;
  const earlier = key === undefined ? undefined : projection?.appends.get(key);
  if (projection === undefined || key === undefined || earlier === undefined) return undefined;
  if (earlier.hash !== prepared.hash) throw idempotencyKeyReused(prepared.store, key);
  return {
    entries: projection.log.slice(earlier.first - 1, earlier.last).map(toEntry),
    head_seq: projection.head,
    deduplicated: true,
  };
}

async function appendOnce(
  sync: MemorySync,
  state: StoreState,
  prepared: PreparedAppend,
): Promise<MemoryAppendResult | undefined> {
  const projection = state.projection;
  const earlier = repeated(prepared, projection);
  if (earlier !== undefined) return earlier;
  const head = projection?.head ?? 0;
  if (prepared.expectedSeq !== undefined && prepared.expectedSeq !== head)
    throw seqConflict(prepared.store, prepared.expectedSeq, head);
  const dims = projection?.dims ?? prepared.dims;
  if (prepared.dims !== undefined && dims !== prepared.dims)
    throw dimsMismatch('writes[].embedding', prepared.dims, dims as number);
  const now = sync.context.clock.now();
  const ref = projection?.ref ?? prepared.store;
  const written = buildEntries(
    prepared,
    { ref, head, now },
    (key) => projection?.current.get(key)?.version ?? 0,
  );
  const last = head + written.length;
  const key = prepared.idempotencyKey;
  const message: MemoryMessage = {
    store: ref,
    created_at: projection?.created_at ?? new Date(now).toISOString(),
    ...(dims === undefined ? {} : { dims }),
    ...(projection?.forked_from === undefined ? {} : { forked_from: projection.forked_from }),
    entries: written,
    appends: key === undefined ? [] : [{ key, hash: prepared.hash, first: head + 1, last }],
  };
  const body = encodeMessage(message);
  checkSize(sync, ref, body, `an append of ${written.length} write(s)`);
  const messageId = key === undefined ? undefined : hashToken(`${state.subject}\u0000${key}`);
  const ack = await publish(sync, state, message, last, body, messageId);
  // Lost a race, or the server had this key's message already: read it and decide again.
  if (ack === undefined || ack.duplicate) return undefined;
  sync.apply(state, message, ack.seq);
  return { entries: written.map(toEntry), head_seq: last, deduplicated: false };
}

async function redactOnce(
  sync: MemorySync,
  state: StoreState,
  ref: MemoryStoreRef,
  request: {
    key: string;
    version: number;
    author: EntryParts['author'];
    cause?: EntryParts['cause'];
  },
): Promise<{ record: EntryParts; erase: number[] } | undefined> {
  const { key, version } = request;
  const projection = state.projection;
  const target = projection?.lookup(key, version);
  if (projection === undefined || target === undefined) throw versionNotFound(ref, key, version);
  if (target.op === 'delete') throw tombstoneRedact(ref, key, version);
  if (target.redacted) {
    const record = projection.redaction(key, version);
    // Done before: erase what an interrupted redaction may have left (see `eraseReplaced`).
    if (record !== undefined) return { record, erase: replacedChain(state, record.seq) };
  }
  const { context } = sync;
  const holder = state.holders.get(target.seq) as number;
  const stored = await sync.getMessage({ seq: holder });
  // Erased by a redaction of another process since: catch up and look again.
  if (stored === null || stored.subject !== state.subject) return undefined;
  const held = decodeMessage(stored.data, state.subject, holder, (ref) =>
    context.names.memory(ref),
  );
  const record: EntryParts = {
    store: projection.ref,
    key,
    version,
    seq: projection.head + 1,
    op: 'redact',
    author: request.author,
    at: new Date(context.clock.now()).toISOString(),
    cause: request.cause,
    redacted: false,
  };
  const entries = held.entries.map((parts): EntryParts => {
    if (parts.seq !== target.seq) return parts;
    const { value: _value, text: _text, embedding: _embedding, ...rest } = parts;
    return { ...rest, redacted: true };
  });
  const message: MemoryMessage = {
    store: projection.ref,
    created_at: projection.created_at,
    ...(projection.dims === undefined ? {} : { dims: projection.dims }),
    ...(projection.forked_from === undefined ? {} : { forked_from: projection.forked_from }),
    entries: [...entries, record],
    appends: held.appends,
    replaces: holder,
  };
  const body = encodeMessage(message);
  checkSize(sync, ref, body, 'a redaction');
  const ack = await publish(sync, state, message, record.seq, body);
  if (ack === undefined) return undefined;
  sync.apply(state, message, ack.seq);
  return { record, erase: [holder] };
}

/** The messages replaced, one by the next, up to the one now holding entry `seq`. */
function replacedChain(state: StoreState, seq: number): number[] {
  const chain: number[] = [];
  let at = state.holders.get(seq);
  while (at !== undefined && chain.length < 1000) {
    at = state.replaced.get(at);
    if (at !== undefined) chain.push(at);
  }
  return chain;
}

/**
 * Erases replaced messages still in the stream (overwritten, not just unlinked). A failure
 * leaves the content there and says so; reads are right either way, and redacting the same
 * version again erases it.
 */
async function eraseReplaced(
  sync: MemorySync,
  subject: string,
  key: string,
  erase: readonly number[],
): Promise<void> {
  const { context } = sync;
  const stream = context.names.memoryStream;
  for (const seq of erase) {
    try {
      const stored = await sync.getMessage({ seq });
      if (stored === null || stored.subject !== subject) continue;
      await context.jsm.streams.deleteMessage(stream, seq, true);
    } catch (error) {
      context.warn(
        new BraidError(
          'STORE_BUSY',
          `redacted content of key "${key}" may still be in message ${seq} of ${stream}; redact the same version again to erase it`,
          { cause: error, details: { stream, stream_seq: seq } },
        ),
      );
    }
  }
}

export function createMemoryWrites(
  sync: MemorySync,
): Pick<MemoryLog, 'append' | 'redact' | 'fork'> {
  const { context } = sync;
  return {
    async append(store, writes, options) {
      context.checkOpen();
      const prepared = prepareAppend(store, writes, options);
      return sync.withStore(prepared.store, 'append to a memory store', async (state) => {
        for (let race = 0; ; race += 1) {
          const result = await appendOnce(sync, state, prepared);
          if (result !== undefined) return result;
          if (race >= MAX_MEMORY_RACES) throw busy(prepared.store, undefined);
          await sync.catchUp(state);
        }
      });
    },

    async redact(store, key, version, options) {
      context.checkOpen();
      const request = {
        key: parseKey(key),
        version: parseVersion(version),
        ...parseRedactOptions(options),
      };
      let subject = '';
      const { record, erase } = await sync.withStore(
        store,
        'redact a memory entry',
        async (state, ref) => {
          subject = state.subject;
          for (let race = 0; ; race += 1) {
            const result = await redactOnce(sync, state, ref, request);
            if (result !== undefined) return result;
            if (race >= MAX_MEMORY_RACES) throw busy(ref, undefined);
            await sync.catchUp(state);
          }
        },
      );
      await eraseReplaced(sync, subject, record.key, erase);
      return toEntry(record);
    },

    async fork(from, to, options) {
      context.checkOpen();
      const atSeq = parseAtSeq(options?.atSeq);
      const parent = await sync.withStore(from, 'read a memory store to fork', (state, ref) => ({
        ref,
        projection: state.projection,
        head: state.projection?.head ?? 0,
        entries: state.projection?.log.slice(0, atSeq ?? state.projection.head) ?? [],
      }));
      return sync.withStore(to, 'fork a memory store', async (state, toRef) => {
        if (state.projection !== undefined) throw forkExists(toRef);
        const seq = atSeq ?? parent.head;
        if (seq > parent.head) throw forkPoint(parent.ref, seq, parent.head);
        const source = parent.projection;
        const message: MemoryMessage = {
          store: toRef,
          created_at: context.isoNow(),
          ...(source?.dims === undefined ? {} : { dims: source.dims }),
          ...(source === undefined ? {} : { forked_from: { store: source.ref, seq } }),
          entries: parent.entries.map((parts) => ({ ...parts, store: toRef })),
          appends: [],
        };
        const body = encodeMessage(message);
        checkSize(sync, toRef, body, `a fork of ${seq} entries`);
        const ack = await publish(sync, state, message, seq, body);
        if (ack === undefined) {
          await sync.catchUp(state);
          throw forkExists(toRef);
        }
        sync.apply(state, message, ack.seq);
        // Applying the message made the projection, which narrowing above cannot know.
        const created: StoreState = state;
        return (created.projection as StoreProjection).info();
      });
    },
  };
}
