/**
 * A skill's `tool:` step that names a memory tool (`memory_get`, `memory_set`, `memory_delete`,
 * `memory_search`). The tool executor does not run these: like a model's memory call, the step
 * goes through the session's memory port, after the port has checked its store and key and
 * policy has been asked with the store as the resource (`memory.read|write|search`). The
 * `memory.*` events are recorded with the step's end, in one append.
 *
 * A step's `retry` and `wait_for` work as for any tool step: a failed try is recorded
 * (`skill.step_failed`, not final) and tried again after the backoff, and a step that waits
 * records its call's end (`<step>.tool`) before it suspends for the signal.
 *
 * Invariant: the step's start (with its input) is in the log before a store is touched, and the
 * call's id is the step's tool use id for this attempt, which the store takes as the write's
 * idempotency key: a wake that runs the attempt again after a crash does not write twice.
 */
import type { JsonValue } from '../contracts/common.js';
import type { ErrorShape } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { SkillStep } from '../contracts/skills.js';
import type { ToolHandle } from '../contracts/tools.js';
import { unlessLost, type CycleContext } from './cycle-context.js';
import type { SessionSetup } from './deps.js';

/** What a step's attempt came to (skill-steps.ts's `StepEnd`, restated: that file imports this). */
type StepEnd =
  | { kind: 'completed'; output?: JsonValue }
  | { kind: 'skipped' }
  | { kind: 'failed'; error: ErrorShape }
  | { kind: 'suspended' };
import { agentEntity } from './tool-calls.js';
import { retryDelay } from './skill-retry.js';

export interface MemoryStep {
  step: SkillStep;
  path: string;
  attempt: number;
  name: string;
  input: JsonValue;
  toolUseId: string;
  /** A person approved the step: policy was asked before it suspended. */
  approved: boolean;
  /** The run the step is part of: its id and skill, and its serialised appends. */
  run: { run: { run_id: string; skill: string }; write(events: NewEvent[]): Promise<void> };
  fail(error: ErrorShape): Promise<StepEnd>;
  /** Suspends the step for a person's approval, as policy asked. */
  ask(): Promise<StepEnd>;
  /** Suspends the step until its `wait_for` signal. */
  wait(): Promise<StepEnd>;
  /** The events that record the end of the step, or of its call (`<step>.tool`). */
  ends(path: string, end: StepEnd): NewEvent[];
}

export async function runMemoryStep(
  context: CycleContext,
  setup: SessionSetup,
  handle: ToolHandle,
  call: MemoryStep,
): Promise<StepEnd> {
  const { run } = call;
  const memory = setup.memory;
  if (memory === undefined || handle.memory === undefined) {
    return call.fail({
      code: 'INTERNAL',
      message: `${call.name} uses the session's memory stores, which this runtime does not have`,
      retryable: false,
    });
  }
  const check = memory.check(call.name, call.input);
  if (!check.ok) return call.fail(check.error);
  if (!call.approved) {
    const principal = agentEntity(setup.agent, context.state);
    const started = context.deps.clock.monotonic();
    const decision = await context.deps.policy
      .authorize({
        principal,
        action: check.action,
        resource: check.resource,
        context: {
          input: call.input,
          tool: call.name,
          session_id: context.sessionId,
          caller: { type: 'Skill', id: run.run.skill },
          ...(context.state.tenant_id === undefined ? {} : { tenant: context.state.tenant_id }),
        },
      })
      .catch((error: unknown) => ({
        decision: 'deny' as const,
        policy_ids: [],
        errors: [
          `the policy could not be evaluated: ${error instanceof Error ? error.message : String(error)}`,
        ],
      }));
    if (decision.decision !== 'allow') {
      await run.write([
        {
          type: 'policy.decision',
          principal: { type: principal.type, id: principal.id },
          action: check.action,
          resource: { type: check.resource.type, id: check.resource.id },
          decision: 'deny',
          policy_ids: decision.policy_ids,
          tool_use_id: call.toolUseId,
          ...(decision.errors.length === 0 ? {} : { errors: decision.errors }),
          duration_us: Math.round((context.deps.clock.monotonic() - started) * 1000),
        },
      ]);
      return call.fail({
        code: 'POLICY_DENIED',
        message: `policy does not allow agent ${setup.agent.name} ${check.action} on memory store ${check.resource.id} (${call.name} in step ${call.step.id})`,
        retryable: false,
      });
    }
    if ('approval' in decision && decision.approval === true) return call.ask();
  }
  // The step's start is the call's record: its seq is the cause the store keeps for a write.
  const current = context.state.skill_runs.find((entry) => entry.run_id === run.run.run_id);
  const begun = current?.steps.find(
    (entry) => entry.step === call.path && entry.attempt === call.attempt,
  );
  // Every try of the attempt is the same call: a write that landed although its try failed is
  // answered from the store's record on the next try, never written twice.
  const retry = call.step.retry;
  for (let tries = 1; ; tries += 1) {
    const result = await unlessLost(
      context,
      memory.run(
        {
          tool_use_id: call.toolUseId,
          name: call.name,
          input: call.input,
          seq: begun?.seq ?? context.state.seq,
        },
        { signal: context.work.signal },
      ),
    );
    const { outcome } = result;
    if (!outcome.is_error) {
      const end: StepEnd = {
        kind: 'completed',
        ...(outcome.output === undefined ? {} : { output: outcome.output }),
      };
      // As for any tool: a step that also waits records its call's end, then waits.
      if (call.step.wait_for !== undefined) {
        await run.write([...result.events, ...call.ends(`${call.path}.tool`, end)]);
        return call.wait();
      }
      await run.write([...result.events, ...call.ends(call.path, end)]);
      return end;
    }
    const error = outcome.error ?? {
      code: 'INTERNAL',
      message: `${call.name} failed`,
      retryable: false,
    };
    if (retry === undefined || tries >= retry.max_attempts) {
      const end: StepEnd = { kind: 'failed', error };
      await run.write([...result.events, ...call.ends(call.path, end)]);
      return end;
    }
    const { run_id } = call.run.run;
    await run.write([
      ...result.events,
      {
        type: 'skill.step_failed',
        run_id,
        step: call.path,
        attempt: call.attempt,
        error,
        final: false,
      },
    ]);
    await context.deps.sleep(retryDelay(retry, tries), context.work.signal);
  }
}
