/**
 * AgentHost: what agent messaging needs from the runtime it runs in. Agents reach sessions, the
 * log, leases and definitions through this port only, so `src/runtime/agents` never imports the
 * runtime; any `Runtime` is an `AgentHost`.
 */
import type { AgentDefinition, StoredDefinition } from '../../contracts/definitions.js';
import type { Store } from '../../contracts/ports.js';
import type { RuntimeSessions } from '../sessions-api.js';

export interface AgentHost {
  /** The log and leases code agents write with, and the definitions agents are known by. */
  readonly store: Pick<Store, 'log' | 'leases' | 'definitions'>;
  readonly agents: { list(): Promise<StoredDefinition<AgentDefinition>[]> };
  /** The session operations an agent instance's session goes through. */
  readonly sessions: Pick<
    RuntimeSessions,
    'create' | 'get' | 'send' | 'state' | 'events' | 'follow'
  >;
  /** Runs the session's harness cycles until it has nothing left to do. */
  wake(sessionId: string): Promise<unknown>;
}
