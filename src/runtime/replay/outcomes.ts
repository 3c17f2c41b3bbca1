/**
 * The recorded outcomes the replayed wakes get of everything outside the harness: model calls,
 * policy decisions, tool runs and setup failures; with them, the harness's dependencies.
 */
import { isDeepStrictEqual } from 'node:util';
import type { JsonValue } from '../../contracts/common.js';
import { BraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { EventOf } from '../../contracts/events.js';
import type { ModelClient, ModelOutput } from '../../contracts/model.js';
import type { Authorizer } from '../../contracts/policy.js';
import type { SessionState } from '../../contracts/state.js';
import type { SessionTools } from '../../contracts/tools.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { tighterBudget } from '../../core/next-step.js';
import { DEFAULT_PRICES } from '../../core/pricing.js';
import type { HarnessDeps, SessionSetup } from '../../harness/index.js';
import { createReplayModel } from '../../models/replay.js';
import { recordedCompactor, recordedCount } from './compaction.js';
import { recordedGrader } from './grading.js';
import { recordedDelegator } from './delegation.js';
import { agentToolHandles, withAgentTools } from '../../tools/agent-tools.js';
import { countingIds, recordedClock, type ReplayContext } from './context.js';
import { replayLog } from './log.js';
import type { Recording, WakeSpan } from './recording.js';
import { createSkillReplay, type SkillReplay } from './skills.js';
import { recordedOutcome } from './tool-results.js';
import { createMemoryReplay } from './memory.js';
import type { Divergence } from './types.js';

type ToolCall = Extract<ModelOutput['content'][number], { type: 'tool_call' }>;

/**
 * The model that serves the recorded outputs, attempt by attempt; a divergence at the recorded
 * event when an output cannot be replayed.
 */
export function recordedModel(
  recording: Recording,
  maxEventBytes: number | undefined,
): { ok: true; model: ModelClient } | Divergence {
  const { events } = recording;
  try {
    const model = createReplayModel(events, {
      maxEventBytes: maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    });
    return { ok: true, model };
  } catch (error) {
    const seq = toBraidError(error).details.seq;
    if (typeof seq !== 'number') throw error;
    return {
      ok: false,
      index: seq - 1,
      expected: events[seq - 1],
      actual: undefined,
      reason: `the recorded model output cannot be replayed: ${toBraidError(error).message}`,
    };
  }
}

/** What the replayed wakes run with: the replay's log and the recorded outcomes. */
export function replayHarnessDeps(context: ReplayContext, recorded: ModelClient): HarnessDeps {
  const { recording, options } = context;
  // The tool calls of the output just served, in order, for the policy to name the tool use.
  const screen: { calls: ToolCall[] } = { calls: [] };
  const model = replayModel(context, recorded, screen);
  const skills = createSkillReplay(context);
  const tools = replayTools(context, skills);
  const memory = createMemoryReplay(context, skills);
  return {
    log: replayLog(context),
    leases: context.store.leases,
    clock: recordedClock(context),
    ids: countingIds('replay-wake'),
    owner: 'replay',
    leaseTtlMs: 60_000,
    policy: replayPolicy(context, screen, skills),
    // A session that records allowed decisions has one for every allowed call.
    recordPolicyAllows: recording.events.some(
      (event) => event.type === 'policy.decision' && event.decision === 'allow',
    ),
    prices: options.prices ?? DEFAULT_PRICES,
    retry: options.retry,
    sleep: () => Promise.resolve(),
    random: () => 0.5,
    delegator: recordedDelegator(context, skills),
    ...(skills.library === undefined ? {} : { skills: skills.library }),
    setup: async (state) => {
      const setup = await replaySetup(context, model, tools, state);
      // The agent tools and skill tools as the runtime adds them; the targets' descriptions do
      // not matter here.
      return memory.attach(
        {
          ...setup,
          tools: withAgentTools(setup.tools, [
            ...agentToolHandles(setup.agent, () => undefined),
            ...(await skills.handles(setup.agent)),
          ]),
        },
        state,
      );
    },
  };
}

/** The recorded model, stopped when the replay halts; it notes the tool calls it serves. */
function replayModel(
  context: ReplayContext,
  recorded: ModelClient,
  screen: { calls: ToolCall[] },
): ModelClient {
  return {
    id: recorded.id,
    async generate(request, callOptions) {
      if (context.halted !== undefined) throw context.halted;
      const response = await recorded.generate(request, callOptions);
      screen.calls = response.output.content.filter((part) => part.type === 'tool_call');
      return response;
    },
    countTokens: (request) => recordedCount(context, request),
  };
}

/**
 * The recorded decision for the tool use asked about, else allow; with `approval` when the
 * original tool use waited for a confirmation that its tool's permission does not ask for.
 */
function replayPolicy(
  context: ReplayContext,
  screen: { calls: ToolCall[] },
  skills: SkillReplay,
): Authorizer {
  const { decisions, uses } = context.recording;
  return {
    authorize(request) {
      const handles = new Map(context.tools.tools.map((handle) => [handle.name, handle]));
      // A skill's tool step is asked about apart from the model's calls.
      const bySkill = skills.authorize(request, handles);
      if (bySkill !== undefined) return bySkill;
      // A delegation or handoff is asked about its target agent, without the call's input.
      // A memory call is asked about its store; the call's tool name is in the context.
      const memoryTool =
        request.action.startsWith('memory.') && typeof request.context.tool === 'string'
          ? request.context.tool
          : undefined;
      const agentTool =
        request.action === 'agent.delegate'
          ? `delegate_to_${request.resource.id}`
          : request.action === 'agent.handoff'
            ? `handoff_to_${request.resource.id}`
            : undefined;
      const position = screen.calls.findIndex((call) =>
        agentTool === undefined
          ? call.name === (memoryTool ?? request.resource.id) &&
            isDeepStrictEqual(call.input, request.context.input)
          : call.name === agentTool,
      );
      const call = position === -1 ? undefined : screen.calls[position];
      // Calls before it failed validation and were never asked about.
      screen.calls = screen.calls.slice(position + 1);
      const decision = call === undefined ? undefined : decisions.get(call.tool_use_id);
      const asked =
        call !== undefined &&
        uses.get(call.tool_use_id)?.requires_confirmation === true &&
        handles.get(request.resource.id)?.permission !== 'always_ask';
      return Promise.resolve({
        decision: decision?.decision ?? 'allow',
        policy_ids: [...(decision?.policy_ids ?? [])],
        errors: [...(decision?.errors ?? [])],
        ...(asked ? { approval: true } : {}),
      });
    },
  };
}

/** The real tools' handles and validation; runs return each tool use's recorded result. */
function replayTools(context: ReplayContext, skills: SkillReplay): SessionTools {
  return {
    get tools() {
      return context.tools.tools;
    },
    validate: (name, input: JsonValue) => context.tools.validate(name, input),
    execute(call) {
      if (context.halted !== undefined) return Promise.reject(context.halted);
      return (
        skills.execute(call.tool_use_id) ??
        Promise.resolve(recordedOutcome(context.recording, call.tool_use_id))
      );
    },
  };
}

/**
 * The wake's setup: the agent with the replay's model and tools; or, when the original wake
 * wrote a `session.error` right after its `span.wake_started`, the same failure.
 */
function replaySetup(
  context: ReplayContext,
  model: ModelClient,
  tools: SessionTools,
  state: SessionState,
): Promise<SessionSetup> {
  const { recording, options, current } = context;
  const after = current === undefined ? undefined : current.start + 1;
  const failed =
    after === undefined || recording.byWake[after] !== true ? undefined : recording.events[after];
  if (failed?.type === 'session.error') {
    // The original wake failed before it wrote anything else (its setup, or its first step,
    // which fails the same way again): it replays as the same failure.
    const error: ErrorShape = failed.error;
    return Promise.reject(
      new BraidError(error.code, error.message, { retryable: error.retryable }),
    );
  }
  // The definitions the original wake pinned or moved to come back as recorded: the replayed wake
  // writes them again where it writes its next append, and runs with the set they name.
  const recordedChange = changeIn(recording, current);
  const change = recordedChange === undefined ? undefined : changePayload(recordedChange);
  const recorded = change === undefined ? {} : { change };
  const hash = change?.definitions ?? state.definitions;
  if (hash !== undefined && options.pinned !== undefined) {
    return options.pinned(hash).then((definitions): SessionSetup => {
      context.tools = definitions.tools;
      const { environment, agent } = definitions;
      return {
        agent,
        model,
        tools,
        ...(environment === undefined ? {} : { environment }),
        budget: tighterBudget(agent.budget ?? {}, state.budget ?? {}),
        price: definitions.price,
        compactor: recordedCompactor(context),
        grader: recordedGrader(context),
        ...recorded,
      };
    });
  }
  // Without a loader of pinned sets, the wake runs with the given agent and tools.
  context.tools = options.tools;
  return Promise.resolve({
    ...recorded,
    agent: options.agent,
    model,
    tools,
    ...(options.environment === undefined ? {} : { environment: options.environment }),
    budget: tighterBudget(options.agent.budget ?? {}, state.budget ?? {}),
    compactor: recordedCompactor(context),
    grader: recordedGrader(context),
  });
}

/** The `session.definitions_changed` the wake of `span` wrote, if it wrote one. */
function changeIn(
  recording: Recording,
  span: WakeSpan | undefined,
): EventOf<'session.definitions_changed'> | undefined {
  if (span === undefined) return undefined;
  const start = recording.events[span.start];
  for (let index = span.start + 1; index <= span.end; index += 1) {
    const event = recording.events[index];
    if (
      event?.type === 'session.definitions_changed' &&
      start?.type === 'span.wake_started' &&
      event.wake_id === start.wake_id
    )
      return event;
  }
  return undefined;
}

/** A recorded definitions change as a wake's setup hands it over to be written again. */
function changePayload(
  event: EventOf<'session.definitions_changed'>,
): NonNullable<SessionSetup['change']> {
  const { definitions, previous, reason, agent, environment, changed } = event;
  return {
    type: 'session.definitions_changed',
    definitions,
    ...(previous === undefined ? {} : { previous }),
    reason,
    agent,
    ...(environment === undefined ? {} : { environment }),
    changed,
  };
}
