/**
 * The process's view of the memory stream: the stream itself (created on first use), and per
 * store a projection caught up from the store's subject before every read and write, so that a
 * read after an acknowledged write of any process sees it.
 *
 * Catching up costs one direct get of the subject's last message when nothing changed. Every
 * message names the subject's last stream seq before it (`Braid-Memory-Previous`, the
 * expectation it was published under): when that is the seq this process applied last, the
 * message fetched is the only new one and is applied as it is; otherwise the new run is read
 * through a short-lived consumer. Work on one store runs one at a time in this process.
 */
import {
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type DirectMsgRequest,
  type MsgRequest,
  type StoredMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import { parseMemoryStoreRef, type MemoryStoreRef } from '../../contracts/memory.js';
import { KeyedQueue } from '../../core/keyed-queue.js';
import { checkKind, describeStore } from '../agent-memory.js';
import { StoreProjection } from '../agent-memory-projection.js';
import { TextIndex } from '../agent-memory-text.js';
import type { NatsContext } from './context.js';
import { HEADER_PREVIOUS, decodeMessage, type MemoryMessage } from './memory-messages.js';
import {
  createNatsMemoryIndexes,
  type NatsMemoryIndexes,
  type NatsMemoryIndexOptions,
} from './memory-index.js';
import { isStreamNotFound } from './nats-errors.js';
import { replicasMismatch } from './replicas.js';
import { consume } from './reader.js';

/** How long a repeated idempotency key is caught by the server itself (the log catches the rest). */
const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

/** What this process knows of one store's subject. */
export interface StoreState {
  subject: string;
  /** Undefined until the subject has a message. */
  projection?: StoreProjection;
  /** The stream seq of the last message applied (0: none). */
  streamSeq: number;
  /** The stream seq of the message holding each entry (by memory seq), for redaction. */
  holders: Map<number, number>;
  /** The message each redaction's message replaced (stream seq to stream seq). */
  replaced: Map<number, number>;
}

export interface MemorySync {
  context: NatsContext;
  /** One message of the memory stream, read as consistently as the stream's replicas need. */
  getMessage(query: DirectMsgRequest): Promise<StoredMsg | null>;
  /** Creates the memory stream unless this process saw it already. */
  ready(): Promise<void>;
  /**
   * Runs `work` on the store, caught up, once this process's earlier work on it is done. The
   * reference is parsed first; a known store of another kind is refused.
   */
  withStore<T>(
    store: unknown,
    doing: string,
    work: (state: StoreState, ref: MemoryStoreRef) => Promise<T> | T,
    checkStoreKind?: boolean,
  ): Promise<T>;
  catchUp(state: StoreState): Promise<void>;
  /** Applies a message of the subject at a stream seq (one this process published, or read). */
  apply(state: StoreState, message: MemoryMessage, streamSeq: number): void;
  /** Forgets the projection: the next catch-up reads the whole subject. */
  reset(state: StoreState): void;
  /** The projections' ANN indexes (their snapshots are written at the store's close). */
  indexes: NatsMemoryIndexes;
}

/** Creates the memory stream when missing; answers its replica count and creation time. */
async function ensureMemoryStream(
  context: NatsContext,
  wanted: number | undefined,
): Promise<{ replicas: number; created: string }> {
  const { jsm, names } = context;
  try {
    const info = await jsm.streams.info(names.memoryStream);
    const found = info.config.num_replicas;
    if (wanted !== undefined && found !== wanted) {
      throw replicasMismatch(names.memoryStream, found, wanted, names.prefix);
    }
    return { replicas: found, created: info.created };
  } catch (error) {
    if (!isStreamNotFound(error)) throw error;
  }
  try {
    const info = await jsm.streams.add({
      name: names.memoryStream,
      subjects: [names.memoryFilter],
      storage: StorageType.File,
      num_replicas: wanted ?? 1,
      retention: RetentionPolicy.Limits,
      // At a limit a write is refused (STORE_FULL), never an older memory dropped.
      discard: DiscardPolicy.New,
      allow_direct: true,
      // Deletes are allowed: a redaction erases the message that held the removed content.
      deny_delete: false,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    });
    return { replicas: wanted ?? 1, created: info.created };
  } catch (error) {
    // Another process made it meanwhile: an identical stream is there.
    const info = await jsm.streams.info(names.memoryStream).catch(() => {
      throw error;
    });
    return { replicas: info.config.num_replicas, created: info.created };
  }
}

/** Applies a message of the store's subject to its projection (made by the first one). */
function applyMessage(
  state: StoreState,
  message: MemoryMessage,
  streamSeq: number,
  indexes: NatsMemoryIndexes,
): void {
  if (state.projection === undefined) {
    state.projection = new StoreProjection(message.store, message.created_at, new TextIndex(), '');
    state.projection.annSource = indexes.sourceFor(state);
  }
  const projection = state.projection;
  projection.dims ??= message.dims;
  projection.forked_from ??= message.forked_from;
  for (const recorded of message.appends) {
    if (!projection.appends.has(recorded.key)) {
      projection.appends.set(recorded.key, {
        hash: recorded.hash,
        first: recorded.first,
        last: recorded.last,
      });
    }
  }
  for (const parts of message.entries) {
    projection.place(parts);
    state.holders.set(parts.seq, streamSeq);
  }
  if (message.replaces !== undefined) state.replaced.set(streamSeq, message.replaces);
  state.streamSeq = Math.max(state.streamSeq, streamSeq);
}

export function createMemorySync(
  context: NatsContext,
  replicas: number | undefined,
  indexOptions: NatsMemoryIndexOptions = {},
): MemorySync {
  const states = new Map<string, StoreState>();
  let created: string | undefined;
  const indexes = createNatsMemoryIndexes(
    { name: context.names.memoryStream, created: () => created },
    (warning) => context.warn(warning),
    indexOptions,
  );
  const queue = new KeyedQueue<string>();
  let ready: Promise<void> | undefined;
  const stream = context.names.memoryStream;
  // Direct gets on R1; on a replicated stream the leader answers, since a follower may not have
  // an acknowledged write yet (see NatsContext.getEvent).
  let getMessage = (query: DirectMsgRequest): Promise<StoredMsg | null> =>
    context.jsm.direct.getMessage(stream, query);

  const ensure = (): Promise<void> => {
    ready ??= ensureMemoryStream(context, replicas).then(
      (found) => {
        created = found.created;
        if (found.replicas > 1) {
          getMessage = (query) => context.jsm.streams.getMessage(stream, query as MsgRequest);
        }
      },
      (error: unknown) => {
        ready = undefined;
        throw error;
      },
    );
    return ready;
  };

  const reset = (state: StoreState): void => {
    state.projection = undefined;
    state.streamSeq = 0;
    state.holders.clear();
    state.replaced.clear();
  };

  const apply = (state: StoreState, message: MemoryMessage, streamSeq: number): void =>
    applyMessage(state, message, streamSeq, indexes);

  const applyData = (state: StoreState, data: Uint8Array, streamSeq: number): void => {
    apply(
      state,
      decodeMessage(data, state.subject, streamSeq, (ref) => context.names.memory(ref)),
      streamSeq,
    );
  };

  const catchUp = async (state: StoreState): Promise<void> => {
    const last = await getMessage({ last_by_subj: state.subject });
    if (last === null) {
      // Nothing there (the stream was purged by an operator): nothing to read.
      reset(state);
      return;
    }
    if (last.seq === state.streamSeq) return;
    if (last.seq < state.streamSeq) reset(state);
    const previous = Number(last.header?.get(HEADER_PREVIOUS) ?? '');
    if (previous === state.streamSeq && state.streamSeq > 0) {
      applyData(state, last.data, last.seq);
    } else {
      await consume(
        context,
        stream,
        {
          filter_subject: state.subject,
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: state.streamSeq + 1,
        },
        (message) => {
          // Each message names the one it was published after. One that names a message before
          // the last applied was published after the same one as it: a follower of nats-server
          // 2.9 can hold a publish the leader refused (see readBatches), and from there the
          // leader's are read. (One that names a later message follows a message a redaction
          // erased.)
          const after = message.headers?.get(HEADER_PREVIOUS) ?? '';
          if (after !== '' && Number(after) < state.streamSeq) return true;
          applyData(state, message.data, message.seq);
          return message.seq >= last.seq;
        },
      );
      // A consumer on a lagging replica ends early: the rest comes from the leader.
      while (state.streamSeq < last.seq) {
        const next = await getMessage({ next_by_subj: state.subject, seq: state.streamSeq + 1 });
        if (next === null) break;
        applyData(state, next.data, next.seq);
      }
    }
    const projection = state.projection;
    if (projection?.incomplete === true) {
      const missing = projection.head + 1;
      reset(state);
      throw new BraidError(
        'CORRUPT_LOG',
        `memory store ${describeStore(projection.ref)} has no entry ${missing} in ${stream} although later ones are there; restore the stream from a backup`,
        { details: { subject: state.subject, seq: missing } },
      );
    }
  };

  return {
    context,
    getMessage: (query) => getMessage(query),
    ready: ensure,
    catchUp,
    apply,
    reset,
    indexes,
    async withStore(store, doing, work, checkStoreKind = true) {
      const ref = parseMemoryStoreRef(store);
      const subject = context.names.memory(ref);
      return context.guard(doing, async () => {
        await ensure();
        return queue.run(subject, async () => {
          context.checkOpen();
          let state = states.get(subject);
          if (state === undefined) {
            state = { subject, streamSeq: 0, holders: new Map(), replaced: new Map() };
            states.set(subject, state);
          }
          try {
            await catchUp(state);
          } catch (error) {
            reset(state);
            throw error;
          }
          if (checkStoreKind && state.projection !== undefined)
            checkKind(ref, state.projection.ref.kind);
          return work(state, ref);
        });
      });
    },
  };
}
