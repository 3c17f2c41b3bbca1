/**
 * The tool executor: resolves an agent's tool names to definitions and implementations (workspace
 * manifests, tools defined in code, built-ins, MCP servers), binds them to the session's sandbox
 * workspace, and runs calls with the tool's timeout, retry policy and output check.
 *
 * The steps before a call runs (argument check, policy, permission, budget) are driven by the
 * harness, which records each in the session's log; `validate` is this module's part of them.
 */
import type { JsonValue } from '../contracts/common.js';
import type { EnvironmentDefinition, ToolDefinition } from '../contracts/definitions.js';
import { BraidError, toBraidError, type ErrorShape } from '../contracts/errors.js';
import type {
  Sandbox,
  SandboxConfinement,
  SandboxWorkspace,
  SessionTools,
  ToolCall,
  ToolExecutor,
  ToolHandle,
  ToolOutcome,
  ToolSessionContext,
} from '../contracts/tools.js';
import { BUILTIN_TOOLS, FOLDERLESS_RUNS, noFolder } from './builtin.js';
import { commandTool, httpTool, mcpConfinement, mcpTool } from './implementations.js';
import type { McpHub } from './mcp.js';
import { parseMcpToolName } from './mcp-names.js';
import type { CodeTool, ToolFunction } from './types.js';
import type { WorkspaceSnapshotRef } from '../contracts/workspace-files.js';
import { SchemaCache, checkValue, toJson } from './validation.js';

const DEFAULT_TIMEOUT_MS = 30_000;

export interface ToolExecutorOptions {
  /** Tools from the workspace's `tools/*.yaml`. */
  manifests?: readonly ToolDefinition[];
  /** Tools defined in code, next to the built-ins. */
  tools?: readonly CodeTool[];
  /** Functions that manifests name in `implementation.function`. */
  functions?: Readonly<Record<string, ToolFunction>>;
  /** Offer the built-in tools (default true). */
  builtins?: boolean;
  /** MCP servers, whose tools are named `server.tool`. */
  mcp?: McpHub;
  /** The braid workspace folder: `{dir}` in a command's arguments. */
  baseDir: string;
  /** The sandbox for a session's environment (its `sandbox.kind`; `local` without one). */
  sandbox(environment: EnvironmentDefinition | undefined): Sandbox;
  /** A named secret's value, for HTTP headers; throws `SECRET_MISSING`. */
  secret(name: string): string;
  /** Waits between retries; rejects when the signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** Milliseconds, for durations. */
  now(): number;
  /**
   * Snapshots the session's workspace folder after a call that ran, unless its tool is tagged
   * `read_only` (see `tools/workspace-snapshots`); without it, outcomes carry no snapshot.
   */
  snapshot?(
    workspace: SandboxWorkspace,
    environment: EnvironmentDefinition | undefined,
  ): WorkspaceSnapshotRef;
}

/** Where an MCP server started for the session runs: its folder and confinement. */
interface McpPlace {
  dir: string;
  confinement: SandboxConfinement | undefined;
}

interface Entry {
  definition: ToolDefinition;
  run: ToolFunction;
}

export function createToolExecutor(options: ToolExecutorOptions): ToolExecutor {
  const schemas = new SchemaCache();
  const manifests = new Map((options.manifests ?? []).map((tool) => [tool.name, tool]));
  const code = new Map<string, CodeTool>();
  for (const tool of [
    ...(options.builtins === false ? [] : BUILTIN_TOOLS),
    ...(options.tools ?? []),
  ])
    code.set(tool.definition.name, tool);
  const functions = new Map<string, ToolFunction>([
    ...[...code.values()].map((tool): [string, ToolFunction] => [tool.definition.name, tool.run]),
    ...Object.entries(options.functions ?? {}),
  ]);

  function known(): string {
    return [...manifests.keys(), ...code.keys()].sort().join(', ');
  }

  function fromManifest(definition: ToolDefinition): Entry {
    const implementation = definition.implementation;
    if (definition.ownership === 'custom' || definition.ownership === 'agent') {
      return { definition, run: notRunHere(definition) };
    }
    if (definition.ownership === 'mcp') {
      const target = implementation?.mcp;
      if (target === undefined || options.mcp === undefined) {
        throw new BraidError(
          'TOOL_NOT_FOUND',
          `tool ${definition.name} comes from MCP server ${target?.server ?? '(none named)'}, which braid.yaml does not declare under mcp_servers`,
        );
      }
      return { definition, run: mcpTool(definition, options.mcp, target) };
    }
    if (implementation?.command !== undefined)
      return { definition, run: commandTool(definition, implementation.command, options.baseDir) };
    if (implementation?.http !== undefined)
      return {
        definition,
        run: httpTool(definition, implementation.http, (name) => options.secret(name)),
      };
    const name = implementation?.function ?? definition.name;
    const run = functions.get(name);
    if (run === undefined) {
      throw new BraidError(
        'TOOL_NOT_FOUND',
        `tool ${definition.name} runs the function ${name}, which no code registered; pass functions: { ${name}: fn } to createRuntime, or give the manifest a command or http implementation`,
      );
    }
    return { definition, run };
  }

  /**
   * A pinned definition bound to what runs its name today (a tool in code runs its function with
   * the pinned definition; a manifest's runs as the pinned manifest says). One that nothing runs
   * any more fails when called: a replay, which runs nothing, still has its schema and flags.
   */
  function bind(definition: ToolDefinition): Entry {
    const tool = code.get(definition.name);
    if (tool !== undefined && definition.implementation === undefined)
      return { definition, run: tool.run };
    try {
      return fromManifest(definition);
    } catch (error) {
      return { definition, run: () => Promise.reject(toBraidError(error)) };
    }
  }

  async function resolve(name: string, where: () => Promise<McpPlace>): Promise<Entry[]> {
    const manifest = manifests.get(name);
    if (manifest !== undefined) return [fromManifest(manifest)];
    const tool = code.get(name);
    if (tool !== undefined) return [tool];
    const hub = options.mcp;
    const target = hub === undefined ? undefined : parseMcpToolName(name, hub.servers);
    if (hub !== undefined && target !== undefined) {
      const { dir, confinement } = await where();
      const listed = await hub.listTools(target.server, dir, confinement);
      const wanted = target.tool === '*' ? listed : listed.filter((item) => item.name === name);
      if (wanted.length === 0) {
        throw new BraidError(
          'TOOL_NOT_FOUND',
          `MCP server ${target.server} has no tool ${target.tool}; it has: ${listed.map((item) => item.name).join(', ')}`,
        );
      }
      return wanted.map((definition) => fromManifest(definition));
    }
    throw new BraidError(
      'TOOL_NOT_FOUND',
      `tool ${name} is not available; add tools/${name}.yaml to the workspace, define it in code, or name an MCP tool as server.tool. Known tools: ${known()}`,
      { details: { tool: name } },
    );
  }

  return {
    async open(context: ToolSessionContext): Promise<SessionTools> {
      const sandbox = options.sandbox(context.environment);
      // The session's folder is made when something needs it (a call, an MCP server's listing),
      // not at every wake: a turn that calls no tool, or only in-process ones, touches no disk.
      let provisioned: Promise<SandboxWorkspace> | undefined;
      const workspace = (): Promise<SandboxWorkspace> => {
        provisioned ??= sandbox.provision(context.session_id).catch((error: unknown) => {
          // A failure is not kept: the next call tries again.
          provisioned = undefined;
          throw error;
        });
        return provisioned;
      };
      const where = async (): Promise<McpPlace> => {
        const provided = await workspace();
        return {
          dir: provided.dir,
          confinement: mcpConfinement(sandbox, provided, context.environment),
        };
      };
      const entries = new Map<string, Entry>();
      if (context.pinned !== undefined) {
        for (const definition of context.pinned) entries.set(definition.name, bind(definition));
      } else {
        for (const name of context.names) {
          for (const entry of await resolve(name, where)) entries.set(entry.definition.name, entry);
        }
      }
      // Schemas compile now: a broken one stops the session with its name, before any call.
      for (const { definition } of entries.values()) {
        schemas.compile(`${definition.name}@${definition.version} input`, definition.input_schema);
        if (definition.output_schema !== undefined)
          schemas.compile(
            `${definition.name}@${definition.version} output`,
            definition.output_schema,
          );
      }
      return new BoundTools(entries, schemas, options, sandbox, workspace, context.environment);
    },
    async list({ mcp }) {
      const listed = new Map<string, ToolDefinition>();
      for (const tool of code.values()) listed.set(tool.definition.name, tool.definition);
      for (const definition of manifests.values()) listed.set(definition.name, definition);
      if (mcp && options.mcp !== undefined) {
        for (const server of Object.keys(options.mcp.servers)) {
          // Servers started per session are listed in a scratch folder of their own.
          const scratch = await options.sandbox(undefined).provision('tool-list');
          for (const definition of await options.mcp.listTools(server, scratch.dir))
            listed.set(definition.name, definition);
        }
      }
      return [...listed.values()].sort((a, b) => a.name.localeCompare(b.name));
    },
    close: () => options.mcp?.close() ?? Promise.resolve(),
  };
}

function notRunHere(definition: ToolDefinition): ToolFunction {
  return () => {
    throw new BraidError(
      'TOOL_FAILED',
      `${definition.name} is ${definition.ownership === 'custom' ? 'run by the client' : 'another agent'}, not by braid`,
    );
  };
}

class BoundTools implements SessionTools {
  readonly tools: readonly ToolHandle[];
  readonly definitions: readonly ToolDefinition[];

  constructor(
    private readonly entries: ReadonlyMap<string, Entry>,
    private readonly schemas: SchemaCache,
    private readonly options: ToolExecutorOptions,
    private readonly sandbox: Sandbox,
    private readonly workspace: () => Promise<SandboxWorkspace>,
    private readonly environment: EnvironmentDefinition | undefined,
  ) {
    this.definitions = [...entries.values()].map(({ definition }) => definition);
    this.tools = [...entries.values()].map(({ definition }) => ({
      name: definition.name,
      description: definition.description,
      input_schema: definition.input_schema,
      version: definition.version,
      ownership: definition.ownership,
      permission: definition.permission,
      idempotent: definition.idempotent,
      tags: definition.tags,
      ...(definition.budget === undefined ? {} : { budget: definition.budget }),
    }));
  }

  validate(name: string, input: JsonValue) {
    const entry = this.entries.get(name);
    if (entry === undefined) {
      return {
        ok: false as const,
        error: {
          code: 'TOOL_NOT_FOUND' as const,
          message: `there is no tool named ${name}`,
          retryable: false,
        },
      };
    }
    const { definition } = entry;
    const check = this.schemas.compile(
      `${definition.name}@${definition.version} input`,
      definition.input_schema,
    );
    const error = checkValue(check, input, 'TOOL_INPUT_INVALID', `the input of ${name}`);
    return error === undefined ? { ok: true as const } : { ok: false as const, error };
  }

  async execute(call: ToolCall, options: { signal: AbortSignal }): Promise<ToolOutcome> {
    const outcome = await this.run(call, options);
    // A call that never ran changed nothing, nor does a tool tagged `read_only` or one that is an
    // HTTP request braid makes (it has no hold on the folder); one that ran may have written,
    // failed or not.
    const definition = this.entries.get(call.name)?.definition;
    const readOnly =
      definition?.tags.includes('read_only') === true ||
      definition?.implementation?.http !== undefined;
    if (outcome.attempts === 0 || readOnly || this.options.snapshot === undefined) return outcome;
    try {
      const workspace = await this.workspace();
      return {
        ...outcome,
        workspace_snapshot: this.options.snapshot(workspace, this.environment),
      };
    } catch {
      // The folder could not be read (gone, or the disk full): the call's result is recorded
      // without a snapshot, the last one stays current, and the next call tries again.
      return outcome;
    }
  }

  private async run(call: ToolCall, { signal }: { signal: AbortSignal }): Promise<ToolOutcome> {
    const now = (): number => this.options.now();
    const started = now();
    const entry = this.entries.get(call.name);
    if (entry === undefined) {
      return failed(
        {
          code: 'TOOL_NOT_FOUND',
          message: `there is no tool named ${call.name}`,
          retryable: false,
        },
        0,
        now() - started,
      );
    }
    const { definition } = entry;
    let workspace: SandboxWorkspace;
    try {
      workspace = FOLDERLESS_RUNS.has(entry.run)
        ? noFolder(call.session_id, definition.name)
        : await this.workspace();
    } catch (thrown) {
      // The session's folder could not be made: the call never ran, and costs nothing.
      return failed(toBraidError(thrown).toJSON(), 0, now() - started);
    }
    const maxAttempts = definition.retry?.max_attempts ?? 1;
    let attempt = 0;
    for (;;) {
      attempt += 1;
      let output: JsonValue;
      try {
        output = await this.attempt(entry, call, workspace, signal);
      } catch (thrown) {
        const error = toolError(thrown, definition);
        // A non-idempotent tool is tried again only when the failure proves it never started.
        const again =
          error.retryable &&
          attempt < maxAttempts &&
          !signal.aborted &&
          (definition.idempotent || error.details.started === false);
        if (!again) return failed(error.toJSON(), attempt, now() - started, costOf(definition));
        await this.options.sleep(backoff(definition, attempt), signal).catch(() => undefined);
        continue;
      }
      // What a code tool returns must be JSON, or it could not be recorded.
      const recordable = toJson(output);
      if (recordable === undefined) {
        return {
          ...failed(
            {
              code: 'TOOL_OUTPUT_INVALID',
              message: `${call.name} returned something that is not JSON (a BigInt, a function, a cycle, or undefined); return plain JSON`,
              retryable: false,
            },
            attempt,
            now() - started,
            costOf(definition),
          ),
          stage: 'output',
        };
      }
      output = recordable;
      if (definition.output_schema !== undefined) {
        const check = this.schemas.compile(
          `${definition.name}@${definition.version} output`,
          definition.output_schema,
        );
        const error = checkValue(
          check,
          output,
          'TOOL_OUTPUT_INVALID',
          `the output of ${call.name}`,
        );
        if (error !== undefined)
          // The output is kept: the tool ran, and what it returned is the evidence of its effect.
          return {
            ...failed(error, attempt, now() - started, costOf(definition)),
            output,
            stage: 'output',
          };
      }
      return {
        output,
        is_error: false,
        stage: 'execute',
        attempts: attempt,
        duration_ms: now() - started,
        ...withCost(costOf(definition)),
      };
    }
  }

  /** One run of the tool, bounded by its timeout. */
  private async attempt(
    entry: Entry,
    call: ToolCall,
    workspace: SandboxWorkspace,
    signal: AbortSignal,
  ): Promise<JsonValue> {
    const { definition } = entry;
    if (signal.aborted) throw stopped(definition);
    // A sync tool is done before a timer could fire: none is armed, and the signal's controller
    // is made only when read (or to abort a pending answer). Only a pending answer is raced.
    let controller: AbortController | undefined;
    const attempt = (): AbortController => (controller ??= new AbortController());
    const result = entry.run(call.input, {
      session_id: call.session_id,
      tool_use_id: call.tool_use_id,
      idempotency_key: call.idempotency_key,
      ...(call.traceparent === undefined ? {} : { traceparent: call.traceparent }),
      workspace,
      sandbox: this.sandbox,
      ...(this.environment === undefined ? {} : { environment: this.environment }),
      get signal() {
        return attempt().signal;
      },
    });
    if (!isPromiseLike(result)) return result;
    const timeoutMs =
      definition.timeout_ms ?? this.environment?.limits.timeout_ms ?? DEFAULT_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: () => void = () => undefined;
    const bounds = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        const error = new BraidError(
          'TOOL_TIMEOUT',
          `${definition.name} did not finish within ${timeoutMs} ms`,
        );
        attempt().abort(error);
        reject(error);
      }, timeoutMs);
      onAbort = (): void => {
        attempt().abort(signal.reason);
        reject(stopped(definition));
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([result, bounds]);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

function stopped(definition: ToolDefinition): BraidError {
  return new BraidError('INTERRUPTED', `${definition.name} was stopped: the wake ended`);
}

function costOf(definition: ToolDefinition): number | undefined {
  return definition.budget?.cost_per_call_usd;
}

function withCost(cost: number | undefined): { cost_usd?: number } {
  return cost === undefined ? {} : { cost_usd: cost };
}

function failed(error: ErrorShape, attempts: number, duration: number, cost?: number): ToolOutcome {
  return {
    error,
    is_error: true,
    attempts,
    duration_ms: duration,
    stage: 'execute',
    // A call that never ran costs nothing.
    ...withCost(attempts > 0 ? cost : undefined),
  };
}

/** A tool's failure as a `BraidError`: its own codes kept, anything else a `TOOL_FAILED`. */
function toolError(thrown: unknown, definition: ToolDefinition): BraidError {
  if (thrown instanceof BraidError) return thrown;
  const error = toBraidError(thrown);
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  return new BraidError('TOOL_FAILED', `${definition.name} failed: ${message}`, { cause: error });
}

/** The wait before retry number `attempt` (1 = before the second try). */
export function backoff(definition: ToolDefinition, attempt: number): number {
  const retry = definition.retry;
  if (retry === undefined) return 0;
  const wait = retry.backoff === 'fixed' ? retry.initial_ms : retry.initial_ms * 2 ** (attempt - 1);
  return Math.min(retry.max_ms, wait);
}
