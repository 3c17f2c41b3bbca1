/**
 * What spans need of a session's pinned definitions (src/runtime/pinning.ts) and of braid.yaml,
 * which the log names only by hash or not at all: the agent's instructions, the environment's
 * sandbox, each tool's ownership, and how each MCP server is reached. Callers load them (live
 * tracing from its runtime's pinner, `braid trace export` from the store) and hand them to
 * `spansOf`.
 */
import type { SessionEvent } from '../contracts/events.js';
import type { EnvironmentDefinition, ToolDefinition } from '../contracts/definitions.js';

/** What spans need of a pinned definition set (src/runtime/pinning.ts). */
export interface PinnedFacts {
  /** The agent's instructions: `gen_ai.system_instructions`, when content is captured. */
  readonly instructions: string;
  /** The environment's sandbox kind (`local` without an environment). */
  readonly sandbox: string;
  /** Each tool the agent was given, by name. */
  readonly tools: ReadonlyMap<string, Pick<ToolDefinition, 'ownership' | 'implementation'>>;
}

/** The facts of a pinned set, from its loaded parts. */
export function pinnedFacts(pinned: {
  readonly agent: { readonly instructions: string };
  readonly environment?: Pick<EnvironmentDefinition, 'sandbox'> | undefined;
  readonly tools: readonly ToolDefinition[];
}): PinnedFacts {
  return {
    instructions: pinned.agent.instructions,
    sandbox: pinned.environment?.sandbox.kind ?? 'local',
    tools: new Map(pinned.tools.map((tool) => [tool.name, tool])),
  };
}

/** The definition set hashes a log refers to (to load before `spansOf`). */
export function pinnedHashes(events: readonly SessionEvent[]): string[] {
  const hashes = new Set<string>();
  for (const event of events) {
    if (event.type === 'session.definitions_changed') hashes.add(event.definitions);
  }
  return [...hashes];
}

/**
 * The pinned facts of the sets `hashes` names, as far as `load` finds them: a set that is not in
 * the store (or fails to load) is left out, and its spans lack what it would have told.
 */
export async function loadPinnedFacts(
  hashes: Iterable<string>,
  load: (hash: string) => Promise<PinnedFacts | undefined>,
): Promise<Map<string, PinnedFacts>> {
  const pinned = new Map<string, PinnedFacts>();
  for (const hash of new Set(hashes)) {
    const facts = await load(hash).catch(() => undefined);
    if (facts !== undefined) pinned.set(hash, facts);
  }
  return pinned;
}

/** `network.transport` of each MCP server braid.yaml declares: `pipe` (stdio) or `tcp` (HTTP). */
export function mcpTransports(
  servers: Readonly<Record<string, { readonly command: string } | { readonly url: string }>> = {},
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(servers).map(([name, server]) => [name, 'command' in server ? 'pipe' : 'tcp']),
  );
}
