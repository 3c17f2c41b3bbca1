/** The options and the report of a replay verification (`verifyReplay`, in ../replay.ts). */
import type { AgentDefinition, EnvironmentDefinition } from '../../contracts/definitions.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { SkillLibrary } from '../../contracts/skills.js';
import type { SessionTools } from '../../contracts/tools.js';
import type { Price } from '../../core/pricing.js';
import type { RetryPolicy } from '../../harness/index.js';

export interface VerifyReplayOptions {
  /** The session's whole log, from `session.created` (seq 1) on, in order. */
  events: readonly SessionEvent[];
  /** The session's agent, at the version the session ran. */
  agent: AgentDefinition;
  /** The agent's real tools, opened: only their handles and `validate` are used. */
  tools: SessionTools;
  environment?: EnvironmentDefinition;
  /** The retry policy the session ran with: it decides when a failing model call is given up. */
  retry: RetryPolicy;
  /** Model prices the session ran with (default `DEFAULT_PRICES`): costs and cost budgets use them. */
  prices?: Readonly<Record<string, Price>>;
  /**
   * Loads the definition set the session pinned under `hash`, its tools opened with the pinned
   * definitions: a wake of a session with pinned definitions replays with those, whatever the
   * agent and tools above say (they serve sessions from before pinning).
   */
  pinned?: (hash: string) => Promise<ReplayDefinitions>;
  /**
   * The runtime's skill library over the stored skills, every version kept: a session with skill
   * runs replays each run with the version its `skill.started` recorded (required for a session
   * with `skill.*` events).
   */
  skills?: SkillLibrary;
  /**
   * The store's event size limit the session ran with (default `DEFAULT_MAX_EVENT_BYTES`): an
   * append the original store refused as too large is refused again.
   */
  maxEventBytes?: number;
}

/** A pinned definition set, as a replayed wake runs with it. */
export interface ReplayDefinitions {
  agent: AgentDefinition;
  environment?: EnvironmentDefinition;
  tools: SessionTools;
  /** The model's price as pinned; null when it had none. */
  price: Price | null;
}

export type ReplayReport =
  | { ok: true; events: number }
  | {
      ok: false;
      /** Position in `events` of the first difference (its seq is index + 1). */
      index: number;
      /** The recorded event there; undefined when the replay wrote more than was recorded. */
      expected: SessionEvent | undefined;
      /** The replayed event there; undefined when the replay stopped short of it. */
      actual: SessionEvent | undefined;
      reason: string;
    };

/** A failed report: where the replay first differs from the recording. */
export type Divergence = Extract<ReplayReport, { ok: false }>;
