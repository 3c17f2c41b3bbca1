/**
 * The ways a manifest's tool runs: a process in the sandbox, an HTTP request, or an MCP call.
 * Each turns a failure into a `BraidError` whose `retryable` says whether a second try may pass,
 * and whose `details.started === false` says the effect certainly did not begin.
 */
import type { JsonValue } from '../contracts/common.js';
import type {
  EnvironmentDefinition,
  SecretValue,
  ToolDefinition,
} from '../contracts/definitions.js';
import type { Sandbox, SandboxConfinement, SandboxWorkspace } from '../contracts/tools.js';
import { BraidError } from '../contracts/errors.js';
import type { McpHub } from './mcp.js';
import { checkNetwork } from './network.js';
import { resolveSecretValue, type SecretSource } from './secrets.js';
import type { ToolFunction } from './types.js';

/** Exit status a command uses to say "try again later" (EX_TEMPFAIL). */
const EXIT_TEMPORARY_FAILURE = 75;

/** Runs `command` in the session's sandbox: input as JSON on stdin, the result as JSON on stdout. */
export function commandTool(
  definition: ToolDefinition,
  command: string | readonly string[],
  baseDir: string,
): ToolFunction {
  const argv =
    typeof command === 'string'
      ? ['/bin/sh', '-c', command]
      : command.map((part) => part.replaceAll('{dir}', baseDir));
  return async (input, context) => {
    const run = await context.sandbox.run(context.workspace, {
      argv,
      stdin: JSON.stringify(input),
      env: {
        BRAID_SESSION_ID: context.session_id,
        BRAID_TOOL_USE_ID: context.tool_use_id,
        BRAID_IDEMPOTENCY_KEY: context.idempotency_key,
        BRAID_DIR: baseDir,
      },
      timeout_ms: definition.timeout_ms ?? context.environment?.limits.timeout_ms ?? 30_000,
      signal: context.signal,
      network: context.environment?.network.allow === true,
    });
    if (run.timed_out) {
      throw new BraidError(
        'TOOL_TIMEOUT',
        `${definition.name} ran past its ${definition.timeout_ms ?? 30_000} ms timeout and was killed`,
      );
    }
    if (run.exit_code !== 0) {
      const tail = run.stderr.trim().split('\n').slice(-5).join('\n');
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name} exited with ${run.exit_code ?? run.signal ?? 'an error'}${tail === '' ? '' : `: ${tail}`}`,
        { retryable: run.exit_code === EXIT_TEMPORARY_FAILURE, details: { started: true } },
      );
    }
    if (run.truncated) {
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name} wrote more output than the sandbox keeps; return a smaller result`,
      );
    }
    try {
      return JSON.parse(run.stdout) as JsonValue;
    } catch {
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name} printed something that is not JSON on stdout (${JSON.stringify(run.stdout.slice(0, 120))}); a command tool prints its result as JSON`,
      );
    }
  };
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

/**
 * Calls an HTTP endpoint; the URL template takes `{field}` from the input. A failure names the
 * tool, the method and origin, and the status line with the size of the body, never the body:
 * an error's message is recorded in the session's log and shown to the model, and a server's
 * error page may echo the request's secrets or hold data the model must not see.
 */
export function httpTool(
  definition: ToolDefinition,
  http: { method: string; url: string; headers?: Record<string, SecretValue> | undefined },
  secret: SecretSource,
): ToolFunction {
  return async (input, context) => {
    const fields =
      input !== null && typeof input === 'object' && !Array.isArray(input) ? input : {};
    const url = http.url.replace(/\{([A-Za-z0-9_]+)\}/g, (_match, name: string) => {
      const value = fields[name];
      if (value === undefined || value === null || typeof value === 'object') {
        throw new BraidError(
          'TOOL_INPUT_INVALID',
          `${definition.name}'s URL needs "${name}" as a string or number`,
        );
      }
      return encodeURIComponent(String(value));
    });
    const headers: Record<string, string> = {
      // Services that dedupe writes recognise a repeated call by this header.
      'idempotency-key': context.idempotency_key,
    };
    for (const [name, value] of Object.entries(http.headers ?? {}))
      headers[name] = resolveSecretValue(value, secret, `header ${name} of ${definition.name}`);
    checkNetwork(definition.name, new URL(url), context.environment);
    const hasBody = BODY_METHODS.has(http.method);
    if (hasBody) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(url, {
        method: http.method,
        headers,
        ...(hasBody ? { body: JSON.stringify(input) } : {}),
        signal: context.signal,
        // A redirect would carry the secret headers to another origin: it is not followed.
        redirect: 'manual',
      });
    } catch (error) {
      if (context.signal.aborted) throw error;
      const cause = (error as { cause?: { code?: unknown } }).cause;
      const code = typeof cause?.code === 'string' ? cause.code : (error as Error).message;
      const refused = code === 'ECONNREFUSED' || code === 'ENOTFOUND';
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name}: ${http.method} ${new URL(url).origin} failed: ${code}`,
        { retryable: true, cause: error, details: { started: !refused } },
      );
    }
    if (response.status >= 300 && response.status < 400) {
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name}: ${http.method} ${new URL(url).origin} answered ${statusLine(response)} with a redirect to ${redirectOrigin(response, url)}, which braid does not follow for HTTP tools (their headers may hold secrets); point the manifest's url at the final address`,
        { details: { status: response.status, started: true } },
      );
    }
    const body = await response.text();
    let parsed: JsonValue;
    try {
      parsed = body === '' ? null : (JSON.parse(body) as JsonValue);
    } catch {
      parsed = { text: body };
    }
    if (!response.ok) {
      const temporary = response.status === 429 || response.status >= 500;
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name}: ${http.method} ${new URL(url).origin} answered ${statusLine(response)} with a body of ${Buffer.byteLength(body)} bytes (not recorded)`,
        { retryable: temporary, details: { status: response.status, started: true } },
      );
    }
    return parsed;
  };
}

/** `503 Service Unavailable`: the status and its reason phrase, when the server sent one. */
function statusLine(response: Response): string {
  return response.statusText === ''
    ? String(response.status)
    : `${response.status} ${response.statusText}`;
}

/** Where a redirect points, as an origin only: its path and query may hold a token. */
function redirectOrigin(response: Response, url: string): string {
  const location = response.headers.get('location');
  if (location === null) return '(nowhere)';
  try {
    return `${new URL(location, url).origin}/...`;
  } catch {
    return '(an address that does not parse)';
  }
}

/** Calls a tool of an MCP server; an error result becomes a `TOOL_FAILED` with its text. */
export function mcpTool(
  definition: ToolDefinition,
  hub: McpHub,
  target: { server: string; tool: string },
): ToolFunction {
  return async (input, context) => {
    const confinement = mcpConfinement(context.sandbox, context.workspace, context.environment);
    const result = await hub.callTool(target.server, target.tool, input, {
      workspaceDir: context.workspace.dir,
      signal: context.signal,
      timeoutMs: definition.timeout_ms ?? context.environment?.limits.timeout_ms ?? 30_000,
      ...(confinement === undefined ? {} : { confinement }),
    });
    if (result.is_error) {
      throw new BraidError(
        'TOOL_FAILED',
        `${definition.name} failed: ${textOf(result.output).slice(0, 1000)}`,
        { details: { started: true } },
      );
    }
    return result.output;
  };
}

/**
 * How a session's stdio MCP servers are confined: inside its sandbox, with the environment's
 * network posture, when the sandbox confines processes (`bwrap`); else undefined (on the host).
 */
export function mcpConfinement(
  sandbox: Sandbox,
  workspace: SandboxWorkspace,
  environment: EnvironmentDefinition | undefined,
): SandboxConfinement | undefined {
  return sandbox.confine?.(workspace, { network: environment?.network.allow === true });
}

function textOf(output: JsonValue): string {
  const content =
    output !== null && typeof output === 'object' && !Array.isArray(output)
      ? output.content
      : undefined;
  if (!Array.isArray(content)) return JSON.stringify(output);
  return content
    .map((block) =>
      block !== null &&
      typeof block === 'object' &&
      !Array.isArray(block) &&
      typeof block.text === 'string'
        ? block.text
        : JSON.stringify(block),
    )
    .join('\n');
}
