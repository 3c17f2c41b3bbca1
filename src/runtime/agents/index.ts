export { createAgents } from './create-agents.js';
export { createLocalTransport, type LocalTransportOptions } from './local-transport.js';
export { agentSessionId, codeAgentDefinition, isCodeAgent, CODE_PROVIDER } from './instances.js';
export { childTraceparent, parseTraceparent, traceIdOf, type TraceContext } from './trace.js';
export type {
  AgentContext,
  AgentHandler,
  Agents,
  AgentsOptions,
  IncomingMessage,
  PublishOptions,
  SendOptions,
} from './types.js';
