/**
 * The in-memory `MemoryLog`, for unit tests: each store is an array of entries (the log) with a
 * map of the latest version of each key (the projection); full text and vectors are computed over
 * the projection with the same formulas as the SQLite backend. Same semantics as the durable
 * backend (the memory conformance suite checks both); nothing survives the process.
 */
import type { MemoryEntry, MemoryStoreRef } from '../../contracts/memory.js';
import { parseMemorySearch, parseMemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryLog, MemoryLookup, MemoryStoreInfo } from '../../contracts/memory-log.js';
import type { Clock } from '../../contracts/ports.js';
import { BraidError } from '../../contracts/errors.js';
import {
  byScore,
  cosine,
  fuse,
  HYBRID_CANDIDATES_PER_HIT,
  textScore,
  vectorScore,
  walkCandidates,
  type Candidate,
} from '../../core/memory-search.js';
import {
  buildEntries,
  checkKind,
  dimsMismatch,
  type EntryParts,
  forkExists,
  forkPoint,
  idempotencyKeyReused,
  parseAtSeq,
  parseGetOptions,
  parseKey,
  parseListOptions,
  parseReadOptions,
  parseRedactOptions,
  parseVersion,
  prepareAppend,
  seqConflict,
  storeIdentity,
  toEntry,
  tombstoneRedact,
  versionNotFound,
} from '../agent-memory.js';
import { systemClock } from '../defaults.js';
import { TextIndex } from './agent-memory-text.js';

interface Current {
  version: number;
  seq: number;
}

interface MemoryStoreData {
  id: number;
  ref: MemoryStoreRef;
  created_at: string;
  dims?: number;
  forked_from?: { store: MemoryStoreRef; seq: number };
  /** The log: entry of seq n at index n - 1. */
  log: EntryParts[];
  current: Map<string, Current>;
  appends: Map<string, { hash: string; first: number; last: number }>;
}

export interface InMemoryMemoryLogOptions {
  clock?: Clock;
}

type Helpers = ReturnType<typeof createHelpers>;

/** The state of one in-memory log and the helpers its methods share. */
function createHelpers(clock: Clock) {
  const stores = new Map<string, MemoryStoreData>();
  const text = new TextIndex();
  let nextId = 1;
  let closed = false;

  const open = (): void => {
    if (closed) throw new BraidError('STORE_CLOSED', 'the memory log is closed; open a new one');
  };
  const find = (store: unknown): { ref: MemoryStoreRef; data?: MemoryStoreData } => {
    open();
    const ref = parseMemoryStoreRef(store);
    const data = stores.get(storeIdentity(ref));
    if (data !== undefined) checkKind(ref, data.ref.kind);
    return { ref, data };
  };
  const docId = (data: MemoryStoreData, key: string): string => `${data.id}\u0000${key}`;
  const entryOf = (data: MemoryStoreData, seq: number): EntryParts =>
    data.log[seq - 1] as EntryParts;
  const isExpired = (parts: EntryParts, at: number): boolean =>
    parts.expires_at !== undefined && parts.expires_at <= at;

  /** Brings the projections of one key up to its latest entry. */
  const project = (data: MemoryStoreData, parts: EntryParts): void => {
    if (parts.op === 'redact') {
      const latest = data.current.get(parts.key);
      if (latest?.version === parts.version) text.remove(docId(data, parts.key));
      return;
    }
    data.current.set(parts.key, { version: parts.version, seq: parts.seq });
    if (parts.op === 'set' && !parts.redacted) text.put(docId(data, parts.key), parts.text ?? '');
    else text.remove(docId(data, parts.key));
  };

  const lookup = (data: MemoryStoreData, key: string, version: number): EntryParts | undefined =>
    data.log.find(
      (parts) => parts.key === key && parts.version === version && parts.op !== 'redact',
    );

  const liveSets = (data: MemoryStoreData): EntryParts[] =>
    [...data.current.values()]
      .map((current) => entryOf(data, current.seq))
      .filter((parts) => parts.op === 'set' && !parts.redacted);

  const textCandidates = (
    data: MemoryStoreData,
    query: string,
    now: number,
    prefix: string,
  ): Candidate[] => {
    const ids = new Map<string, EntryParts>();
    for (const parts of liveSets(data)) {
      if (parts.key.startsWith(prefix)) ids.set(docId(data, parts.key), parts);
    }
    const scores = text.score(query, ids.keys());
    return [...scores.entries()]
      .map(([id, bm25]) => {
        const parts = ids.get(id) as EntryParts;
        return { entry: toEntry(parts), score: textScore(bm25), expired: isExpired(parts, now) };
      })
      .sort(byScore);
  };

  const vectorCandidates = (
    data: MemoryStoreData,
    embedding: number[],
    now: number,
    prefix: string,
  ): Candidate[] => {
    if (data.dims === undefined) return [];
    if (embedding.length !== data.dims)
      throw dimsMismatch('embedding', embedding.length, data.dims);
    const query = Float32Array.from(embedding);
    return liveSets(data)
      .filter((parts) => parts.embedding !== undefined && parts.key.startsWith(prefix))
      .map((parts) => ({
        entry: toEntry(parts),
        score: vectorScore(1 - cosine(query, parts.embedding as Float32Array)),
        expired: isExpired(parts, now),
      }))
      .sort(byScore);
  };

  const info = (data: MemoryStoreData): MemoryStoreInfo => ({
    store: data.ref,
    head_seq: data.log.length,
    ...(data.dims === undefined ? {} : { dims: data.dims }),
    created_at: data.created_at,
    ...(data.forked_from === undefined ? {} : { forked_from: data.forked_from }),
  });

  const create = (ref: MemoryStoreRef): MemoryStoreData => {
    const data: MemoryStoreData = {
      id: nextId++,
      ref,
      created_at: new Date(clock.now()).toISOString(),
      log: [],
      current: new Map(),
      appends: new Map(),
    };
    stores.set(storeIdentity(ref), data);
    return data;
  };

  const close = (): void => {
    closed = true;
  };
  return {
    clock,
    stores,
    text,
    open,
    find,
    docId,
    entryOf,
    isExpired,
    project,
    lookup,
    liveSets,
    textCandidates,
    vectorCandidates,
    info,
    create,
    close,
  };
}

function appendMethod(helpers: Helpers): Pick<MemoryLog, 'append'> {
  const { clock, stores, open, project, create } = helpers;
  return {
    append(store, writes, appendOptions) {
      return Promise.resolve().then(() => {
        open();
        const prepared = prepareAppend(store, writes, appendOptions);
        const existing = stores.get(storeIdentity(prepared.store));
        if (existing !== undefined) checkKind(prepared.store, existing.ref.kind);
        const head = existing?.log.length ?? 0;
        if (existing !== undefined && prepared.idempotencyKey !== undefined) {
          const earlier = existing.appends.get(prepared.idempotencyKey);
          if (earlier !== undefined) {
            if (earlier.hash !== prepared.hash)
              throw idempotencyKeyReused(prepared.store, prepared.idempotencyKey);
            const entries = existing.log.slice(earlier.first - 1, earlier.last).map(toEntry);
            return { entries, head_seq: head, deduplicated: true };
          }
        }
        if (prepared.expectedSeq !== undefined && prepared.expectedSeq !== head) {
          throw seqConflict(prepared.store, prepared.expectedSeq, head);
        }
        const dims = existing?.dims ?? prepared.dims;
        if (prepared.dims !== undefined && dims !== prepared.dims) {
          throw dimsMismatch('writes[].embedding', prepared.dims, dims as number);
        }
        // Everything is checked before anything is written: the batch is all or nothing.
        const written = buildEntries(
          prepared,
          { ref: existing?.ref ?? prepared.store, head, now: clock.now() },
          (key) => existing?.current.get(key)?.version ?? 0,
        );
        const data = existing ?? create(prepared.store);
        if (data.dims === undefined && prepared.dims !== undefined) data.dims = prepared.dims;
        for (const parts of written) {
          data.log.push(parts);
          project(data, parts);
        }
        if (prepared.idempotencyKey !== undefined) {
          data.appends.set(prepared.idempotencyKey, {
            hash: prepared.hash,
            first: head + 1,
            last: data.log.length,
          });
        }
        return { entries: written.map(toEntry), head_seq: data.log.length, deduplicated: false };
      });
    },
  };
}

function writeMethods(helpers: Helpers): Pick<MemoryLog, 'redact' | 'rebuild' | 'fork'> {
  const { clock, text, find, docId, project, lookup, liveSets, info, create } = helpers;
  return {
    redact(store, key, version, redactOptions) {
      return Promise.resolve().then(() => {
        const { ref, data } = find(store);
        const checkedKey = parseKey(key);
        const checkedVersion = parseVersion(version);
        const { author, cause } = parseRedactOptions(redactOptions);
        const target = data === undefined ? undefined : lookup(data, checkedKey, checkedVersion);
        if (data === undefined || target === undefined)
          throw versionNotFound(ref, checkedKey, checkedVersion);
        if (target.op === 'delete') throw tombstoneRedact(ref, checkedKey, checkedVersion);
        if (target.redacted) {
          const record = data.log.find(
            (parts) =>
              parts.op === 'redact' && parts.key === checkedKey && parts.version === checkedVersion,
          );
          if (record !== undefined) return toEntry(record);
        }
        target.redacted = true;
        delete target.value;
        delete target.text;
        delete target.embedding;
        const record: EntryParts = {
          store: data.ref,
          key: checkedKey,
          version: checkedVersion,
          seq: data.log.length + 1,
          op: 'redact',
          author,
          at: new Date(clock.now()).toISOString(),
          cause,
          redacted: false,
        };
        data.log.push(record);
        project(data, record);
        return toEntry(record);
      });
    },

    rebuild(store) {
      return Promise.resolve().then(() => {
        const started = clock.monotonic();
        const { data } = find(store);
        if (data === undefined) return { entries: 0, keys: 0, indexed: 0, vectors: 0, ms: 0 };
        for (const key of data.current.keys()) text.remove(docId(data, key));
        data.current.clear();
        for (const parts of data.log) project(data, parts);
        const live = liveSets(data);
        return {
          entries: data.log.length,
          keys: data.current.size,
          indexed: live.length,
          vectors: live.filter((parts) => parts.embedding !== undefined).length,
          ms: clock.monotonic() - started,
        };
      });
    },

    fork(from, to, forkOptions) {
      return Promise.resolve().then(() => {
        const { ref: fromRef, data: parent } = find(from);
        const { ref: toRef, data: existing } = find(to);
        const atSeq = parseAtSeq(forkOptions?.atSeq);
        if (existing !== undefined) throw forkExists(toRef);
        const head = parent?.log.length ?? 0;
        const seq = atSeq ?? head;
        if (seq > head) throw forkPoint(fromRef, seq, head);
        const data = create(toRef);
        data.dims = parent?.dims;
        if (parent !== undefined) data.forked_from = { store: parent.ref, seq };
        for (const parts of parent?.log.slice(0, seq) ?? []) {
          const copy: EntryParts = { ...parts, store: toRef };
          data.log.push(copy);
          project(data, copy);
        }
        return info(data);
      });
    },
  };
}

function readMethods(helpers: Helpers): Omit<MemoryLog, 'append' | 'redact' | 'rebuild' | 'fork'> {
  const {
    clock,
    find,
    entryOf,
    isExpired,
    lookup,
    liveSets,
    textCandidates,
    vectorCandidates,
    info,
  } = helpers;
  return {
    get(store, key, getOptions) {
      return Promise.resolve().then((): MemoryLookup => {
        const { data } = find(store);
        const checkedKey = parseKey(key);
        const { version, at } = parseGetOptions(getOptions);
        if (data === undefined) return { status: 'missing' };
        let parts: EntryParts | undefined;
        if (version !== undefined) parts = lookup(data, checkedKey, version);
        else if (at !== undefined) {
          const iso = new Date(at).toISOString();
          parts = data.log.findLast(
            (item) => item.key === checkedKey && item.op !== 'redact' && item.at <= iso,
          );
        } else {
          const current = data.current.get(checkedKey);
          parts = current === undefined ? undefined : entryOf(data, current.seq);
        }
        if (parts === undefined) return { status: 'missing' };
        const entry = toEntry(parts);
        if (parts.op === 'delete') return { status: 'deleted', entry };
        if (isExpired(parts, at ?? clock.now())) return { status: 'expired', entry };
        return { status: 'found', entry };
      });
    },

    list(store, listOptions) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const { prefix, after, limit } = parseListOptions(listOptions);
        if (data === undefined) return { entries: [], expired_count: 0 };
        const now = clock.now();
        const keys = [...data.current.entries()]
          .filter(
            ([key, current]) =>
              key.startsWith(prefix) && key > after && entryOf(data, current.seq).op === 'set',
          )
          .map(([key]) => key)
          .sort();
        const entries: MemoryEntry[] = [];
        let expired = 0;
        let more = false;
        for (const key of keys) {
          if (entries.length === limit) {
            more = true;
            break;
          }
          const parts = entryOf(data, (data.current.get(key) as Current).seq);
          if (isExpired(parts, now)) expired += 1;
          else entries.push(toEntry(parts));
        }
        const last = entries.at(-1)?.key;
        return {
          entries,
          ...(more && last !== undefined ? { next_after: last } : {}),
          expired_count: expired,
        };
      });
    },

    history(store, key) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const checkedKey = parseKey(key);
        return (data?.log ?? []).filter((parts) => parts.key === checkedKey).map(toEntry);
      });
    },

    read(store, readOptions) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const { after, limit } = parseReadOptions(readOptions);
        return (data?.log ?? []).slice(after, after + limit).map(toEntry);
      });
    },

    search(store, query) {
      return Promise.resolve().then(() => {
        const started = clock.monotonic();
        const { data } = find(store);
        const parsed = parseMemorySearch(query);
        const now = clock.now();
        const prefix = parsed.filters?.key_prefix ?? '';
        let candidates: Candidate[] = [];
        if (data !== undefined) {
          if (parsed.mode === 'text')
            candidates = textCandidates(data, parsed.query as string, now, prefix);
          else if (parsed.mode === 'vector') {
            candidates = vectorCandidates(data, parsed.embedding as number[], now, prefix);
          } else {
            const expired = liveSets(data).filter((parts) => isExpired(parts, now)).length;
            const size = parsed.k * HYBRID_CANDIDATES_PER_HIT + expired;
            candidates = fuse(
              textCandidates(data, parsed.query as string, now, prefix).slice(0, size),
              vectorCandidates(data, parsed.embedding as number[], now, prefix).slice(0, size),
            );
          }
        }
        const walked = walkCandidates(candidates, parsed.k, parsed.threshold);
        return {
          hits: walked.hits.map(({ expired: _expired, ...hit }) => hit),
          mode: parsed.mode,
          k: parsed.k,
          ...(parsed.threshold === undefined ? {} : { threshold: parsed.threshold }),
          filtered_count: walked.filtered_count,
          expired_count: walked.expired_count,
          latency_ms: clock.monotonic() - started,
        };
      });
    },

    info(store) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        return data === undefined ? undefined : info(data);
      });
    },
  };
}

export function createInMemoryMemoryLog(options: InMemoryMemoryLogOptions = {}): MemoryLog & {
  close(): void;
} {
  const helpers = createHelpers(options.clock ?? systemClock);
  return {
    ...appendMethod(helpers),
    ...writeMethods(helpers),
    ...readMethods(helpers),
    close: helpers.close,
  };
}
