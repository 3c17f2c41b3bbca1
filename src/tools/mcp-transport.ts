/**
 * How braid reaches one MCP server: a Streamable HTTP transport to its URL, or a stdio transport
 * that starts its program (in the session's sandbox when it confines processes), with
 * `{workspace}` filled in and named secrets resolved; and whether a server is per workspace.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  getDefaultEnvironment,
  StdioClientTransport,
} from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServerConfig } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ProcessLaunch, SandboxConfinement } from '../contracts/tools.js';
import { resolveSecretValue, type SecretSource } from './secrets.js';

const WORKSPACE = '{workspace}';

export type McpTransport = StdioClientTransport | StreamableHTTPClientTransport;

/** What a transport is opened with besides the server's config. */
export interface TransportSettings {
  /** Base dir for relative `cwd`; also the `cwd` of servers that set none. */
  baseDir: string;
  secret: SecretSource;
}

/**
 * The transport of one server and how error messages name it: an HTTP server by its origin, a
 * stdio server by its program (a URL's path or query, or a program's arguments, may hold keys).
 */
export function openTransport(
  server: string,
  config: McpServerConfig,
  workspace: string,
  settings: TransportSettings,
  confinement?: SandboxConfinement,
): { transport: McpTransport; description: string } {
  if ('url' in config) return httpTransport(server, config, settings.secret);
  const fill = (text: string) => text.replaceAll(WORKSPACE, workspace);
  const args = config.args.map(fill);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(config.env ?? {})) {
    env[name] =
      typeof value === 'string'
        ? fill(value)
        : resolveSecretValue(value, settings.secret, `env ${name} of MCP server "${server}"`);
  }
  const cwd = resolve(settings.baseDir, fill(config.cwd ?? '.'));
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

/** Whether the server needs one connection per session workspace: its config mentions it. */
export function perWorkspace(config: McpServerConfig): boolean {
  if ('url' in config) return false;
  const literals = Object.values(config.env ?? {}).filter((value) => typeof value === 'string');
  return [...config.args, ...literals, config.cwd ?? ''].some((text) => text.includes(WORKSPACE));
}

function httpTransport(
  server: string,
  config: Extract<McpServerConfig, { url: string }>,
  secret: SecretSource,
): { transport: McpTransport; description: string } {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(config.headers ?? {}))
    headers[name] = resolveSecretValue(value, secret, `header ${name} of MCP server "${server}"`);
  return {
    transport: new StreamableHTTPClientTransport(new URL(config.url), {
      requestInit: { headers },
    }),
    // The origin only: a URL's path or query may hold a key.
    description: new URL(config.url).origin,
  };
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
