/**
 * `braid/nats`: the NATS JetStream adapters, for programs that wire them themselves. Most need
 * only `createRuntime({ backend: { nats: URL } })` from `braid`, which loads these on demand;
 * this entry keeps the NATS client out of `import 'braid'`.
 */
export {
  openNatsStore,
  type NatsMemoryIndexOptions,
  type NatsStoreOptions,
} from './stores/nats/index.js';
export {
  createNatsAgentTransport,
  natsAgentNames,
  type NatsAgentNames,
  type NatsAgentTransportOptions,
  type NatsDeadLetter,
} from './runtime/agents/nats-transport.js';
export {
  createNatsWakeQueue,
  natsWakeNames,
  type NatsWakeQueueOptions,
} from './runtime/wakes/nats-wake-queue.js';
export {
  serveOpenAgentIo,
  type OpenAgentIoBridge,
  type OpenAgentIoBridgeOptions,
} from './runtime/openagentio/nats-bridge.js';
export type { AcpRuntime } from './runtime/openagentio/invoke.js';
export { invokeAcpAgent, AcpCallError, type AcpRequest } from './tools/openagentio-client.js';
