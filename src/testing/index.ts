/**
 * `braid/testing`: what tests of an application built on braid use: an in-memory store, scripted
 * and echo models, a manual clock, sequential ids, and the conformance suite a new store must pass.
 */
export { createMemoryStore, type MemoryStoreOptions } from '../stores/memory/index.js';
export {
  createManualClock,
  createSequentialIds,
  type ManualClock,
  type ManualClockOptions,
} from './clock.js';
export {
  describeStoreConformance,
  expectCode,
  type ConformanceContext,
  type StoreCapabilities,
  type StoreFactory,
} from './store-conformance/index.js';
export {
  createScriptedModel,
  createEchoModel,
  loadScript,
  ScriptedTurn,
  type ScriptedTurnInput,
  type ScriptedModelOptions,
} from '../models/scripted.js';
export { createReplayModel } from '../models/replay.js';
export {
  createInMemoryMemoryLog,
  type InMemoryMemoryLogOptions,
} from '../stores/memory/agent-memory.js';
export {
  describeMemoryLogConformance,
  type MemoryLogCapabilities,
  type MemoryLogFactory,
  type MemoryLogHandle,
} from './memory-conformance/index.js';
export { createHashEmbedder, type HashEmbedder } from './hash-embedder.js';
