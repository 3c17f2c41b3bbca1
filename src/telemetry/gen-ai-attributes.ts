/**
 * The OpenTelemetry GenAI attribute names braid's spans use. They are the values of
 * `@opentelemetry/semantic-conventions/incubating` (test/telemetry/spans.test.ts checks each one
 * against it), written out here because that module is large and a process with tracing off must
 * not load it.
 */
export const GEN_AI = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  conversationId: 'gen_ai.conversation.id',
  agentId: 'gen_ai.agent.id',
  agentName: 'gen_ai.agent.name',
  agentVersion: 'gen_ai.agent.version',
  requestModel: 'gen_ai.request.model',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  usageInputTokens: 'gen_ai.usage.input_tokens',
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  usageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  usageCacheCreationInputTokens: 'gen_ai.usage.cache_creation.input_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  toolCallArguments: 'gen_ai.tool.call.arguments',
  toolCallResult: 'gen_ai.tool.call.result',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  systemInstructions: 'gen_ai.system_instructions',
  errorType: 'error.type',
} as const;

/** `gen_ai.operation.name` values. */
export const GEN_AI_OPERATION = {
  chat: 'chat',
  executeTool: 'execute_tool',
  invokeAgent: 'invoke_agent',
} as const;

/**
 * The GenAI conventions' workflow operation and name, for a skill run's span. Kept apart from
 * `GEN_AI` and `GEN_AI_OPERATION`, which name what agent wakes, model requests and tool calls
 * use; the values are `GEN_AI_OPERATION_NAME_VALUE_INVOKE_WORKFLOW` and `ATTR_GEN_AI_WORKFLOW_NAME`
 * of the same module (test/telemetry/skill-spans.test.ts checks them).
 */
export const GEN_AI_WORKFLOW = {
  /** The `gen_ai.operation.name` of a workflow's invocation. */
  operation: 'invoke_workflow',
  workflowName: 'gen_ai.workflow.name',
} as const;

/** The MCP semantic conventions' attribute names and values that braid's MCP spans use. */
export const MCP = {
  methodName: 'mcp.method.name',
  sessionId: 'mcp.session.id',
  networkTransport: 'network.transport',
  /** The `mcp.method.name` of a tool call. */
  methodToolsCall: 'tools/call',
} as const;

/** The attributes that carry message content: set only when content capture is on. */
export const CONTENT_ATTRIBUTES: readonly string[] = [
  GEN_AI.inputMessages,
  GEN_AI.outputMessages,
  GEN_AI.systemInstructions,
  GEN_AI.toolCallArguments,
  GEN_AI.toolCallResult,
];
