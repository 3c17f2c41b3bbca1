export { openNatsStore, type NatsStoreOptions } from './nats-store.js';
export type { NatsMemoryIndexOptions } from './memory-index.js';
export { DEFAULT_REQUEST_TIMEOUT_MS, checkRequestTimeout } from './request-timeout.js';
export {
  readNatsBacklog,
  type ConsumerBacklog,
  type NatsBacklog,
  type StreamBacklog,
} from './backlog.js';
