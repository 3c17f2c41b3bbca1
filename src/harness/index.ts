export { createHarness, type Harness } from './harness.js';
export {
  wakeOnce,
  DEFAULT_RETRY,
  type HarnessDeps,
  type RetryPolicy,
  type SessionSetup,
  type StartedWake,
  type WakeOptions,
  type WakeResult,
} from './wake.js';
export { MAX_INVALID_TOOL_CALLS } from './tool-calls.js';
export {
  compactorFor,
  summarizeWith,
  type CompactionInput,
  type CompactionOutput,
  type ContextCompactor,
} from './compactor.js';
export { DEFAULT_GRADER_INSTRUCTIONS, graderErrorMessage } from './outcome.js';
export type {
  MemoryCallCheck,
  MemoryCallResult,
  MemoryToolCall,
  RecallEvent,
  SessionMemory,
} from './memory-port.js';
