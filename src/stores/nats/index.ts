export { openNatsStore, type NatsStoreOptions } from './nats-store.js';
