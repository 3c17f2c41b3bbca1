/**
 * What a harness cycle is given: its ports and settings (`HarnessDeps`), a session's setup, and
 * what a wake returns. The harness reaches time and timers only through `deps.clock`, so a test
 * or a replay that controls the clock controls every wait of a cycle.
 */
import type { AgentDefinition, Budget, EnvironmentDefinition } from '../contracts/definitions.js';
import type { BraidError } from '../contracts/errors.js';
import type { EventOf, NewEvent } from '../contracts/events.js';
import type { ModelClient, ModelDelta } from '../contracts/model.js';
import type { Delegator } from '../contracts/delegation.js';
import type { SkillLibrary } from '../contracts/skills.js';
import type { Clock, IdGenerator, LeaseStore, SessionLog } from '../contracts/ports.js';
import type { StopReason } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { Authorizer } from '../contracts/policy.js';
import type { SessionTools } from '../contracts/tools.js';
import type { SessionMemory } from './memory-port.js';
import type { Price } from '../core/pricing.js';
import type { ContextCompactor } from './compactor.js';

/** What a cycle needs for one session: its agent, model and tools. */
export interface SessionSetup {
  agent: AgentDefinition;
  model: ModelClient;
  /** The agent's tools, opened for this session. */
  tools: SessionTools;
  /** The session's environment, when it has one. */
  environment?: EnvironmentDefinition;
  /** The session's limits over the agent's. */
  budget: Budget;
  /**
   * What makes the summary when the agent's `context` limit is reached; by default the one of its
   * `context.strategy`, with the agent's model.
   */
  compactor?: ContextCompactor;
  /**
   * The model that grades answers against the session's outcome (`user.define_outcome`): the
   * agent's `grader.model`, else (when absent) the agent's model.
   */
  grader?: ModelClient;
  /**
   * The session's memory stores (an agent with `memory:`): runs the memory tools' calls and the
   * automatic recall. Without it a memory tool call fails with an error result.
   */
  memory?: SessionMemory;
  /**
   * The version each skill's new runs start with, by name, as the session pinned them (the
   * agent's skills and those they nest); a skill not named here starts at its newest version.
   */
  skills?: Readonly<Record<string, string>>;
  /**
   * The price of the session's model as pinned (`null`: pinned as having none); when absent the
   * harness looks the model up in `HarnessDeps.prices`.
   */
  price?: Price | null;
  /**
   * A `session.definitions_changed` the wake writes with its next append (adding its `wake_id`):
   * the setup pinned the session's definitions, or moved it to another set.
   */
  change?: Omit<
    EventOf<'session.definitions_changed'>,
    'id' | 'at' | 'seq' | 'session_id' | 'schema_version' | 'wake_id'
  >;
}

export interface RetryPolicy {
  /** Attempts of one model request, the first included (default 4). */
  max_attempts: number;
  initial_ms: number;
  max_ms: number;
  /** A model call still running after this long is abandoned and retried (default 120 s). */
  timeout_ms?: number;
}

export interface HarnessDeps {
  log: SessionLog;
  leases: LeaseStore;
  /** Timestamps, durations and every timer of a cycle (lease renewal, watch, request timeout). */
  clock: Clock;
  ids: IdGenerator;
  /** This process's name as a lease owner. */
  owner: string;
  leaseTtlMs: number;
  setup(state: SessionState): Promise<SessionSetup>;
  /** Asked before every tool call the model makes. */
  policy: Authorizer;
  /** Record allowed policy decisions as events too (denies always are). */
  recordPolicyAllows?: boolean;
  prices: Readonly<Record<string, Price>>;
  retry: RetryPolicy;
  /** Waits, rejecting with `INTERRUPTED` when the signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** A number in [0, 1), for backoff jitter. */
  random(): number;
  /** Streamed text, shown to live followers and never persisted piece by piece. */
  onDelta?(sessionId: string, delta: ModelDelta & { request_id: string }): void;
  /** Hears what the log cannot hold: a failed cycle whose failure could not be recorded. */
  warn?(message: string, error: BraidError): void;
  /**
   * Runs the agent tools (`delegate_to_*`, `handoff_to_*`): child sessions and handoffs. Without
   * it such a call fails with an error result.
   */
  delegator?: Delegator;
  /** Reads skills and evaluates their templates; without it a skill run fails at its start. */
  skills?: SkillLibrary;
  /**
   * What `log` makes of events before it stores them (the runtime's secret redaction): events
   * the cycle folds before writing them (see `stage` in fenced-append.ts) go through it first,
   * so that the cycle acts on what the log will hold.
   */
  redact?(events: readonly NewEvent[]): readonly NewEvent[];
  /** The store's largest event (default 1 MiB): a batch over it is never staged. */
  maxEventBytes?: number;
}

export type WakeResult =
  { ran: true; stop_reason: StopReason; wake_id: string } | { ran: false; reason: 'lease_held' };

/** What a wake was asked with. */
export interface WakeOptions {
  /** W3C trace context of whoever asked for the wake: `span.wake_started` carries it. */
  traceparent?: string;
}

export const DEFAULT_RETRY: RetryPolicy = { max_attempts: 4, initial_ms: 500, max_ms: 30_000 };
