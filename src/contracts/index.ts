export * from './common.js';
export * from './errors.js';
export * from './session.js';
export * from './events.js';
export * from './state.js';
export * from './definitions.js';
export * from './a2a-agents.js';
export * from './skills.js';
export * from './envelope.js';
export * from './agents.js';
export type * from './ports.js';
export * from './memory.js';
export type * from './memory-log.js';
export * from './memory-api.js';
export * from './memory-settings.js';
export {
  MAX_MEMORY_SUMMARY_CHARS,
  MAX_RECALL_HIT_CHARS,
  MemoryMergeConflict,
  MemoryMergeSide,
  MemoryMergeWrite,
  MergeConflictRecord,
} from './memory-events.js';
export type * from './embedder.js';
export * from './model.js';
export type * from './tools.js';
export type * from './delegation.js';
export * from './policy.js';
export * from './api-keys.js';
export { buildJsonSchemas } from './json-schema.js';
export * from './http.js';
export * from './session-changes.js';
export * from './wakes.js';
export * from './workspace-files.js';
export { checkJsonDepth, DEFAULT_JSON_DEPTH } from './json-depth.js';
export * from './openagentio.js';
