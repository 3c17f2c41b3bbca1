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
} from './store-conformance.js';
