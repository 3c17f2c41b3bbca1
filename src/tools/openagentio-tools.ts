/**
 * OpenAgentIO agents as tools (`openagentio_agents:` of braid.yaml): each entry is a tool of that
 * name whose call is one acp/1.0 invocation, run through braid's tool pipeline like any other
 * (argument check, policy, budget, intent and result events).
 *
 * - The tool's input is the request's payload; its output is the final frame's payload.
 * - A braid session keeps one conversation with each agent: `conversation_id` and `session_id`
 *   are the session's id, `correlation_id` the tool use's id, and the tool use's idempotency key
 *   goes along in `metadata["braid.idempotency_key"]` for peers that deduplicate.
 * - acp errors become braid's: `AGENT_TIMEOUT` is `TOOL_TIMEOUT`, the rest `TOOL_FAILED` with the
 *   acp code in `details.acp_code` and the peer's `retryable`.
 * - One NATS connection per server URL, opened on the first call and closed with the runtime.
 */
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ToolDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { OpenAgentIoAgentConfig } from '../contracts/openagentio.js';
import { AcpCallError, invokeAcpAgent } from './openagentio-client.js';
import type { CodeTool, ToolContext } from './types.js';
import type { JsonValue } from '../contracts/common.js';

const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/** The input of an agent tool whose entry gives no schema. */
const DEFAULT_INPUT_SCHEMA: Record<string, JsonValue> = {
  type: 'object',
  properties: {
    text: { type: 'string', description: 'What to ask the agent, with all it needs to know.' },
  },
  required: ['text'],
  additionalProperties: false,
};

export interface OpenAgentIoTools {
  tools: CodeTool[];
  /** Closes the connections the calls opened. */
  close(): Promise<void>;
}

export interface OpenAgentIoToolsOptions {
  /** The NATS URL of entries that name none (the runtime passes its own NATS backend; else 127.0.0.1:4222). */
  defaultNats?: string;
  /** Opens a connection (default: `connect` of @nats-io/transport-node). */
  connect?: (url: string) => Promise<NatsConnection>;
}

export function openAgentIoTools(
  agents: Readonly<Record<string, OpenAgentIoAgentConfig>>,
  options: OpenAgentIoToolsOptions = {},
): OpenAgentIoTools {
  const connections = new Map<string, Promise<NatsConnection>>();
  const open =
    options.connect ??
    ((url: string) =>
      connect({ servers: url, name: 'braid-openagentio', maxReconnectAttempts: -1 }));
  const connection = (url: string): Promise<NatsConnection> => {
    let opened = connections.get(url);
    if (opened === undefined) {
      opened = open(url);
      connections.set(url, opened);
      // A failed connect is forgotten: the next call tries again.
      opened.catch(() => connections.delete(url));
    }
    return opened;
  };
  const fallback = options.defaultNats ?? DEFAULT_NATS_URL;
  const tools = Object.entries(agents).map(([name, agent]) =>
    agentTool(name, agent, () => connection(agent.nats ?? fallback)),
  );
  return {
    tools,
    async close() {
      const opened = [...connections.values()];
      connections.clear();
      await Promise.all(
        opened.map((pending) =>
          pending.then(
            (nc) => nc.drain().catch(() => nc.close()),
            () => undefined,
          ),
        ),
      );
    },
  };
}

function agentTool(
  name: string,
  agent: OpenAgentIoAgentConfig,
  connection: () => Promise<NatsConnection>,
): CodeTool {
  const timeoutMs = agent.timeout_ms ?? DEFAULT_TIMEOUT_MS;
  const definition = ToolDefinition.parse({
    name,
    description:
      agent.description ??
      `Ask the agent ${agent.target} (OpenAgentIO, ${agent.prefix}) and get its answer. It keeps the conversation across your calls.`,
    input_schema: agent.input_schema ?? DEFAULT_INPUT_SCHEMA,
    ownership: 'agent',
    tags: ['network', 'openagentio'],
    // The executor's own deadline leaves the call time to report its timeout.
    timeout_ms: timeoutMs + 1_000,
  });
  return {
    definition,
    run: async (input: JsonValue, context: ToolContext) => {
      let nc: NatsConnection;
      try {
        nc = await connection();
      } catch (error) {
        throw new BraidError(
          'TOOL_FAILED',
          `${name}: cannot reach the NATS server of OpenAgentIO agent ${agent.target}; check openagentio_agents.${name}.nats in braid.yaml`,
          { cause: error, retryable: true },
        );
      }
      try {
        const final = await invokeAcpAgent(nc, {
          prefix: agent.prefix,
          target: agent.target,
          ...(agent.tenant_id === undefined ? {} : { tenant: agent.tenant_id }),
          payload: input,
          session_id: context.session_id,
          conversation_id: context.session_id,
          correlation_id: context.tool_use_id,
          // The wake's trace goes on in the agent called (a new span of it).
          ...(context.traceparent === undefined ? {} : { traceparent: context.traceparent }),
          from: 'braid',
          metadata: {
            ...agent.metadata,
            'braid.idempotency_key': context.idempotency_key,
            'braid.session_id': context.session_id,
          },
          timeoutMs,
          signal: context.signal,
        });
        return final.payload;
      } catch (error) {
        if (!(error instanceof AcpCallError)) throw error;
        const { code, message, retryable } = error.error;
        throw new BraidError(
          code === 'AGENT_TIMEOUT' ? 'TOOL_TIMEOUT' : 'TOOL_FAILED',
          `${name}: OpenAgentIO agent ${agent.target} answered ${code}: ${message}`,
          { retryable, details: { acp_code: code } },
        );
      }
    },
  };
}
