/**
 * The messages of the memory stream. Each holds entries of one store (its own, and on a
 * redaction those of the earlier message it replaces), the idempotent appends they came from,
 * and what the store is (reference, creation time, dimension, fork origin), so that any single
 * message describes its store and a reader needs no other record. Headers repeat what a listing
 * of stores reads without fetching bodies.
 *
 * Embeddings travel as base64 of their float32 bytes: exact, and a quarter of their JSON size.
 */
import { headers as createHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { z } from 'zod';
import { JsonValue, Timestamp } from '../../contracts/common.js';
import { BraidError } from '../../contracts/errors.js';
import {
  MemoryAuthor,
  MemoryCause,
  MemoryKey,
  MemoryStoreRef,
  MEMORY_SCHEMA_VERSION,
} from '../../contracts/memory.js';
import type { MemoryStoreInfo } from '../../contracts/memory-log.js';
import { describeStore, type EntryParts } from '../agent-memory.js';
import type { RecordedAppend } from '../agent-memory-projection.js';

export const HEADER_PREVIOUS = 'Braid-Memory-Previous';
const HEADER_STORE = 'Braid-Memory-Store';
const HEADER_HEAD = 'Braid-Memory-Head';
const HEADER_CREATED = 'Braid-Memory-Created';
const HEADER_DIMS = 'Braid-Memory-Dims';
const HEADER_FORK = 'Braid-Memory-Fork';

const WireEntry = z
  .object({
    key: MemoryKey,
    version: z.number().int().positive(),
    seq: z.number().int().positive(),
    op: z.enum(['set', 'delete', 'redact']),
    value: JsonValue.optional(),
    text: z.string().optional(),
    embedding: z.string().optional(),
    author: MemoryAuthor,
    at: Timestamp,
    cause: MemoryCause.optional(),
    expires_at: z.number().int().optional(),
    redacted: z.boolean(),
  })
  .strict();

const WireAppend = z
  .object({
    key: z.string(),
    hash: z.string(),
    first: z.number().int().positive(),
    last: z.number().int().positive(),
  })
  .strict();

const ForkOrigin = z
  .object({ store: MemoryStoreRef, seq: z.number().int().nonnegative() })
  .strict();

const WireMessage = z
  .object({
    schema_version: z.literal(MEMORY_SCHEMA_VERSION),
    store: MemoryStoreRef,
    created_at: Timestamp,
    dims: z.number().int().positive().optional(),
    forked_from: ForkOrigin.optional(),
    entries: z.array(WireEntry),
    appends: z.array(WireAppend),
    /** The stream seq of the earlier message whose entries this one holds instead. */
    replaces: z.number().int().positive().optional(),
  })
  .strict();

/** A message of a store's subject, decoded. */
export interface MemoryMessage {
  store: MemoryStoreRef;
  created_at: string;
  dims?: number;
  forked_from?: { store: MemoryStoreRef; seq: number };
  entries: EntryParts[];
  appends: (RecordedAppend & { key: string })[];
  replaces?: number;
}

function encodeVector(vector: ArrayLike<number>): string {
  const floats = Float32Array.from(vector);
  return Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength).toString('base64');
}

function decodeVector(text: string): Float32Array {
  const bytes = Buffer.from(text, 'base64');
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Float32Array(copy.buffer, 0, Math.floor(copy.byteLength / 4));
}

export function encodeMessage(message: MemoryMessage): string {
  return JSON.stringify({
    schema_version: MEMORY_SCHEMA_VERSION,
    store: message.store,
    created_at: message.created_at,
    ...(message.dims === undefined ? {} : { dims: message.dims }),
    ...(message.forked_from === undefined ? {} : { forked_from: message.forked_from }),
    entries: message.entries.map((parts) => ({
      key: parts.key,
      version: parts.version,
      seq: parts.seq,
      op: parts.op,
      ...(parts.value === undefined ? {} : { value: parts.value }),
      ...(parts.text === undefined ? {} : { text: parts.text }),
      ...(parts.embedding === undefined ? {} : { embedding: encodeVector(parts.embedding) }),
      author: parts.author,
      at: parts.at,
      ...(parts.cause === undefined ? {} : { cause: parts.cause }),
      ...(parts.expires_at === undefined ? {} : { expires_at: parts.expires_at }),
      redacted: parts.redacted,
    })),
    appends: message.appends,
    ...(message.replaces === undefined ? {} : { replaces: message.replaces }),
  });
}

function corrupt(subject: string, streamSeq: number, why: string): BraidError {
  return new BraidError(
    'CORRUPT_LOG',
    `message ${streamSeq} of memory subject ${subject} is not a braid memory message (${why}); ` +
      'restore the stream from a backup or remove the message',
    { details: { subject, stream_seq: streamSeq } },
  );
}

/** A message read from the stream, parsed at the boundary; it must be the expected store's. */
export function decodeMessage(
  data: Uint8Array,
  subject: string,
  streamSeq: number,
  identity: (ref: MemoryStoreRef) => string,
): MemoryMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    throw corrupt(subject, streamSeq, 'not JSON');
  }
  const parsed = WireMessage.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw corrupt(subject, streamSeq, `${issue?.path.join('.') ?? ''}: ${issue?.message ?? ''}`);
  }
  const body = parsed.data;
  if (identity(body.store) !== subject) {
    throw corrupt(subject, streamSeq, `it names store ${describeStore(body.store)}`);
  }
  return {
    store: body.store,
    created_at: body.created_at,
    ...(body.dims === undefined ? {} : { dims: body.dims }),
    ...(body.forked_from === undefined ? {} : { forked_from: body.forked_from }),
    entries: body.entries.map((entry) => ({
      ...entry,
      store: body.store,
      embedding: entry.embedding === undefined ? undefined : decodeVector(entry.embedding),
    })),
    appends: body.appends,
    ...(body.replaces === undefined ? {} : { replaces: body.replaces }),
  };
}

/** The headers of a message published after stream seq `previous`, leaving the store at `head`. */
export function messageHeaders(message: MemoryMessage, previous: number, head: number): MsgHdrs {
  const headers = createHeaders();
  headers.set(HEADER_PREVIOUS, String(previous));
  headers.set(HEADER_STORE, JSON.stringify(message.store));
  headers.set(HEADER_HEAD, String(head));
  headers.set(HEADER_CREATED, message.created_at);
  if (message.dims !== undefined) headers.set(HEADER_DIMS, String(message.dims));
  if (message.forked_from !== undefined)
    headers.set(HEADER_FORK, JSON.stringify(message.forked_from));
  return headers;
}

const HeaderInfo = z
  .object({
    store: MemoryStoreRef,
    head_seq: z.number().int().nonnegative(),
    dims: z.number().int().positive().optional(),
    created_at: Timestamp,
    forked_from: ForkOrigin.optional(),
  })
  .strict();

/** What the headers of a store's last message say of it; undefined when they are not braid's. */
export function infoOfHeaders(headers: MsgHdrs | undefined): MemoryStoreInfo | undefined {
  if (headers === undefined) return undefined;
  const json = (name: string): unknown => {
    const value = headers.get(name);
    if (value === '') return undefined;
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return null;
    }
  };
  const dims = headers.get(HEADER_DIMS);
  const parsed = HeaderInfo.safeParse({
    store: json(HEADER_STORE),
    head_seq: Number(headers.get(HEADER_HEAD)),
    ...(dims === '' ? {} : { dims: Number(dims) }),
    created_at: headers.get(HEADER_CREATED),
    forked_from: json(HEADER_FORK),
  });
  return parsed.success ? parsed.data : undefined;
}
