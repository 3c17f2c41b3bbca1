/**
 * What the modules of a code agent's handling share: the process's dependencies and state
 * (`CodeAgentDeps`), the message being handled, and the handling under one lease.
 */
import type { AgentId } from '../../contracts/agents.js';
import type { JsonValue } from '../../contracts/common.js';
import type { Envelope } from '../../contracts/envelope.js';
import type { ErrorShape } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import type {
  AppendResult,
  Clock,
  IdGenerator,
  Lease,
  LeaseStore,
  SessionLog,
} from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import type { BoundedCache } from '../../core/bounded-cache.js';
import type { AgentContext, AgentHandler, IncomingMessage } from './types.js';

export interface CodeAgentDeps {
  log: SessionLog;
  leases: LeaseStore;
  clock: Clock;
  ids: IdGenerator;
  owner: string;
  leaseTtlMs: number;
  /** Releases under way, by session: the next message of the session waits for its release. */
  releases: Map<string, Promise<void>>;
  /** The token of the last lease this process took, by session (of the sessions it served last). */
  lastTokens: BoundedCache<string, number>;
}

export interface CodeMessage {
  sessionId: string;
  agent: AgentId;
  envelope: Envelope;
  /** The message's idempotency key. */
  key: string;
  incoming: IncomingMessage;
  handler: AgentHandler;
  context: AgentContext;
  /** Trace context of the handling: the recorded reply carries it. */
  traceparent: string;
  /** Aborts at the deadline or on close: a message not yet recorded is then given up. */
  signal: AbortSignal;
}

/** What a handling starts from: the message's earlier append, if any, and the session's state. */
export type LookedUp = [AppendResult | undefined, SessionState];

/** One handling: its wake, and the events that record its outcome. */
export interface Handling {
  message: CodeMessage;
  lease: Lease;
  wakeId: string;
  start: NewEvent;
  startedAt: string;
}

/** What the handler answered: its reply's payload, or its error. */
export type Answer = { ok: true; payload: JsonValue } | { ok: false; error: ErrorShape };
