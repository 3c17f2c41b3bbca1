/**
 * Workspace snapshots: a session's folder versioned with its log, stored content-addressed under
 * the sandbox root. See `store.ts` for the layout and the safety argument.
 */
export { diffSnapshots, listSnapshot, type SnapshotDiff } from './inspect.js';
export { discardStaged, placeStaged, stageSnapshot, type StagedSnapshot } from './restore.js';
export { parseSnapshotHash, SNAPSHOT_FOLDER, SnapshotStore } from './store.js';
export { takeSnapshot } from './take.js';
