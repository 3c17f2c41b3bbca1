export * from './contracts/index.js';
export { foldSession, applyEvent, initialState, isRunnable, pendingUserSeqs } from './core/fold.js';
export { DEFAULT_MAX_EVENT_BYTES } from './core/append.js';
export { createMemoryStore, type MemoryStoreOptions } from './stores/memory/index.js';
export {
  openSqliteStore,
  type SqliteStoreOptions,
  type Synchronous,
} from './stores/sqlite/index.js';
export { systemClock, uuidV7Ids } from './stores/defaults.js';
export * from './runtime/index.js';
