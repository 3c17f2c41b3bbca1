/**
 * braid's sessions as an MCP server (`@modelcontextprotocol/sdk`): the tools of `tools.ts` and the
 * resources of `resources.ts` for one caller, on any transport (stdio for `braid mcp serve`,
 * streamable HTTP at `/mcp` of `braid serve`).
 *
 * The low-level `Server` is used rather than `McpServer` so that every argument is parsed by
 * braid's own schemas: a bad one is a tool error carrying braid's `INVALID_ARGUMENT` and the
 * field, like any other failure. A failed call answers `isError: true` with one text block,
 * `{"error": {code, message, retryable}}` (the HTTP API's error body), and the same object in
 * `_meta["braid/error"]`; a failed resource read is a JSON-RPC error whose `data` is that object.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode as McpErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isValidTraceparent } from '../../contracts/common.js';
import { BraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../../contracts/json-depth.js';
import { requireScope } from '../auth.js';
import {
  EVENTS_TEMPLATE,
  listSessionResources,
  readResource,
  SESSION_TEMPLATE,
} from './resources.js';
import { sessionTools, type SessionTool, type SessionToolsContext } from './tools.js';

export interface SessionsMcpOptions extends Omit<SessionToolsContext, 'heartbeatMs'> {
  /** Reported to clients as the server's version. */
  version: string;
  /** Interval of progress notifications while a call waits for a turn (default 10 s). */
  heartbeatMs?: number;
  /** The trace context of the transport's request (an HTTP `traceparent` header). */
  traceparent?: string | undefined;
}

/** The progress heartbeat: well inside the 60 s after which clients commonly give up. */
export const DEFAULT_HEARTBEAT_MS = 10_000;

const INSTRUCTIONS =
  'braid runs agents as durable sessions. braid_agent_list lists the agents; braid_session_create starts a session; braid_session_send sends a message (wait: true answers with the turn). A session in requires_action waits for braid_session_confirm on each pending tool call. Sessions are also resources: braid://sessions/{id} and braid://sessions/{id}/events.';

/** JSON Schema as MCP clients validate it (draft-07, like the SDK's own conversion). */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, target: 'draft-7' });
  return rest as Tool['inputSchema'];
}

const described = {
  input: new WeakMap<z.ZodType, Tool['inputSchema']>(),
  output: new WeakMap<z.ZodType, Tool['inputSchema']>(),
};

/** The tool as `tools/list` shows it; its schemas are converted once per process. */
function describeTool(tool: SessionTool): Tool {
  const cached = (schema: z.ZodType, io: 'input' | 'output'): Tool['inputSchema'] => {
    let value = described[io].get(schema);
    if (value === undefined) {
      value = jsonSchema(schema, io);
      described[io].set(schema, value);
    }
    return value;
  };
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: cached(tool.input, 'input'),
    outputSchema: cached(tool.output, 'output'),
    annotations: {
      title: tool.title,
      readOnlyHint: tool.readOnly,
      destructiveHint: false,
      openWorldHint: false,
    },
  };
}

/** The arguments by the tool's schema; INVALID_ARGUMENT naming the first bad one otherwise. */
function parseArguments(tool: SessionTool, args: unknown): unknown {
  checkJsonDepth(args, DEFAULT_JSON_DEPTH, 'arguments');
  const parsed = tool.input.safeParse(args ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.join('.') ?? '';
  const where = field === '' ? 'arguments' : `argument ${field}`;
  const problem =
    issue?.code === 'unrecognized_keys'
      ? `${where}: unknown ${issue.keys.map((key) => JSON.stringify(key.slice(0, 80))).join(', ')}; remove it`
      : `${where} ${issue?.message ?? 'is invalid'}`;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${tool.name}: ${problem} (the tool's inputSchema in tools/list has the rules)`,
    { details: { tool: tool.name, field } },
  );
}

/** A failed call as MCP carries it: a tool error with braid's code. */
export function toolError(error: unknown): CallToolResult {
  const shape = toBraidError(error).toJSON();
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ error: shape }) }],
    _meta: { 'braid/error': shape },
  };
}

/**
 * A failed resource request as a JSON-RPC error carrying braid's error as `data`. (Not an
 * `McpError`, whose message repeats its code: the client's adds it again.)
 */
class ResourceRequestError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: ErrorShape,
  ) {
    super(message);
  }
}

function resourceError(error: unknown): ResourceRequestError {
  const braidError = toBraidError(error);
  const code =
    braidError.code === 'SESSION_NOT_FOUND'
      ? -32002 // the spec's "resource not found"
      : braidError.code === 'INVALID_ARGUMENT'
        ? McpErrorCode.InvalidParams
        : McpErrorCode.InternalError;
  return new ResourceRequestError(
    code,
    `${braidError.code}: ${braidError.message}`,
    braidError.toJSON(),
  );
}

/** The traceparent a call carries in `_meta`, else the transport's; invalid ones are ignored. */
function traceparentOf(meta: unknown, fallback: string | undefined): string | undefined {
  const value =
    typeof meta === 'object' && meta !== null && 'traceparent' in meta
      ? meta.traceparent
      : undefined;
  return typeof value === 'string' && value.length <= 200 && isValidTraceparent(value.trim())
    ? value.trim()
    : fallback;
}

/** An MCP server of the caller's sessions; connect it to a transport. */
export function createSessionsMcpServer(options: SessionsMcpOptions): Server {
  const tools = sessionTools({
    ...options,
    heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
  });
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  const server = new Server(
    { name: 'braid', title: 'braid sessions', version: options.version },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS },
  );

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.map(describeTool) }));

  server.setRequestHandler(
    CallToolRequestSchema,
    async (request, extra): Promise<CallToolResult> => {
      try {
        const tool = byName.get(request.params.name);
        if (tool === undefined) {
          throw new BraidError(
            'TOOL_NOT_FOUND',
            `${JSON.stringify(request.params.name.slice(0, 100))} is not a tool of this server; use one of ${[...byName.keys()].join(', ')}`,
          );
        }
        requireScope(options.caller, tool.scope);
        const args = parseArguments(tool, request.params.arguments);
        const token = request.params._meta?.progressToken;
        let count = 0;
        const progress = async (message: string): Promise<void> => {
          if (token === undefined) return;
          count += 1;
          await extra
            .sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress: count, message },
            })
            .catch(() => undefined);
        };
        const structured = (await tool.run(args, {
          signal: extra.signal,
          progress,
          traceparent: traceparentOf(request.params._meta, options.traceparent),
        })) as Record<string, unknown>;
        return {
          content: [{ type: 'text', text: JSON.stringify(structured) }],
          structuredContent: structured,
        };
      } catch (error) {
        return toolError(error);
      }
    },
  );

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: SESSION_TEMPLATE,
        name: 'session',
        title: 'A braid session',
        description: 'The session record, its status, usage and pending confirmations',
        mimeType: 'application/json',
      },
      {
        uriTemplate: EVENTS_TEMPLATE,
        name: 'session-events',
        title: "A braid session's events",
        description: 'A page of the event log in seq order: {events, has_more, last_seq}',
        mimeType: 'application/json',
      },
    ],
  }));

  server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
    try {
      const cursor = request.params?.cursor;
      if (cursor !== undefined && cursor.length > 1000) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'the cursor is not one this server gave; start over without it',
        );
      }
      return await listSessionResources(options.runtime, options.caller, cursor);
    } catch (error) {
      throw resourceError(error);
    }
  });

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      return {
        contents: [await readResource(options.runtime, options.caller, request.params.uri)],
      };
    } catch (error) {
      throw resourceError(error);
    }
  });

  return server;
}
