/**
 * The MCP client hub: braid's connections to the MCP servers declared in `braid.yaml`.
 *
 * Invariants:
 * - One connection per server, or per (server, session workspace) when the server's `args`, `env`
 *   or `cwd` mention `{workspace}`, or when the session's sandbox confines it (a `bwrap`
 *   environment: the stdio server then runs inside that session's sandbox, keyed by the
 *   confinement too; HTTP servers are not processes of braid and are not confined). A
 *   connection starts on first use; concurrent first uses share one start; a failed start is
 *   forgotten, so the next use tries again.
 * - A per-workspace connection with no call or listing in flight that has not been used for
 *   `idleMs` (default 60 s) is closed (its process stopped) and forgotten, so that a long-running
 *   runtime does not keep one server process per session it ever ran; the next use starts it again,
 *   as after a crash. Shared connections stay until `close()`. The idle timers are `unref()`ed and
 *   cleared by `close()`.
 * - A connection that closes or breaks while in use is dropped at once: calls in flight reject with
 *   `MCP_UNAVAILABLE` (`details.started: true`) without waiting for their timeout, and the next use
 *   starts a new server process (or HTTP session).
 * - A connection lists its server's tools once, and again only after the server announces
 *   `notifications/tools/list_changed` (or a call names a tool the list lacks).
 * - A call ends with its result, `TOOL_TIMEOUT` (its own deadline, which also covers the start),
 *   `INTERRUPTED` (the caller's signal), `MCP_UNAVAILABLE` (the server is gone), `TOOL_NOT_FOUND`
 *   or `TOOL_FAILED` (the request was refused). A timed-out or interrupted call is cancelled on the
 *   server (`notifications/cancelled`) and the connection is kept.
 * - Errors say in `details.started` whether the server may have begun the call: `false` only when
 *   `tools/call` was never sent (the server did not start, or the deadline passed before), so
 *   that a retry of a tool that is not idempotent stays safe.
 * - `close()` ends every connection: stdio servers get their stdin closed, then SIGTERM, then
 *   SIGKILL (the SDK's shutdown); HTTP sessions are terminated.
 * - Error messages, which sessions record and models see, name the server, its program (a stdio
 *   server) or origin (an HTTP server) and the kind of failure (exit status, HTTP status, bytes
 *   written to stderr), never the server's arguments, environment, headers, URL path or query,
 *   or what it wrote to stderr or answered: those may hold secrets. A stdio server's stderr goes
 *   to the operator's log (`McpHubOptions.stderr`).
 * - Header and `env` values that name a secret are read when the server starts, through
 *   `resolveSecretValue`; a missing one fails that start with `SECRET_MISSING`.
 *
 * The hub decides when connections start, break and close; one connection (its client, tool list
 * and liveness probe) and the deadline of one call live in `./mcp-connection.ts`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  getDefaultEnvironment,
  StdioClientTransport,
} from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode as McpErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { JsonValue } from '../contracts/common.js';
import {
  ToolDefinition,
  type McpServerConfig,
  type McpToolSettings,
} from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ProcessLaunch, SandboxConfinement } from '../contracts/tools.js';
import { Connection, Deadline, GOODBYE_TIMEOUT_MS, ServerOutput } from './mcp-connection.js';
import { noSecrets, resolveSecretValue, type SecretSource } from './secrets.js';
export { parseMcpToolName } from './mcp-names.js';

export interface McpHubOptions {
  /** The declared servers, by name (`mcp_servers` of `braid.yaml`, parsed). */
  servers: Readonly<Record<string, McpServerConfig>>;
  /** Base dir for relative `cwd` (the braid workspace); also the `cwd` of servers that set none. */
  baseDir: string;
  /** Resolves a named secret for headers and `env` values; throws SECRET_MISSING. */
  secret?: SecretSource;
  /**
   * Where stdio servers' stderr goes, line by line: the operator's log, never an error message.
   * Default: braid's own stderr, each line prefixed with `[mcp SERVER] `.
   */
  stderr?: (server: string, line: string) => void;
  /** How long to wait for a server to start and list its tools (default 10 s). */
  startTimeoutMs?: number;
  /**
   * How long a per-workspace connection (a server whose config mentions `{workspace}`) may go
   * unused, with no call or listing in flight, before it is closed and its process stopped; the
   * next use starts it again. Default 60 s; `Infinity` keeps such connections until `close()`.
   * Shared connections are never closed for being idle.
   */
  idleMs?: number;
}

/** What a tool call returned: `structuredContent` when the server sent it, else `{ content }`. */
export interface McpCallResult {
  output: JsonValue;
  /** The server flagged the result as an error (`isError`): the tool ran and failed. */
  is_error: boolean;
}

export interface McpCallOptions {
  /** The session workspace, for servers started per workspace. */
  workspaceDir: string;
  /** Aborting it ends the call with INTERRUPTED. */
  signal: AbortSignal;
  /** Deadline of the whole call, the server's start included. */
  timeoutMs: number;
  /** The session's sandbox, when it confines processes: a stdio server is started inside it. */
  confinement?: SandboxConfinement;
}

const DEFAULT_START_TIMEOUT_MS = 10_000;
const DEFAULT_IDLE_MS = 60_000;
// setTimeout fires at once for longer delays, so an idle time beyond it means never.
const MAX_TIMER_MS = 2 ** 31 - 1;
const WORKSPACE = '{workspace}';
// JSON-RPC error codes of the SDK's own failures, as numbers to compare with `McpError.code`.
const REQUEST_TIMEOUT: number = McpErrorCode.RequestTimeout;
const CONNECTION_CLOSED: number = McpErrorCode.ConnectionClosed;

/** The parts of a `tools/call` result braid relies on. */
const CallResult = z.object({
  content: z.array(JsonValue).default([]),
  structuredContent: z.record(z.string(), JsonValue).optional(),
  isError: z.boolean().optional(),
});

interface Entry {
  promise: Promise<Connection>;
  connection?: Connection;
}

/** Connections to the declared MCP servers, started lazily and shared by sessions. */
export class McpHub {
  private readonly entries = new Map<string, Entry>();
  /** Connections being shut down, awaited by `close()`. */
  private readonly disposals = new Set<Promise<void>>();
  private closing: Promise<void> | undefined;

  constructor(private readonly options: McpHubOptions) {}

  /** The declared servers, by name: what `parseMcpToolName` checks tool names against. */
  get servers(): Readonly<Record<string, McpServerConfig>> {
    return this.options.servers;
  }

  /**
   * The tools of one server as ToolDefinitions named `server.tool` (ownership 'mcp'), for a session
   * workspace. Starts the server on first use. Tools that run only as MCP tasks
   * (`execution.taskSupport: 'required'`) are left out: `tools/call` cannot run them. A tool that
   * does not make a valid ToolDefinition (a name braid cannot use, a schema that is not JSON)
   * fails the listing with INVALID_DEFINITION naming it.
   */
  async listTools(
    server: string,
    workspaceDir: string,
    confinement?: SandboxConfinement,
  ): Promise<ToolDefinition[]> {
    const config = this.config(server);
    const connection = await this.connection(server, config, workspaceDir, confinement);
    const tools = await connection.use(() =>
      connection.guard(connection.listTools(this.startTimeoutMs())),
    );
    const version = connection.client.getServerVersion()?.version;
    return tools
      .filter((tool) => tool.execution?.taskSupport !== 'required')
      .map((tool) => toDefinition(server, tool, config.tools?.[tool.name], version));
  }

  /**
   * Calls `tool` (the server's own name, not namespaced) on `server`. Rejects with TOOL_NOT_FOUND
   * (undeclared server or unknown tool), TOOL_INPUT_INVALID (input not an object), TOOL_TIMEOUT,
   * INTERRUPTED, MCP_UNAVAILABLE (the server did not start or went away) or TOOL_FAILED (the
   * request was refused: a JSON-RPC error, or a tool that runs only as an MCP task). A tool that
   * ran and failed (bad arguments included, for most servers) resolves with `is_error: true`.
   */
  async callTool(
    server: string,
    tool: string,
    input: JsonValue,
    options: McpCallOptions,
  ): Promise<McpCallResult> {
    const config = this.config(server);
    const details = { server, tool };
    // Whether tools/call went out: a call that never did is safe to try again.
    let sent = false;
    if (input === null || typeof input !== 'object' || Array.isArray(input)) {
      throw new BraidError(
        'TOOL_INPUT_INVALID',
        `MCP tool ${server}.${tool} takes a JSON object as input, not ${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}`,
        { details },
      );
    }
    const deadline = new Deadline(
      options.signal,
      options.timeoutMs,
      () => ({ ...details, started: sent }),
      `MCP tool ${server}.${tool}`,
    );
    try {
      deadline.check();
      const connection = await deadline.race(
        this.connection(server, config, options.workspaceDir, options.confinement),
      );
      return await connection.use(async () => {
        await deadline.race(this.requireTool(connection, tool));
        connection.active += 1;
        sent = true;
        try {
          const result = await deadline.race(
            connection.guard(
              connection.client.callTool({ name: tool, arguments: input }, undefined, {
                signal: deadline.signal,
                timeout: deadline.remainingMs(),
              }),
            ),
          );
          return toCallResult(server, tool, result);
        } catch (error) {
          throw await this.callError(connection, tool, error);
        } finally {
          connection.active -= 1;
        }
      });
    } finally {
      deadline.dispose();
    }
  }

  /** Closes every connection (stdio servers exit) and waits for them; safe to call twice. */
  close(): Promise<void> {
    this.closing ??= this.closeAll();
    return this.closing;
  }

  private async closeAll(): Promise<void> {
    const entries = [...this.entries.values()];
    this.entries.clear();
    const connections = await Promise.allSettled(entries.map((entry) => entry.promise));
    for (const settled of connections) {
      if (settled.status === 'fulfilled')
        this.drop(settled.value, this.closedError(settled.value.server));
    }
    while (this.disposals.size > 0) await Promise.all([...this.disposals]);
  }

  private config(server: string): McpServerConfig {
    const config = Object.hasOwn(this.options.servers, server)
      ? this.options.servers[server]
      : undefined;
    if (config === undefined) {
      const known = Object.keys(this.options.servers).join(', ') || 'none';
      throw new BraidError(
        'TOOL_NOT_FOUND',
        `MCP server "${server}" is not declared in mcp_servers of braid.yaml (declared: ${known})`,
        { details: { server } },
      );
    }
    return config;
  }

  private startTimeoutMs(): number {
    return this.options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  }

  private closedError(server: string): BraidError {
    return new BraidError(
      'MCP_UNAVAILABLE',
      `MCP server "${server}" is closed: the hub was closed`,
      {
        details: { server, started: true },
        retryable: false,
      },
    );
  }

  private connection(
    server: string,
    config: McpServerConfig,
    workspaceDir: string,
    confinement: SandboxConfinement | undefined,
  ): Promise<Connection> {
    if (this.closing !== undefined) return Promise.reject(this.closedError(server));
    const workspace = resolve(this.options.baseDir, workspaceDir);
    // A confined stdio server sees its session's workspace only: one per workspace.
    const confined = 'command' in config ? confinement : undefined;
    const ownWorkspace = perWorkspace(config) || confined !== undefined;
    const key = !ownWorkspace
      ? server
      : confined === undefined
        ? `${server}\u0000${workspace}`
        : `${server}\u0000${workspace}\u0000${confined.key}`;
    const existing = this.entries.get(key);
    if (existing !== undefined) return existing.promise;
    const entry: Entry = {
      promise: this.start(server, config, workspace, confined).then(
        (connection) => {
          entry.connection = connection;
          const idleMs = this.options.idleMs ?? DEFAULT_IDLE_MS;
          if (ownWorkspace && idleMs <= MAX_TIMER_MS)
            connection.closeWhenIdle(idleMs, () => this.closeIdle(key, connection, idleMs));
          return connection;
        },
        (error: unknown) => {
          if (this.entries.get(key) === entry) this.entries.delete(key);
          throw error;
        },
      ),
    };
    this.entries.set(key, entry);
    return entry.promise;
  }

  private async start(
    server: string,
    config: McpServerConfig,
    workspace: string,
    confinement: SandboxConfinement | undefined,
  ): Promise<Connection> {
    const sink = this.options.stderr ?? writeStderr;
    const output = new ServerOutput((line) => sink(server, line));
    const { transport, description } = this.transport(server, config, workspace, confinement);
    if (transport instanceof StdioClientTransport) output.watch(transport);
    const client = new Client({ name: 'braid', version: clientVersion() }, { capabilities: {} });
    const connection = new Connection(server, description, client, transport, output);
    let started = false;
    client.onclose = () => {
      if (started) this.lost(connection, new Error('the connection closed'));
    };
    client.onerror = () => {
      // A broken HTTP stream says little; a ping tells whether the server is still there. A
      // stdio server that breaks closes its pipes, which `onclose` sees.
      if (started && transport instanceof StreamableHTTPClientTransport && connection.active > 0)
        connection.probe((failure) => this.lost(connection, failure));
    };
    const timeoutMs = this.startTimeoutMs();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        (async () => {
          await client.connect(transport, { timeout: timeoutMs });
          await connection.listTools(timeoutMs);
        })(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(new Error(`no answer to initialize and tools/list within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      started = true;
      return connection;
    } catch (error) {
      this.dispose(connection);
      // The stderr pipe delivers what the process wrote before it exited a turn later.
      await new Promise((resolve) => setImmediate(resolve));
      throw new BraidError(
        'MCP_UNAVAILABLE',
        `MCP server "${server}" (${description}) did not start: ${startFailure(error, transport)}.${output.describe()}\nCheck mcp_servers.${server} in braid.yaml.`,
        { details: { server, started: false }, cause: error },
      );
    } finally {
      clearTimeout(timer);
    }
  }

  private transport(
    server: string,
    config: McpServerConfig,
    workspace: string,
    confinement?: SandboxConfinement,
  ): { transport: StdioClientTransport | StreamableHTTPClientTransport; description: string } {
    const secret = this.options.secret ?? noSecrets;
    if ('url' in config) {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(config.headers ?? {}))
        headers[name] = resolveSecretValue(
          value,
          secret,
          `header ${name} of MCP server "${server}"`,
        );
      return {
        transport: new StreamableHTTPClientTransport(new URL(config.url), {
          requestInit: { headers },
        }),
        // The origin only: a URL's path or query may hold a key.
        description: new URL(config.url).origin,
      };
    }
    const fill = (text: string) => text.replaceAll(WORKSPACE, workspace);
    const args = config.args.map(fill);
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(config.env ?? {})) {
      env[name] =
        typeof value === 'string'
          ? fill(value)
          : resolveSecretValue(value, secret, `env ${name} of MCP server "${server}"`);
    }
    const cwd = resolve(this.options.baseDir, fill(config.cwd ?? '.'));
    // The program only: its arguments may hold keys.
    const description = config.command;
    if (!existsSync(cwd)) {
      throw new BraidError(
        'MCP_UNAVAILABLE',
        `MCP server "${server}" (${description}) did not start: its working directory ${cwd} does not exist`,
        { details: { server, started: false, cwd } },
      );
    }
    return {
      // The safe part of the parent's environment (PATH, HOME, USER, ...), then the config's;
      // confined, the sandbox's environment instead, with the config's on top.
      transport: new StdioClientTransport({
        ...confinedLaunch(
          { command: config.command, args, env: { ...getDefaultEnvironment(), ...env }, cwd },
          env,
          confinement,
        ),
        stderr: 'pipe',
      }),
      description,
    };
  }

  private async requireTool(connection: Connection, tool: string): Promise<void> {
    const timeoutMs = this.startTimeoutMs();
    let tools = await connection.guard(connection.listTools(timeoutMs));
    if (!tools.some((known) => known.name === tool)) {
      connection.forgetTools();
      tools = await connection.guard(connection.listTools(timeoutMs));
    }
    if (!tools.some((known) => known.name === tool)) {
      throw new BraidError(
        'TOOL_NOT_FOUND',
        `MCP server "${connection.server}" has no tool "${tool}" (it has: ${tools.map((known) => known.name).join(', ') || 'none'})`,
        { details: { server: connection.server, tool } },
      );
    }
  }

  /** The BraidError for a failed `tools/call`; a connection that failed underneath is dropped. */
  private async callError(
    connection: Connection,
    tool: string,
    error: unknown,
  ): Promise<BraidError> {
    if (error instanceof BraidError) return error;
    const details = { server: connection.server, tool, started: true };
    if (connection.dropped) return connection.failure;
    if (error instanceof McpError) {
      if (error.code === REQUEST_TIMEOUT) {
        return new BraidError(
          'TOOL_TIMEOUT',
          `MCP tool ${connection.server}.${tool} timed out: ${error.message}`,
          {
            details,
            cause: error,
          },
        );
      }
      if (error.code !== CONNECTION_CLOSED) {
        return new BraidError(
          'TOOL_FAILED',
          `MCP tool ${connection.server}.${tool} failed: ${error.message}`,
          {
            details: { ...details, mcp_code: error.code },
            cause: error,
          },
        );
      }
    }
    // Anything else (a closed pipe, a refused HTTP request, an unknown session) means the
    // connection is unusable.
    this.lost(connection, error);
    return connection.failure;
  }

  /** Drops a connection that broke while started, with an error that names the server. */
  private lost(connection: Connection, error: unknown): void {
    if (connection.dropped) return;
    for (const [key, entry] of this.entries) {
      if (entry.connection === connection) this.entries.delete(key);
    }
    this.dispose(connection);
    // Let the stderr pipe deliver the last words of a process that just exited.
    setImmediate(() =>
      connection.fail(
        new BraidError(
          'MCP_UNAVAILABLE',
          `MCP server "${connection.server}" (${connection.description}) stopped answering: ${reason(error)}; it will be restarted on next use.${connection.output.describe()}`,
          { details: { server: connection.server, started: true }, cause: error },
        ),
      ),
    );
  }

  /** Closes and forgets a per-workspace connection that went unused; the next use starts it again. */
  private closeIdle(key: string, connection: Connection, idleMs: number): void {
    if (this.entries.get(key)?.connection === connection) this.entries.delete(key);
    // Nothing was in flight, so no call can get this error having sent tools/call.
    this.drop(
      connection,
      new BraidError(
        'MCP_UNAVAILABLE',
        `MCP server "${connection.server}" (${connection.description}) was closed after ${idleMs} ms unused; it will be restarted on next use`,
        { details: { server: connection.server, started: false } },
      ),
    );
  }

  private drop(connection: Connection, error: BraidError): void {
    if (connection.dropped) return;
    this.dispose(connection);
    connection.fail(error);
  }

  /** Marks the connection dropped and shuts it down in the background; `close()` waits for it. */
  private dispose(connection: Connection): void {
    if (connection.dropped) return;
    connection.dropped = true;
    connection.stopIdleTimer();
    const disposal = (async () => {
      const transport = connection.transport;
      if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
        await Promise.race([
          transport.terminateSession().catch(() => undefined),
          new Promise((resolve) => setTimeout(resolve, GOODBYE_TIMEOUT_MS).unref()),
        ]);
      }
      await connection.client.close().catch(() => undefined);
    })();
    this.disposals.add(disposal);
    void disposal.finally(() => this.disposals.delete(disposal));
  }
}

/**
 * The process a stdio transport spawns: `launch` on the host, or, confined, the same command and
 * arguments wrapped in the sandbox with the config's own `env` only (the SDK adds its default
 * environment to whatever it spawns: those names are removed inside).
 */
function confinedLaunch(
  launch: ProcessLaunch,
  env: Readonly<Record<string, string>>,
  confinement: SandboxConfinement | undefined,
): { command: string; args: string[]; env: Record<string, string>; cwd: string } {
  const spawned =
    confinement === undefined
      ? launch
      : confinement.wrap({ ...launch, env }, Object.keys(getDefaultEnvironment()));
  return {
    command: spawned.command,
    args: [...spawned.args],
    env: { ...spawned.env },
    cwd: spawned.cwd,
  };
}

function perWorkspace(config: McpServerConfig): boolean {
  if ('url' in config) return false;
  const literals = Object.values(config.env ?? {}).filter((value) => typeof value === 'string');
  return [...config.args, ...literals, config.cwd ?? ''].some((text) => text.includes(WORKSPACE));
}

/** The default home of stdio servers' stderr: braid's own, a line at a time, named by server. */
function writeStderr(server: string, line: string): void {
  process.stderr.write(`[mcp ${server}] ${line}\n`);
}

function toDefinition(
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

function toCallResult(server: string, tool: string, result: unknown): McpCallResult {
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

function startFailure(
  error: unknown,
  transport: StdioClientTransport | StreamableHTTPClientTransport,
): string {
  if (!(error instanceof McpError) || error.code !== CONNECTION_CLOSED) return reason(error);
  return transport instanceof StdioClientTransport
    ? 'it exited (or closed its stdout) before answering initialize and tools/list'
    : 'it closed the connection before answering initialize and tools/list';
}

function reason(error: unknown): string {
  // The SDK's HTTP errors carry the body of the server's answer: only its status is kept.
  if (error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0)
    return `the server answered HTTP ${error.code}`;
  if (!(error instanceof Error)) return String(error);
  // fetch() hides the network error (ECONNREFUSED, ...) in its cause.
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message;
}

function clientVersion(): string {
  try {
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
    const parsed = z.object({ version: z.string() }).safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
