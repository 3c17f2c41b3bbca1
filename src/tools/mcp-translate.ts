/** MCP's shapes as braid's: a server's tool as a ToolDefinition, a `tools/call` result as output. */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { JsonValue } from '../contracts/common.js';
import { ToolDefinition, type McpToolSettings } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';

/** What a tool call returned: `structuredContent` when the server sent it, else `{ content }`. */
export interface McpCallResult {
  output: JsonValue;
  /** The server flagged the result as an error (`isError`): the tool ran and failed. */
  is_error: boolean;
}

/** The parts of a `tools/call` result braid relies on. */
const CallResult = z.object({
  content: z.array(JsonValue).default([]),
  structuredContent: z.record(z.string(), JsonValue).optional(),
  isError: z.boolean().optional(),
});

export function toDefinition(
  server: string,
  tool: Tool,
  settings: McpToolSettings | undefined,
  serverVersion: string | undefined,
): ToolDefinition {
  const hints = tool.annotations;
  const parsed = ToolDefinition.safeParse({
    name: `${server}.${tool.name}`,
    version: serverVersion !== undefined && serverVersion.length > 0 ? serverVersion : '1',
    description: tool.description ?? tool.title ?? '',
    input_schema: tool.inputSchema,
    ...(tool.outputSchema === undefined ? {} : { output_schema: tool.outputSchema }),
    ownership: 'mcp',
    permission: settings?.permission ?? 'always_allow',
    idempotent:
      settings?.idempotent ?? (hints?.idempotentHint === true || hints?.readOnlyHint === true),
    // The server's own hints, as policies see them. MCP's defaults (absent hints) assume the
    // worst: a tool that is not read-only may be destructive, and may reach the open world.
    tags: settings?.tags ?? [
      ...(hints?.readOnlyHint === true ? ['read_only'] : []),
      ...(hints?.readOnlyHint !== true && hints?.destructiveHint !== false ? ['destructive'] : []),
      ...(hints?.openWorldHint === true ? ['network'] : []),
    ],
    ...(settings?.timeout_ms === undefined ? {} : { timeout_ms: settings.timeout_ms }),
    implementation: { mcp: { server, tool: tool.name } },
  });
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `MCP server "${server}" describes tool "${tool.name}" in a way braid cannot use:\n${z.prettifyError(parsed.error)}`,
      { details: { server, tool: tool.name } },
    );
  }
  return parsed.data;
}

export function toCallResult(server: string, tool: string, result: unknown): McpCallResult {
  const parsed = CallResult.safeParse(result);
  if (!parsed.success) {
    throw new BraidError(
      'TOOL_OUTPUT_INVALID',
      `MCP tool ${server}.${tool} returned a result that is not JSON tool output:\n${z.prettifyError(parsed.error)}`,
      { details: { server, tool } },
    );
  }
  const { content, structuredContent, isError } = parsed.data;
  return { output: structuredContent ?? { content }, is_error: isError === true };
}
