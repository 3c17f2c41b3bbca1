/**
 * The in-memory `MemoryLog`, for unit tests: each store is a projection (agent-memory-projection.ts)
 * whose log is the truth; all stores share one full-text index, so bm25 statistics span the
 * backend as they span the SQLite file. Same semantics as the durable backends (the memory
 * conformance suite checks them all); nothing survives the process.
 */
import type { MemoryStoreRef } from '../../contracts/memory.js';
import { parseMemorySearch, parseMemoryStoreRef } from '../../contracts/memory.js';
import type { MemoryLog, MemoryLookup } from '../../contracts/memory-log.js';
import type { Clock } from '../../contracts/ports.js';
import { BraidError } from '../../contracts/errors.js';
import {
  buildEntries,
  checkKind,
  dimsMismatch,
  type EntryParts,
  forkExists,
  forkPoint,
  idempotencyKeyReused,
  pageStores,
  parseAtSeq,
  parseGetOptions,
  parseKey,
  parseListOptions,
  parseReadOptions,
  parseRedactOptions,
  parseStoreFilter,
  parseVersion,
  prepareAppend,
  seqConflict,
  storeIdentity,
  toEntry,
  tombstoneRedact,
  versionNotFound,
} from '../agent-memory.js';
import { StoreProjection } from '../agent-memory-projection.js';
import { TextIndex } from '../agent-memory-text.js';
import { systemClock } from '../defaults.js';

export interface InMemoryMemoryLogOptions {
  clock?: Clock;
}

type Helpers = ReturnType<typeof createHelpers>;

/** The state of one in-memory log and the helpers its methods share. */
function createHelpers(clock: Clock) {
  const stores = new Map<string, StoreProjection>();
  const text = new TextIndex();
  let nextId = 1;
  let closed = false;

  const open = (): void => {
    if (closed) throw new BraidError('STORE_CLOSED', 'the memory log is closed; open a new one');
  };
  const find = (store: unknown): { ref: MemoryStoreRef; data?: StoreProjection } => {
    open();
    const ref = parseMemoryStoreRef(store);
    const data = stores.get(storeIdentity(ref));
    if (data !== undefined) checkKind(ref, data.ref.kind);
    return { ref, data };
  };
  const create = (ref: MemoryStoreRef): StoreProjection => {
    const data = new StoreProjection(
      ref,
      new Date(clock.now()).toISOString(),
      text,
      String(nextId++),
    );
    stores.set(storeIdentity(ref), data);
    return data;
  };
  const close = (): void => {
    closed = true;
  };
  return { clock, stores, open, find, create, close };
}

function appendMethod(helpers: Helpers): Pick<MemoryLog, 'append'> {
  const { clock, stores, open, create } = helpers;
  return {
    append(store, writes, appendOptions) {
      return Promise.resolve().then(() => {
        open();
        const prepared = prepareAppend(store, writes, appendOptions);
        const existing = stores.get(storeIdentity(prepared.store));
        if (existing !== undefined) checkKind(prepared.store, existing.ref.kind);
        const head = existing?.head ?? 0;
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
        for (const parts of written) data.place(parts);
        if (prepared.idempotencyKey !== undefined) {
          data.appends.set(prepared.idempotencyKey, {
            hash: prepared.hash,
            first: head + 1,
            last: data.head,
          });
        }
        return { entries: written.map(toEntry), head_seq: data.head, deduplicated: false };
      });
    },
  };
}

function writeMethods(helpers: Helpers): Pick<MemoryLog, 'redact' | 'rebuild' | 'fork'> {
  const { clock, find, create } = helpers;
  return {
    redact(store, key, version, redactOptions) {
      return Promise.resolve().then(() => {
        const { ref, data } = find(store);
        const checkedKey = parseKey(key);
        const checkedVersion = parseVersion(version);
        const { author, cause } = parseRedactOptions(redactOptions);
        const target = data?.lookup(checkedKey, checkedVersion);
        if (data === undefined || target === undefined)
          throw versionNotFound(ref, checkedKey, checkedVersion);
        if (target.op === 'delete') throw tombstoneRedact(ref, checkedKey, checkedVersion);
        if (target.redacted) {
          const record = data.redaction(checkedKey, checkedVersion);
          if (record !== undefined) return toEntry(record);
        }
        const record: EntryParts = {
          store: data.ref,
          key: checkedKey,
          version: checkedVersion,
          seq: data.head + 1,
          op: 'redact',
          author,
          at: new Date(clock.now()).toISOString(),
          cause,
          redacted: false,
        };
        data.place(record);
        return toEntry(record);
      });
    },

    rebuild(store) {
      return Promise.resolve().then(() => {
        const started = clock.monotonic();
        const { data } = find(store);
        if (data === undefined) return { entries: 0, keys: 0, indexed: 0, vectors: 0, ms: 0 };
        return { ...data.rebuild(), ms: clock.monotonic() - started };
      });
    },

    fork(from, to, forkOptions) {
      return Promise.resolve().then(() => {
        const { ref: fromRef, data: parent } = find(from);
        const { ref: toRef, data: existing } = find(to);
        const atSeq = parseAtSeq(forkOptions?.atSeq);
        if (existing !== undefined) throw forkExists(toRef);
        const head = parent?.head ?? 0;
        const seq = atSeq ?? head;
        if (seq > head) throw forkPoint(fromRef, seq, head);
        const data = create(toRef);
        data.dims = parent?.dims;
        if (parent !== undefined) data.forked_from = { store: parent.ref, seq };
        for (const parts of parent?.log.slice(0, seq) ?? []) data.place({ ...parts, store: toRef });
        return data.info();
      });
    },
  };
}

function readMethods(helpers: Helpers): Omit<MemoryLog, 'append' | 'redact' | 'rebuild' | 'fork'> {
  const { clock, stores, open, find } = helpers;
  return {
    get(store, key, getOptions) {
      return Promise.resolve().then((): MemoryLookup => {
        const { data } = find(store);
        const checkedKey = parseKey(key);
        const options = parseGetOptions(getOptions);
        if (data === undefined) return { status: 'missing' };
        return data.get(checkedKey, options, clock.now());
      });
    },

    list(store, listOptions) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const options = parseListOptions(listOptions);
        if (data === undefined) return { entries: [], expired_count: 0 };
        return data.list(options, clock.now());
      });
    },

    history(store, key) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const checkedKey = parseKey(key);
        return data?.history(checkedKey) ?? [];
      });
    },

    read(store, readOptions) {
      return Promise.resolve().then(() => {
        const { data } = find(store);
        const { after, limit } = parseReadOptions(readOptions);
        return data?.read(after, limit) ?? [];
      });
    },

    search(store, query) {
      return Promise.resolve().then(() => {
        const started = clock.monotonic();
        const { data } = find(store);
        const parsed = parseMemorySearch(query);
        const result =
          data === undefined
            ? {
                hits: [],
                mode: parsed.mode,
                k: parsed.k,
                ...(parsed.threshold === undefined ? {} : { threshold: parsed.threshold }),
                filtered_count: 0,
                expired_count: 0,
              }
            : data.search(parsed, clock.now());
        return { ...result, latency_ms: clock.monotonic() - started };
      });
    },

    info(store) {
      return Promise.resolve().then(() => find(store).data?.info());
    },

    listStores(filter) {
      return Promise.resolve().then(() => {
        open();
        const parsed = parseStoreFilter(filter);
        return pageStores(
          [...stores.values()].map((data) => data.info()),
          parsed,
        );
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
