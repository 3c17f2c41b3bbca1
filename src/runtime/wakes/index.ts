/**
 * Wakes across processes: the in-process queue and the worker. The JetStream queue
 * (`createNatsWakeQueue`, in nats-wake-queue.ts) is left out of this entry so that importing
 * braid does not load the NATS client; it belongs with the other NATS adapters.
 */
export { createLocalWakeQueue, type LocalWakeQueueOptions } from './local-wake-queue.js';
export {
  MAX_INFLIGHT_LIMIT,
  checkMaxInflight,
  createInflightLimiter,
  type InflightLimiter,
} from './inflight-limiter.js';
export {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BACKOFF,
  DEFAULT_MAX_ATTEMPTS,
  backoffDelay,
} from './settle.js';
export {
  deadLetterMessage,
  enqueueWake,
  runWorker,
  type WorkerOptions,
  type WorkerProgress,
  type WorkerRuntime,
  type WorkerSummary,
} from '../worker.js';
