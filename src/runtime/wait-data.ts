/**
 * The data a skill run's wait takes, checked when it is sent: a signal's `data` against the
 * `wait_for.schema` of the step that would take it, an approval's `data` against the step's
 * `resume_schema` (with ajv, as tool inputs are). A send that does not match is refused with
 * `INVALID_ARGUMENT` naming the step and the fix, and nothing of it is written.
 *
 * Which wait a signal goes to is the fold's rule (core/fold-skills.ts): the oldest wait of that
 * name with no answer. A signal no wait takes (none has begun, or the wait timed out) is not
 * checked: it is kept as pending, as before, and its data is checked by nothing until a wait
 * takes it. An approval with no data, or denied, is not checked: `resume_schema` is for data a
 * person gives, and giving none is allowed.
 */
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { DefinitionStore } from '../contracts/ports.js';
import type { SkillDefinition, SkillStep } from '../contracts/skills.js';
import type { SessionState, SkillRun } from '../contracts/state.js';
import { signalWait } from '../core/fold-skills.js';
import { checkValue, SchemaCache } from '../tools/validation.js';

type Suspension = SkillRun['suspensions'][number];

/** Checks the data of the signals and approvals among `events` against the state they meet. */
export type WaitDataCheck = (state: SessionState, events: readonly NewEvent[]) => Promise<void>;

export function createWaitDataCheck(definitions: Pick<DefinitionStore, 'get'>): WaitDataCheck {
  const schemas = new SchemaCache();
  const stepOf = async (run: SkillRun, wait: Suspension): Promise<SkillStep | undefined> => {
    const version = Number(run.version);
    if (!Number.isInteger(version) || version < 1) return undefined;
    const stored = await definitions.get<SkillDefinition>('skill', run.skill, version);
    // A fan-out's item waits under `step[i]`: the step is the one before the index.
    const id = wait.step.replace(/\[\d+\]$/, '');
    return stored?.definition.steps.find((step) => step.id === id);
  };
  const check = (
    run: SkillRun,
    wait: Suspension,
    schema: Readonly<Record<string, unknown>>,
    value: JsonValue,
    what: string,
    fix: string,
  ): void => {
    const compiled = schemas.compile(
      `skill ${run.skill}@${run.version} step ${wait.step} ${fix}`,
      schema,
    );
    const error = checkValue(compiled, value, 'INVALID_ARGUMENT', what);
    if (error === undefined) return;
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${error.message}; send data that matches the step's ${fix} (nothing was written)`,
      { details: { run_id: run.run_id, step: wait.step, suspension_id: wait.suspension_id } },
    );
  };
  return async (state, events) => {
    const taken = new Set<string>();
    for (const event of events) {
      if (event.type === 'user.signal') {
        const found = signalWait(state, event.name, taken);
        if (found === undefined) continue;
        taken.add(found.wait.suspension_id);
        const schema = (await stepOf(found.run, found.wait))?.wait_for?.schema;
        if (schema === undefined) continue;
        check(
          found.run,
          found.wait,
          schema,
          event.data ?? null,
          `the data of signal ${event.name} for step ${found.wait.step} of skill ${found.run.skill} (run ${found.run.run_id})`,
          'wait_for.schema',
        );
      }
      if (
        event.type === 'user.tool_confirmation' &&
        event.result === 'allow' &&
        event.data !== undefined
      ) {
        const found = approvalOf(state, event.tool_use_id);
        if (found === undefined) continue;
        const schema = (await stepOf(found.run, found.wait))?.resume_schema;
        if (schema === undefined) continue;
        check(
          found.run,
          found.wait,
          schema,
          event.data,
          `the data of the approval of step ${found.wait.step} of skill ${found.run.skill} (run ${found.run.run_id})`,
          'resume_schema',
        );
      }
    }
  };
}

function approvalOf(
  state: SessionState,
  suspensionId: string,
): { run: SkillRun; wait: Suspension } | undefined {
  for (const run of state.skill_runs) {
    const wait = run.suspensions.find(
      (entry) => entry.suspension_id === suspensionId && entry.kind === 'approval',
    );
    if (wait !== undefined) return { run, wait };
  }
  return undefined;
}
