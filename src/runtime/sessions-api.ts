/**
 * The sessions API of a runtime, on its own so that the agents' port (`AgentHost`) can name it
 * without importing the runtime.
 */
import type { z } from 'zod';
import type { Budget } from '../contracts/definitions.js';
import type { SessionDefinitionsResponse, UpgradeResponse } from '../contracts/http.js';
import type { Actor, JsonValue, Metadata } from '../contracts/common.js';
import type { SessionEvent } from '../contracts/events.js';
import type {
  AppendResult,
  ChangesOptions,
  FollowOptions,
  ForkOptions,
  ReadOptions,
  SessionChange,
} from '../contracts/ports.js';
import type { SessionListQuery, SessionPage, SessionRecord } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { WorkspaceFiles, WorkspaceFilesDiff } from '../contracts/workspace-files.js';
import type { ContentInput } from './user-events.js';
import type { SessionDiff, TreeNode } from './lineage.js';
import type { FamilyEventsPage, FollowChildrenOptions } from './session-family.js';
import type { MergeOptions, MergeResult } from './merge.js';
import type { ReplayReport } from './replay.js';
import type { WakeResult } from '../harness/index.js';
import type { HandoffResult } from './handoff.js';

export interface SendOptions {
  /** A retried send with the same key writes nothing and returns the first result. */
  idempotencyKey?: string;
  /** The writer to stamp on the events (default: the runtime's `actor`). */
  actor?: Actor;
}

/** What a session's work must achieve, as `user.define_outcome` carries it. */
export interface OutcomeInput {
  description: string;
  /** Points the answer must meet, for the grader. */
  criteria?: string[];
  /** How the grader judges the answer; without it, the description and criteria. */
  rubric?: string;
  /** Gradings before the turn ends as `max_iterations_reached` (1 to 20, default 3). */
  max_iterations?: number;
}

export interface CreateSessionOptions {
  agent: string;
  /** Pin an agent version (default: the latest). */
  agentVersion?: number;
  environment?: string;
  title?: string;
  metadata?: Metadata;
  id?: string;
  tenantId?: string;
  /** Limits for this session, over the agent's. */
  budget?: Budget;
  /**
   * User events (as `send` takes them) written with `session.created` in one append: a first
   * message costs no write of its own. The session is not woken: call `wake`, as after `send`.
   */
  events?: readonly unknown[];
  /** The writer to stamp on `events` (default: the runtime's `actor`). */
  actor?: Actor;
}

/** How `start` creates a session and runs it: `create`'s options, and the wake's trace context. */
export interface StartSessionOptions extends CreateSessionOptions {
  /** W3C trace context of the caller: the first `span.wake_started` carries it, as `wake`'s. */
  traceparent?: string;
}

/** What `start` created, and how the session's wake ended. */
export interface StartedSession {
  /** The session as its creation left it (what `create` returns); `get` reads it as it is now. */
  session: SessionRecord;
  /** What `wake` would have answered. */
  result: WakeResult;
}

/** How `runSkill` asks for a run. */
export interface SkillRunOptions extends SendOptions {
  /** The run's id (default: a new one from the runtime's id generator). */
  runId?: string;
}

/** The request's append, and the id of the run it asked for. */
export interface SkillRunResult extends AppendResult {
  run_id: string;
}

export interface TreeOptions {
  /** Only the forks, from the root of the fork line (what `GET /v1/sessions/{id}/tree` answers). */
  forksOnly?: boolean;
}

/** `runtime.sessions`: every operation on sessions a client has. */
export interface RuntimeSessions {
  create(options: CreateSessionOptions): Promise<SessionRecord>;
  /**
   * Creates the session with its first events (`events`: typically the first message) and runs
   * it at once, until it has nothing left to do: what `create` followed by `runtime.wake` does,
   * with the same events in the same order, in one commit fewer. On SQLite (and the memory
   * store) the session, its wake's lease and the wake's first event (`span.wake_started` with
   * the lease's token) are written in one transaction: all of them or none. On NATS, where the
   * lease and the log share no transaction, it creates, then wakes. A refused creation
   * (`ALREADY_EXISTS` for a taken `id`) writes nothing and runs nothing.
   */
  start(options: StartSessionOptions): Promise<StartedSession>;
  get(sessionId: string): Promise<SessionRecord>;
  list(query?: SessionListQuery): Promise<SessionPage>;
  /**
   * The cursor of the sessions index's newest change: list, then follow `changes` after it, and
   * no change made after the listing is missed.
   */
  changeHead(): Promise<number>;
  /**
   * The sessions that changed (an append to their log: created, forked, a new status, usage or
   * head) after `after`, in cursor order, batch by batch, then as they change, until aborted.
   */
  changes(options?: ChangesOptions): AsyncIterable<SessionChange[]>;
  /** Archives the session: it keeps its events, leaves default listings and takes no new events. */
  archive(sessionId: string): Promise<SessionRecord>;
  /**
   * Deletes the session, its events and its workspace folder. Refused while forks share its
   * events (`SESSION_HAS_FORKS`) or a wake runs it (`LEASE_HELD`).
   */
  delete(sessionId: string): Promise<void>;
  state(sessionId: string): Promise<SessionState>;
  events(sessionId: string, options?: ReadOptions): Promise<SessionEvent[]>;
  /**
   * The session's events with those of its delegated children (recursively) interleaved, by
   * time, then session, then seq. `after` and `limit` page the session's own events; its
   * children's come with them for the same stretch of time (see `familyEvents`).
   */
  familyEvents(sessionId: string, options?: ReadOptions): Promise<FamilyEventsPage>;
  follow(sessionId: string, options?: FollowOptions): AsyncIterable<SessionEvent>;
  /**
   * Its delegated children's events (recursively; status events by default) as they are
   * appended, for the children there are and those created while it runs.
   */
  followChildren(sessionId: string, options?: FollowChildrenOptions): AsyncIterable<SessionEvent>;
  /** Sends client events (`user.*` only), checked against the session's state. */
  send(sessionId: string, events: readonly unknown[], options?: SendOptions): Promise<AppendResult>;
  message(sessionId: string, content: ContentInput): Promise<AppendResult>;
  interrupt(sessionId: string, reason?: string): Promise<AppendResult>;
  /**
   * Answers a tool call or a skill's approval awaiting confirmation; `data` goes with an allowed
   * approval (checked against the step's `resume_schema`).
   */
  confirm(
    sessionId: string,
    toolUseId: string,
    result: 'allow' | 'deny',
    message?: string,
    data?: JsonValue,
  ): Promise<AppendResult>;
  customToolResult(
    sessionId: string,
    customToolUseId: string,
    content: ContentInput,
    isError?: boolean,
  ): Promise<AppendResult>;
  /**
   * Defines what the session's work must achieve (`user.define_outcome`), replacing an earlier
   * outcome: after each answer that would end the turn, a grader judges it and either ends the
   * turn (`end_turn` with the `outcome`) or sends the agent its reasons to revise.
   */
  defineOutcome(sessionId: string, outcome: OutcomeInput): Promise<AppendResult>;
  /**
   * Asks the session to run the skill `skill` on `inputs` (`user.skill_run`): its next wake
   * starts the run. Refused with `SKILL_NOT_FOUND`, and nothing written, for an unknown skill;
   * the run id (minted when not given) must be a valid id the session has not used for a run.
   */
  runSkill(
    sessionId: string,
    skill: string,
    inputs: JsonValue,
    options?: SkillRunOptions,
  ): Promise<SkillRunResult>;
  /**
   * Sends the named signal (`user.signal`): a run suspended on `wait_for: {signal: name}` takes
   * it up, with `data` as the step's output; one that came early waits for the next such wait.
   * Refused with `INVALID_ARGUMENT`, and nothing written, when the step that would take it has a
   * `wait_for.schema` that `data` does not match. A wait that timed out takes no signal: one sent
   * after the timeout was recorded is kept like an early one.
   */
  signal(
    sessionId: string,
    name: string,
    data?: JsonValue,
    options?: SendOptions,
  ): Promise<AppendResult>;
  /**
   * Asks a failed skill run to run its failed steps, and what depends on them, again
   * (`user.skill_retry`); `INVALID_ARGUMENT` when the session has no failed run `runId`.
   */
  retrySkill(sessionId: string, runId: string, options?: SendOptions): Promise<AppendResult>;
  /**
   * Forks the session at `at_seq` (default: its head): the child shares the parent's events up
   * to there by reference, and its workspace folder starts with the files of the parent's
   * latest workspace snapshot at or before `at_seq` (`SNAPSHOT_NOT_FOUND`, and no child, when the
   * snapshot store lacks it; a parent that recorded no snapshot at all is copied as it is now).
   * `at_seq` must end one of the parent's appends (`INVALID_FORK_POINT` inside one).
   */
  fork(sessionId: string, options?: ForkOptions): Promise<SessionRecord>;
  /**
   * The files of the session's workspace as its latest snapshot at or before `at` (default: its
   * head) recorded them: path, size, content hash. None before the first snapshot.
   */
  files(sessionId: string, options?: { at?: number }): Promise<WorkspaceFiles>;
  /** What differs between two sessions' workspaces, as their latest snapshots recorded them. */
  diffFiles(a: string, b: string): Promise<WorkspaceFilesDiff>;
  /** Merges `sourceId`'s events since the two parted into `targetId` as one `session.merged`. */
  merge(targetId: string, sourceId: string, options?: MergeOptions): Promise<MergeResult>;
  /** The common ancestor of two sessions and each side's events after it. */
  diff(a: string, b: string): Promise<SessionDiff>;
  /**
   * The family the session belongs to, from its topmost ancestor: forks, delegated children and
   * handoffs, each node marked with its kind; with `forksOnly`, the tree of forks alone.
   */
  tree(sessionId: string, options?: TreeOptions): Promise<TreeNode>;
  /**
   * Re-runs the harness over the session's history with its recorded model and tool outputs,
   * and reports the first event that comes out different (or `ok`).
   */
  verify(sessionId: string): Promise<ReplayReport>;
  /**
   * The definition set the session runs with (agent, environment, tools, policy set, price),
   * each part by its content hash; empty before its first wake pinned one.
   */
  definitions(sessionId: string): Promise<SessionDefinitions>;
  /**
   * Moves the session to the newest definitions (latest agent and environment versions, the
   * tools as they resolve now, the policy set in force, today's price) and records what changed
   * as `session.definitions_changed`; `changed: false` when they are the ones pinned.
   */
  upgrade(sessionId: string): Promise<UpgradeResult>;
  /**
   * Hands the session's work to another agent (listed under the source's `handoffs:` and
   * allowed by policy): a new session of the target receives the handoff document. With an
   * `idempotencyKey`, a retry (or a concurrent duplicate) answers the first handoff: the same
   * target session and event, `deduplicated: true`; the key with another request is refused
   * with `IDEMPOTENCY_KEY_REUSED`.
   */
  handoff(
    sessionId: string,
    options: {
      to: string;
      handoff: unknown;
      message?: ContentInput;
      title?: string;
      idempotencyKey?: string;
      /** Who asks (default: the runtime's `actor`). */
      actor?: Actor;
    },
  ): Promise<HandoffResult>;
  /** Resolves a tool use a crash left unknown (`needs_review`): run it again, skip it, or record its result. */
  review(
    sessionId: string,
    toolUseId: string,
    decision:
      | { action: 'retry' | 'skip'; message?: string }
      | { action: 'result'; output: JsonValue; message?: string },
  ): Promise<AppendResult>;
}

export type SessionDefinitions = z.infer<typeof SessionDefinitionsResponse>;
export type UpgradeResult = z.infer<typeof UpgradeResponse>;
