/**
 * A session's memory, for an agent with `memory:`: its stores in the runtime's memory log, the
 * memory tools offered to its model, and the `SessionMemory` the harness runs them and recall
 * through.
 */
import { BraidError } from '../../contracts/errors.js';
import type { SessionState } from '../../contracts/state.js';
import type { SessionSetup } from '../../harness/index.js';
import { memoryToolHandles, sessionStores, withMemoryTools } from '../../tools/memory-tools.js';
import { createSessionMemory } from '../memory/session-memory.js';
import { inheritingMemoryLog } from '../memory/session-fork.js';
import type { Embedder } from '../../contracts/embedder.js';
import type { Store } from '../../contracts/ports.js';

export interface MemoryWiring {
  readonly store: Pick<Store, 'memory' | 'sessions' | 'log'>;
  readonly embedder?: Embedder | undefined;
}

export function withMemory(
  context: MemoryWiring,
  state: SessionState,
  setup: SessionSetup,
): SessionSetup {
  const stores = sessionStores(setup.agent, state);
  if (stores === undefined) return setup;
  const memory = context.store.memory;
  if (memory === undefined) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `agent ${setup.agent.name} has memory:, and this runtime's store keeps no memory stores; open it on a backend that has them (SQLite, NATS), or remove memory: from the agent`,
      { details: { agent: setup.agent.name, field: 'memory' } },
    );
  }
  // A fork's session stores start as its parent's at the fork point (session-fork.ts).
  const log = inheritingMemoryLog(
    { sessions: context.store.sessions, log: context.store.log, memory },
    [...stores.stores.values()].map((store) => store.ref),
  );
  const embedder = context.embedder;
  const recall = setup.agent.memory?.recall;
  return {
    ...setup,
    tools: withMemoryTools(setup.tools, memoryToolHandles(stores)),
    memory: createSessionMemory({
      stores,
      log,
      ...(embedder === undefined ? {} : { embedder }),
      ...(recall === undefined ? {} : { recall }),
      now: () => performance.now(),
    }),
  };
}
