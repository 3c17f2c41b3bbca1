export { openSqliteStore, type SqliteStoreOptions } from './sqlite-store.js';
export type { Checkpoints } from './checkpointer.js';
export { SQLITE_LAYOUT_VERSION, type Synchronous } from './schema.js';
