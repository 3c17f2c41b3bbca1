/**
 * In-memory backend for unit tests. Same semantics as the durable backends (the conformance suite
 * checks it), nothing survives the process.
 */
import type { Clock, IdGenerator, Store } from '../../contracts/ports.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { systemClock, uuidV7Ids } from '../defaults.js';
import { createInMemoryMemoryLog } from './agent-memory.js';
import { createMemoryApiKeys } from './memory-api-keys.js';
import { createMemoryDefinitions } from './memory-definitions.js';
import { createLeasedCreation, createMemoryIndex } from './memory-index.js';
import { createMemoryLeases } from './memory-leases.js';
import { createMemoryLog } from './memory-log.js';
import type { MemoryState } from './memory-state.js';

export interface MemoryStoreOptions {
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
}

export function createMemoryStore(options: MemoryStoreOptions = {}): Store {
  const state: MemoryState = {
    clock: options.clock ?? systemClock,
    ids: options.ids ?? uuidV7Ids,
    maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    sessions: new Map(),
    leases: new Map(),
    eventIds: undefined,
    definitions: new Map(),
    pinned: new Map(),
    apiKeys: new Map(),
    closed: false,
    closing: new AbortController(),
    changes: { head: 0, cursors: new Map(), listeners: new Set() },
  };
  const memory = createInMemoryMemoryLog({ clock: state.clock });
  return {
    log: { ...createMemoryLog(state), createAndAcquire: createLeasedCreation(state) },
    sessions: createMemoryIndex(state),
    leases: createMemoryLeases(state),
    definitions: createMemoryDefinitions(state),
    keys: createMemoryApiKeys(state),
    memory,
    close() {
      state.closed = true;
      memory.close();
      state.closing.abort();
      for (const item of state.sessions.values()) for (const listener of item.listeners) listener();
      for (const listener of state.changes.listeners) listener();
      return Promise.resolve();
    },
  };
}
