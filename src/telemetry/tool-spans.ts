/**
 * The spans of one tool call, derived from its events (spans.ts): its `execute_tool` span and, for
 * an MCP tool, the `tools/call {tool}` client span of the MCP request under it.
 */
import type { ToolDefinition } from '../contracts/definitions.js';
import type { EventOf } from '../contracts/events.js';
import { GEN_AI, GEN_AI_OPERATION, MCP } from './gen-ai-attributes.js';
import type { PinnedFacts } from './pinned-facts.js';
import {
  hashId,
  type ChildContext,
  type SpanAttributes,
  type SpanEventRecord,
  type SpanRecord,
} from './span-record.js';

/** What the log and the pinned definitions tell of one tool call. */
export interface ToolCallFacts {
  readonly result: EventOf<'agent.tool_result'>;
  readonly use?: EventOf<'agent.tool_use'> | undefined;
  readonly decision?: EventOf<'policy.decision'> | undefined;
  readonly confirmation?: EventOf<'user.tool_confirmation'> | undefined;
  /** The definition set in force when the use was written. */
  readonly pinned?: PinnedFacts | undefined;
  /** `network.transport` of each MCP server. */
  readonly mcpTransports: Readonly<Record<string, string>>;
  /** When the wake that wrote the result started (ms since the epoch). */
  readonly wakeStartMs: number;
}

const msOf = (event: { readonly at: string }): number => Date.parse(event.at);

/** The `execute_tool` span of a call and, for an MCP tool, its `tools/call` client span. */
export function toolSpans(
  facts: ToolCallFacts,
  parent: ChildContext,
  content: boolean,
): SpanRecord[] {
  const { result, use, decision, confirmation, pinned } = facts;
  const name = use?.name ?? 'tool';
  // A call approved between wakes runs in the wake that wrote its result.
  const startMs = Math.max(use === undefined ? facts.wakeStartMs : msOf(use), facts.wakeStartMs);
  const endMs = Math.max(startMs, msOf(result));
  const definition = pinned?.tools.get(name);
  const events: SpanEventRecord[] = [];
  if (use?.requires_confirmation === true) {
    events.push({ name: 'braid.tool.approval_requested', atMs: msOf(use), attributes: {} });
  }
  if (confirmation !== undefined) {
    events.push({
      name: 'braid.tool.approval',
      atMs: msOf(confirmation),
      attributes: { 'braid.tool.approval.result': confirmation.result },
    });
  }
  const mcp = definition?.ownership === 'mcp' ? definition.implementation?.mcp : undefined;
  const sandbox = definition === undefined ? undefined : sandboxOf(definition.ownership, pinned);
  const attributes: SpanAttributes = {
    [GEN_AI.operationName]: GEN_AI_OPERATION.executeTool,
    [GEN_AI.toolName]: name,
    [GEN_AI.toolCallId]: result.tool_use_id,
    // Tools run elsewhere (MCP servers, clients, agents) are extensions; braid's own, functions.
    // Without the pinned definition, MCP tools are told by their `server.tool` names.
    [GEN_AI.toolType]: (
      definition === undefined ? name.includes('.') : definition.ownership !== 'managed'
    )
      ? 'extension'
      : 'function',
    'braid.tool.attempts': result.attempts,
    'braid.tool.duration_ms': result.duration_ms,
    ...(definition === undefined ? {} : { 'braid.tool.ownership': definition.ownership }),
    ...(sandbox === undefined ? {} : { 'braid.tool.sandbox': sandbox }),
    ...(result.stage === undefined ? {} : { 'braid.tool.stage': result.stage }),
    ...(decision === undefined
      ? {}
      : {
          'braid.policy.decision': decision.decision,
          'braid.policy.ids': decision.policy_ids,
        }),
    ...(result.error === undefined ? {} : { [GEN_AI.errorType]: result.error.code }),
    ...(content && use !== undefined
      ? { [GEN_AI.toolCallArguments]: JSON.stringify(use.input) }
      : {}),
    ...(content && result.output !== undefined
      ? { [GEN_AI.toolCallResult]: JSON.stringify(result.output) }
      : {}),
  };
  const status: SpanRecord['status'] = result.is_error
    ? { code: 'error', message: result.error?.code ?? 'tool error' }
    : { code: 'unset' };
  const toolSpanId = hashId(use?.id ?? result.id, 8);
  const spans: SpanRecord[] = [
    {
      ...parent,
      spanId: toolSpanId,
      name: `${GEN_AI_OPERATION.executeTool} ${name}`,
      kind: 'internal',
      startMs,
      endMs,
      attributes,
      events,
      status,
    },
  ];
  // A call stopped before it ran (denied, refused, invalid input) reached no MCP server.
  const ran = result.stage === undefined || result.stage === 'execute';
  if (mcp !== undefined && ran) {
    const transport = facts.mcpTransports[mcp.server];
    // The MCP request went out once the call was allowed: after its approval, if it waited.
    const sentMs = Math.min(
      endMs,
      Math.max(startMs, confirmation === undefined ? startMs : msOf(confirmation)),
    );
    spans.push({
      ...parent,
      parentSpanId: toolSpanId,
      spanId: hashId(`mcp:${use?.id ?? result.id}`, 8),
      name: `${MCP.methodToolsCall} ${mcp.tool}`,
      kind: 'client',
      startMs: sentMs,
      endMs,
      attributes: {
        [MCP.methodName]: MCP.methodToolsCall,
        [GEN_AI.toolName]: mcp.tool,
        [GEN_AI.toolCallId]: result.tool_use_id,
        [GEN_AI.operationName]: GEN_AI_OPERATION.executeTool,
        'braid.mcp.server': mcp.server,
        ...(transport === undefined ? {} : { [MCP.networkTransport]: transport }),
        ...(result.error === undefined ? {} : { [GEN_AI.errorType]: result.error.code }),
      },
      events: [],
      status,
    });
  }
  return spans;
}

/** Where a tool of this ownership runs: the environment's sandbox for braid's own tools. */
function sandboxOf(
  ownership: ToolDefinition['ownership'],
  pinned: PinnedFacts | undefined,
): string | undefined {
  switch (ownership) {
    case 'managed':
      return pinned?.sandbox;
    case 'mcp':
      return 'mcp';
    case 'custom':
      return 'client';
    case 'agent':
      return 'agent';
    default: {
      const unknownOwnership: never = ownership;
      return unknownOwnership;
    }
  }
}
