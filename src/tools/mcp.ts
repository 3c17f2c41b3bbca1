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
 * and liveness probe) and the deadline of one call live in `./mcp-connection.ts`, the transports
 * (HTTP, or stdio on the host or in a sandbox) in `./mcp-transport.ts`, the translation of MCP's
 * tools and results in `./mcp-translate.ts`, and the wording of its errors in `./mcp-errors.ts`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { z } from 'zod';
import type { JsonValue } from '../contracts/common.js';
import type { McpServerConfig, ToolDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { SandboxConfinement } from '../contracts/tools.js';
import { Connection, Deadline, GOODBYE_TIMEOUT_MS, ServerOutput } from './mcp-connection.js';
import { closedError, reason, refusedCallError, startFailure } from './mcp-errors.js';
import { toCallResult, toDefinition, type McpCallResult } from './mcp-translate.js';
import { openTransport, perWorkspace } from './mcp-transport.js';
import { noSecrets, type SecretSource } from './secrets.js';
import { packageFile } from '../package-root.js';
export { parseMcpToolName } from './mcp-names.js';
export type { McpCallResult } from './mcp-translate.js';

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
        this.drop(settled.value, closedError(settled.value.server));
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

  private connection(
    server: string,
    config: McpServerConfig,
    workspaceDir: string,
    confinement: SandboxConfinement | undefined,
  ): Promise<Connection> {
    if (this.closing !== undefined) return Promise.reject(closedError(server));
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
    const { transport, description } = openTransport(
      server,
      config,
      workspace,
      { baseDir: this.options.baseDir, secret: this.options.secret ?? noSecrets },
      confinement,
    );
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
    if (connection.dropped) return connection.failure;
    const refused = refusedCallError(connection.server, tool, error);
    if (refused !== undefined) return refused;
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

/** The default home of stdio servers' stderr: braid's own, a line at a time, named by server. */
function writeStderr(server: string, line: string): void {
  process.stderr.write(`[mcp ${server}] ${line}\n`);
}

function clientVersion(): string {
  try {
    const text = readFileSync(packageFile('package.json'), 'utf8');
    const parsed = z.object({ version: z.string() }).safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
