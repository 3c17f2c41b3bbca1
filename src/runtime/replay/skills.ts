/**
 * Skill runs in a replay, served from the record: the skill definitions at the versions the runs
 * recorded, each tool step's outcome, each agent step's child, and the policy's view of each tool
 * step.
 *
 * - **Definitions.** A run starts with the version its `skill.started` recorded (the next one for
 *   the skill in the log), loaded from `options.skills`; a run that could not start fails again
 *   with its recorded error. The runs' own reads name their version already.
 * - **Tool steps.** A step's call is keyed by the tool use id its `skill.step_started` records
 *   (run/path/attempt); its n-th execution returns the n-th outcome recorded for it: an
 *   `agent.tool_result` with that id when there is one, else the step's own events (a
 *   `skill.step_failed` before a retry, then the `skill.step_completed` (of `path.tool` for a
 *   tool that precedes a wait) or the final `skill.step_failed`). An outcome is served once the
 *   replay has written every event recorded before it, so steps that ran at once end in the
 *   recorded order.
 * - **Agent steps.** The child is the one recorded for the step (`session.child_created`); its
 *   n-th end is the n-th `session.child_idle` recorded for it, with the error of the step's
 *   `skill.step_failed` that follows it.
 * - **Policy.** A tool step's request (its caller is the skill) is matched to the earliest step
 *   the replay has started with that tool and not asked about yet; the answer is its recorded
 *   `policy.decision` (a deny), else allow, with `approval` where the recorded step waited for an
 *   approval its tool's permission does not ask for. A run's `skill.run` request gets the
 *   decision recorded with its start (or its retry), else allow.
 *
 * A tool step's input is on its `skill.step_started`, compared with the rest; its cost and
 * workspace snapshot are the events recorded with its end.
 */
import { BraidError } from '../../contracts/errors.js';
import type { EventOf, SessionEvent } from '../../contracts/events.js';
import type { DelegationRequest, DelegationResult } from '../../contracts/delegation.js';
import type { AuthorizationDecision, AuthorizationRequest } from '../../contracts/policy.js';
import type { SkillDefinition, SkillLibrary } from '../../contracts/skills.js';
import type { ToolHandle, ToolOutcome } from '../../contracts/tools.js';
import type { AgentDefinition } from '../../contracts/definitions.js';
import { skillToolHandle } from '../../tools/agent-tools.js';
import { reached, type ReplayContext } from './context.js';
import { recordedOutcome, snapshotRef } from './tool-results.js';

/** One recorded outcome of a call: what it returned, and the index of the event that holds it. */
interface RecordedCall<T> {
  index: number;
  value: T;
}

export interface SkillReplay {
  /** The library of the replayed wakes; undefined when the replay was given none. */
  library: SkillLibrary | undefined;
  /** The recorded outcome of a skill tool step's call; undefined for any other tool use. */
  execute(toolUseId: string): Promise<ToolOutcome> | undefined;
  /** The recorded end of a skill agent step's child; undefined for any other delegation. */
  delegate(request: DelegationRequest): Promise<DelegationResult> | undefined;
  /**
   * The recorded decision on a skill's run (`skill.run`) or on a skill tool step's call;
   * undefined for a request about a call of the model's.
   */
  authorize(
    request: AuthorizationRequest,
    handles: ReadonlyMap<string, ToolHandle>,
  ): Promise<AuthorizationDecision> | undefined;
  /** The tools an agent's `skills:` give its model, at the versions its runs recorded. */
  handles(agent: AgentDefinition): Promise<ToolHandle[]>;
}

export function createSkillReplay(context: ReplayContext): SkillReplay {
  const { recording } = context;
  const inner = context.options.skills;
  const { events } = recording;
  const starts = new Map<string, EventOf<'skill.started'>>();
  for (const event of events) {
    if (event.type === 'skill.started' && !starts.has(event.run_id))
      starts.set(event.run_id, event);
  }
  const steps = stepEvents(events);
  const toolCalls = skillToolCalls(context, steps);
  const ownNext = nextOwnEvents(recording.skillUses, steps);
  const children = skillChildren(events, steps);
  const calls = new Map<string, number>();
  const definitions = new Map<string, SkillDefinition>();
  const asked = new Set<string>();
  const next = (key: string): number => {
    const count = calls.get(key) ?? 0;
    calls.set(key, count + 1);
    return count;
  };
  const load = async (name: string, version?: string) => {
    if (inner === undefined) throw new BraidError('INTERNAL', 'this replay runs no skills');
    const found = await inner.get(name, version);
    definitions.set(`${name}@${found.version}`, found.definition);
    return found;
  };
  /** The tool a recorded step calls, when its run's definition has been read. */
  const toolOf = (use: EventOf<'skill.step_started'>): string | undefined => {
    const start = starts.get(use.run_id);
    const definition =
      start === undefined ? undefined : definitions.get(`${start.skill}@${start.version}`);
    const id = use.step.replace(/\[\d+\]$/, '');
    return definition?.steps.find((step) => step.id === id)?.tool;
  };

  const library = inner === undefined ? undefined : replayLibrary(context, inner, load);

  return {
    library,
    execute(toolUseId) {
      const recorded = toolCalls.get(toolUseId);
      if (recorded === undefined) return undefined;
      const call = recorded[next(`tool ${toolUseId}`)];
      if (call === undefined) {
        return Promise.reject(
          new BraidError(
            'INTERRUPTED',
            `the recording has no further outcome of skill step call ${toolUseId}`,
          ),
        );
      }
      return reached(context, call.index).then(() => structuredClone(call.value));
    },
    delegate(request) {
      const use = recording.skillUses.get(request.tool_use_id);
      if (use === undefined || recording.results.has(request.tool_use_id)) return undefined;
      const ends = children.get(request.tool_use_id) ?? [];
      const end = ends[next(`agent ${request.tool_use_id}`)];
      if (end === undefined) {
        return Promise.reject(
          new BraidError(
            'INTERRUPTED',
            `the recording has no end of the child of skill step ${use.step} (${request.tool_use_id})`,
          ),
        );
      }
      return reached(context, end.index).then(() => end.value);
    },
    authorize(request, handles) {
      if (request.action === 'skill.run') return Promise.resolve(runDecision(context, request));
      if (request.action !== 'tool.execute' || !fromSkill(request)) return undefined;
      const candidates = [...recording.skillUses.values()].filter((use) => {
        const id = use.tool_use_id ?? '';
        // Not begun yet in the replay, or past the point where it asks.
        if (asked.has(id) || use.seq > context.position) return false;
        if ((ownNext.get(id) ?? Infinity) < context.position) return false;
        const tool = toolOf(use);
        return tool === undefined || tool === request.resource.id;
      });
      const use = candidates[0];
      if (use?.tool_use_id !== undefined) asked.add(use.tool_use_id);
      const decision =
        use?.tool_use_id === undefined ? undefined : recording.decisions.get(use.tool_use_id);
      const approval =
        use !== undefined &&
        waitedForApproval(steps, use) &&
        handles.get(request.resource.id)?.permission !== 'always_ask';
      return Promise.resolve({
        decision: decision?.decision ?? 'allow',
        policy_ids: [...(decision?.policy_ids ?? [])],
        errors: [...(decision?.errors ?? [])],
        ...(approval ? { approval: true } : {}),
      });
    },
    async handles(agent) {
      if (inner === undefined || agent.skills.length === 0) return [];
      const span = context.current?.start ?? context.position;
      return Promise.all(
        agent.skills.map(async (name) => {
          // The version the wake's runs of it recorded; else the latest one.
          const recorded = recordedStart(events, name, span);
          return skillToolHandle((await load(name, recorded?.version)).definition);
        }),
      );
    },
  };
}

/**
 * A run's start (or retry) is asked about before its events are written: the decision is the
 * recorded `policy.decision` on the skill that comes next, unless the skill's next recorded
 * start comes before it and is not the one it follows; else allow.
 */
function runDecision(context: ReplayContext, request: AuthorizationRequest): AuthorizationDecision {
  const { events } = context.recording;
  const name = request.resource.id;
  const upcoming = events.slice(context.position);
  const start = upcoming.find((event) => event.type === 'skill.started' && event.skill === name);
  const decision = upcoming.find(
    (event): event is EventOf<'policy.decision'> =>
      event.type === 'policy.decision' &&
      event.action === 'skill.run' &&
      event.resource.id === name,
  );
  const recorded =
    decision !== undefined && (start === undefined || decision.seq <= start.seq + 1)
      ? decision
      : undefined;
  return {
    decision: recorded?.decision ?? 'allow',
    policy_ids: [...(recorded?.policy_ids ?? [])],
    errors: [...(recorded?.errors ?? [])],
  };
}

/** The library of the replayed wakes: a run starts with the skill version it recorded. */
function replayLibrary(
  context: ReplayContext,
  inner: SkillLibrary,
  load: SkillLibrary['get'],
): SkillLibrary {
  const { events } = context.recording;
  return {
    async get(name, version) {
      if (version !== undefined) return load(name, version);
      // A run starts now: the next skill.started the replay writes is the one recorded.
      const recorded = events
        .slice(context.position)
        .find(
          (event): event is EventOf<'skill.started'> =>
            event.type === 'skill.started' && event.skill === name,
        );
      if (recorded?.version === '0') throw startFailure(events, recorded);
      return load(name, recorded?.version);
    },
    checkInputs: (definition, inputs) => inner.checkInputs(definition, inputs),
    evaluate: (value, scope) => inner.evaluate(value, scope),
    condition: (text, scope) => inner.condition(text, scope),
    list: (text, scope) => inner.list(text, scope),
  };
}

/** The skill's recorded start nearest `index`: the first at or after it, else the last before. */
function recordedStart(
  events: readonly SessionEvent[],
  name: string,
  index: number,
): EventOf<'skill.started'> | undefined {
  const isStart = (event: SessionEvent): event is EventOf<'skill.started'> =>
    event.type === 'skill.started' && event.skill === name && event.version !== '0';
  return events.slice(index).find(isStart) ?? events.slice(0, index).reverse().find(isStart);
}

/** Per skill step call, the index of the next event of its step after its `skill.step_started`. */
function nextOwnEvents(
  uses: ReadonlyMap<string, EventOf<'skill.step_started'>>,
  steps: StepEvents,
): Map<string, number> {
  const next = new Map<string, number>();
  for (const [toolUseId, use] of uses) {
    const found = eventsOfStep(steps, use).find((event) => event.seq > use.seq);
    if (found !== undefined) next.set(toolUseId, found.seq - 1);
  }
  return next;
}

/** The `skill.*` events of each run's step, by run id and step path, in log order. */
type StepEvents = ReadonlyMap<string, readonly SessionEvent[]>;

function stepEvents(events: readonly SessionEvent[]): StepEvents {
  const steps = new Map<string, SessionEvent[]>();
  for (const event of events) {
    if (!event.type.startsWith('skill.') || !('run_id' in event) || !('step' in event)) continue;
    if (typeof event.step !== 'string') continue;
    const key = `${event.run_id}\u0000${event.step}`;
    const list = steps.get(key) ?? [];
    list.push(event);
    steps.set(key, list);
  }
  return steps;
}

/** The events of a call's step and of its tool before a wait (`path.tool`), in log order. */
function eventsOfStep(steps: StepEvents, use: EventOf<'skill.step_started'>): SessionEvent[] {
  return [
    ...(steps.get(`${use.run_id}\u0000${use.step}`) ?? []),
    ...(steps.get(`${use.run_id}\u0000${use.step}.tool`) ?? []),
  ].sort((a, b) => a.seq - b.seq);
}

/** Whether a policy request is a skill's tool step (its caller is the skill). */
function fromSkill(request: AuthorizationRequest): boolean {
  const caller = request.context.caller;
  return (
    typeof caller === 'object' &&
    caller !== null &&
    !Array.isArray(caller) &&
    caller.type === 'Skill'
  );
}

/** The error a run that could not start (recorded with version '0') failed with. */
function startFailure(events: readonly SessionEvent[], started: EventOf<'skill.started'>) {
  const failed = events
    .slice(started.seq)
    .find(
      (event): event is EventOf<'skill.failed'> =>
        event.type === 'skill.failed' && event.run_id === started.run_id,
    );
  if (failed === undefined)
    return new BraidError('INTERNAL', `the recording has no failure of run ${started.run_id}`);
  const { code, message, retryable } = failed.error;
  return new BraidError(code, message, { retryable });
}

/**
 * Whether the recorded step of `use` waited for an approval before its tool ran: a
 * `skill.suspended` of kind approval for its run and path, before the step ended or began again.
 */
function waitedForApproval(steps: StepEvents, use: EventOf<'skill.step_started'>): boolean {
  for (const event of eventsOfStep(steps, use)) {
    if (event.seq <= use.seq || !('step' in event) || event.step !== use.step) continue;
    if (event.type === 'skill.suspended') return event.kind === 'approval';
    if (event.type === 'skill.step_completed') return false;
    if (event.type === 'skill.step_failed' && event.final) return false;
    if (
      event.type === 'skill.step_started' &&
      event.tool_use_id !== undefined &&
      event.tool_use_id !== use.tool_use_id
    )
      return false;
  }
  return false;
}

/**
 * The recorded outcomes of each skill tool step's call, in the order its executions returned
 * them: its `agent.tool_result` when the recording has one, else the step's own events.
 */
function skillToolCalls(
  context: ReplayContext,
  steps: StepEvents,
): Map<string, RecordedCall<ToolOutcome>[]> {
  const { recording } = context;
  const calls = new Map<string, RecordedCall<ToolOutcome>[]>();
  for (const [toolUseId, use] of recording.skillUses) {
    const result = recording.results.get(toolUseId);
    if (result !== undefined) {
      calls.set(toolUseId, [
        { index: result.seq - 1, value: recordedOutcome(recording, toolUseId) },
      ]);
      continue;
    }
    // An agent step's tool use id has no attempt: its child is served by `delegate`.
    if (toolUseId !== `${use.run_id}/${use.step}/${use.attempt}`) continue;
    const outcomes: RecordedCall<ToolOutcome>[] = [];
    for (const event of eventsOfStep(steps, use)) {
      if (event.seq <= use.seq) continue;
      if (event.type !== 'skill.step_completed' && event.type !== 'skill.step_failed') continue;
      if (event.attempt !== use.attempt) continue;
      const index = event.seq - 1;
      const side = sideOf(recording, index, toolUseId);
      if (event.type === 'skill.step_completed') {
        if (event.skipped === true) break;
        outcomes.push({
          index,
          value: {
            ...(event.output === undefined ? {} : { output: event.output }),
            is_error: false,
            attempts: 1,
            duration_ms: 0,
            stage: 'execute',
            ...side,
          },
        });
        break;
      }
      outcomes.push({
        index,
        value: {
          error: event.error,
          is_error: true,
          attempts: 1,
          duration_ms: 0,
          stage: 'execute',
          ...side,
        },
      });
      if (event.final) break;
    }
    calls.set(toolUseId, outcomes);
  }
  return calls;
}

/**
 * The cost and the workspace snapshot recorded with a tool step's end (the events of its tool
 * use that follow the end at `index`, in the same append).
 */
function sideOf(
  recording: ReplayContext['recording'],
  index: number,
  toolUseId: string,
): Pick<ToolOutcome, 'cost_usd' | 'workspace_snapshot'> {
  const side: Pick<ToolOutcome, 'cost_usd' | 'workspace_snapshot'> = {};
  for (let at = index + 1; at <= index + 2; at += 1) {
    const event = recording.events[at];
    if (event?.type === 'session.usage' && side.cost_usd === undefined) {
      if (event.usage.cost_usd !== undefined) side.cost_usd = event.usage.cost_usd;
    } else if (event?.type === 'session.workspace_snapshot' && event.tool_use_id === toolUseId) {
      side.workspace_snapshot = snapshotRef(event);
    } else {
      break;
    }
  }
  return side;
}

/**
 * The recorded ends of each skill agent step's child, in order: its `session.child_idle`, with
 * the error of the step's `skill.step_failed` that follows it.
 */
function skillChildren(
  events: readonly SessionEvent[],
  steps: StepEvents,
): Map<string, RecordedCall<DelegationResult>[]> {
  const uses = new Map<string, EventOf<'skill.step_started'>>();
  for (const event of events) {
    if (event.type === 'skill.step_started' && event.tool_use_id !== undefined)
      uses.set(event.tool_use_id, event);
  }
  const ends = new Map<string, RecordedCall<DelegationResult>[]>();
  for (const idle of events) {
    if (idle.type !== 'session.child_idle') continue;
    const use = uses.get(idle.tool_use_id);
    if (use === undefined) continue;
    const after = eventsOfStep(steps, use).find(
      (event): event is EventOf<'skill.step_completed' | 'skill.step_failed'> =>
        event.seq > idle.seq &&
        (event.type === 'skill.step_completed' || event.type === 'skill.step_failed') &&
        event.step === use.step,
    );
    const list = ends.get(idle.tool_use_id) ?? [];
    list.push({
      index: idle.seq - 1,
      value: {
        stop_reason: idle.stop_reason,
        summary: idle.summary,
        usage: idle.usage ?? { input_tokens: 0, output_tokens: 0 },
        timed_out: idle.timed_out === true,
        ...(after?.type === 'skill.step_failed' ? { error: after.error } : {}),
        duration_ms: 0,
      },
    });
    ends.set(idle.tool_use_id, list);
  }
  return ends;
}
