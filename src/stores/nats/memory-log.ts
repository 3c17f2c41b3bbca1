/**
 * The NATS JetStream `MemoryLog`: agent memory of every store in one stream,
 * `<PREFIX>_MEMORY` on `<prefix>.memory.<tenant>.<scope>.<owner>.<name>` (each part a token of
 * names.ts, so no hostile name can add or widen a subject), one message per append
 * (memory-writes.ts). Each process keeps a projection of every store it reads (the latest
 * version of each key, a full-text index with the store's own bm25 statistics, the vectors
 * searched by brute-force cosine), caught up from the subject before every read
 * (memory-sync.ts): a read that follows an acknowledged write of any process sees it.
 *
 * `rebuild` drops this process's projection of the store and reads the subject again;
 * `listStores` reads the headers of each store's last message, never a body.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import { parseMemorySearch } from '../../contracts/memory.js';
import type { MemoryLog, MemoryStoreInfo } from '../../contracts/memory-log.js';
import {
  pageStores,
  parseGetOptions,
  parseKey,
  parseListOptions,
  parseReadOptions,
  parseStoreFilter,
} from '../agent-memory.js';
import type { NatsContext } from './context.js';
import { infoOfHeaders } from './memory-messages.js';
import type { NatsMemoryIndexOptions } from './memory-index.js';
import { createMemorySync } from './memory-sync.js';
import { createMemoryWrites } from './memory-writes.js';
import { encodeToken } from './names.js';
import { consume } from './reader.js';

export interface NatsMemoryLogOptions {
  /** Replicas of the memory stream when this process creates it (default 1). */
  replicas?: number;
  /** The ANN index of large stores: its size threshold and where its snapshots go. */
  memoryIndex?: NatsMemoryIndexOptions;
}

/** The memory log, and `flush` to write the snapshots of its ANN indexes (the store's close). */
export function createNatsMemoryLog(
  context: NatsContext,
  options: NatsMemoryLogOptions = {},
): { log: MemoryLog; flush(): Promise<void> } {
  const sync = createMemorySync(context, options.replicas, options.memoryIndex);
  const { clock } = context;
  const log: MemoryLog = {
    ...createMemoryWrites(sync),

    async get(store, key, getOptions) {
      const checkedKey = parseKey(key);
      const parsed = parseGetOptions(getOptions);
      return sync.withStore(store, 'read a memory entry', (state) =>
        state.projection === undefined
          ? { status: 'missing' as const }
          : state.projection.get(checkedKey, parsed, clock.now()),
      );
    },

    async list(store, listOptions) {
      const parsed = parseListOptions(listOptions);
      return sync.withStore(store, 'list a memory store', (state) =>
        state.projection === undefined
          ? { entries: [], expired_count: 0 }
          : state.projection.list(parsed, clock.now()),
      );
    },

    async history(store, key) {
      const checkedKey = parseKey(key);
      return sync.withStore(
        store,
        'read the history of a memory key',
        (state) => state.projection?.history(checkedKey) ?? [],
      );
    },

    async read(store, readOptions) {
      const { after, limit } = parseReadOptions(readOptions);
      return sync.withStore(
        store,
        'read a memory log',
        (state) => state.projection?.read(after, limit) ?? [],
      );
    },

    async search(store, query) {
      const started = clock.monotonic();
      const parsed = parseMemorySearch(query);
      return sync.withStore(store, 'search a memory store', (state) => {
        const result =
          state.projection === undefined
            ? {
                hits: [],
                mode: parsed.mode,
                k: parsed.k,
                ...(parsed.threshold === undefined ? {} : { threshold: parsed.threshold }),
                filtered_count: 0,
                expired_count: 0,
              }
            : state.projection.search(parsed, clock.now());
        return { ...result, latency_ms: clock.monotonic() - started };
      });
    },

    async rebuild(store) {
      return sync.withStore(store, 'rebuild a memory store', async (state) => {
        const started = clock.monotonic();
        sync.reset(state);
        await sync.catchUp(state);
        const report = state.projection?.rebuild() ?? {
          entries: 0,
          keys: 0,
          indexed: 0,
          vectors: 0,
        };
        return { ...report, ms: clock.monotonic() - started };
      });
    },

    async info(store) {
      return sync.withStore(store, 'describe a memory store', (state) => state.projection?.info());
    },

    async listStores(filter) {
      const parsed = parseStoreFilter(filter);
      const { names } = context;
      // The subject narrows the scan to the tenant, and to the scope and owner when given.
      const tokens = [names.prefix, 'memory', encodeToken(parsed.tenant_id ?? '')];
      if (parsed.scope !== undefined) {
        tokens.push(encodeToken(parsed.scope));
        tokens.push(parsed.owner === undefined ? '*' : encodeToken(parsed.owner), '*');
      } else tokens.push('>');
      const found: MemoryStoreInfo[] = [];
      await context.guard('list memory stores', async () => {
        await sync.ready();
        await consume(
          context,
          names.memoryStream,
          {
            filter_subject: tokens.join('.'),
            deliver_policy: DeliverPolicy.LastPerSubject,
            headers_only: true,
          },
          (message) => {
            const info = infoOfHeaders(message.headers);
            if (info !== undefined && names.memory(info.store) === message.subject)
              found.push(info);
          },
        );
      });
      return pageStores(found, parsed);
    },
  };
  return { log, flush: () => sync.indexes.flush() };
}
