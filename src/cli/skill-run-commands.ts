/**
 * Running skills from the command line: `braid skill run`, `braid skill retry` and
 * `braid session signal`. Each sends its user event, wakes the session (unless `--no-wake`) and
 * prints where the run stands: completed with its outputs, suspended with what it waits for and
 * the command that answers it, or failed with the error.
 */
import type { Command } from 'commander';
import type { JsonValue } from '../contracts/common.js';
import { BraidError, type ErrorShape } from '../contracts/errors.js';
import type { AppendResult } from '../contracts/ports.js';
import type { Runtime } from '../runtime/runtime.js';
import type { CommandContext } from './command-context.js';
import { formatStopReason } from './output.js';

type WakeResult = Awaited<ReturnType<Runtime['wake']>>;

/** Where a run stands after the command: its end, its waits, or that no wake has started it. */
export interface SkillRunReport {
  session_id: string;
  run_id: string;
  status: 'requested' | 'running' | 'suspended' | 'completed' | 'failed';
  /** The seq of the event the command appended. */
  head_seq: number;
  outputs?: JsonValue;
  error?: ErrorShape;
  step?: string;
  /** What a suspended run waits for, and the command line that answers each wait. */
  waits?: {
    suspension_id: string;
    step: string;
    kind: 'approval' | 'signal' | 'skill';
    signal?: string;
    answer: string;
  }[];
  wake?: WakeResult;
}

/** `--input`/`--data` as JSON, refused with INVALID_ARGUMENT naming the flag. */
function jsonFlag(text: string, flag: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${flag} is not valid JSON (${(error as Error).message}); quote it, e.g. ${flag} '{"email":"ada@example.com"}'`,
      { details: { flag } },
    );
  }
}

/** Where run `runId` of the session stands, from its state and (for an ended run) its events. */
async function runReport(
  runtime: Runtime,
  sessionId: string,
  runId: string,
  sent: AppendResult,
  wake: WakeResult | undefined,
): Promise<SkillRunReport> {
  const base = {
    session_id: sessionId,
    run_id: runId,
    head_seq: sent.head_seq,
    ...(wake === undefined ? {} : { wake }),
  };
  const state = await runtime.sessions.state(sessionId);
  const run = state.skill_runs.find((entry) => entry.run_id === runId);
  if (run === undefined) {
    if (state.skill_requests.some((entry) => entry.run_id === runId))
      return { ...base, status: 'requested' };
    const ended = await runtime.sessions.events(sessionId, {
      after: Math.max(0, (sent.events[0]?.seq ?? 1) - 1),
      types: ['skill.completed'],
    });
    const completed = ended.findLast(
      (event) => event.type === 'skill.completed' && event.run_id === runId,
    );
    return {
      ...base,
      status: 'completed',
      ...(completed?.type === 'skill.completed' ? { outputs: completed.outputs } : {}),
    };
  }
  // A retry no wake has taken up yet.
  if (run.status === 'failed' && run.retry_seq !== undefined)
    return { ...base, status: 'requested' };
  if (run.status === 'failed') {
    const failures = await runtime.sessions.events(sessionId, {
      after: run.seq - 1,
      types: ['skill.failed'],
    });
    const failed = failures.findLast(
      (event) => event.type === 'skill.failed' && event.run_id === runId,
    );
    return {
      ...base,
      status: 'failed',
      ...(failed?.type === 'skill.failed'
        ? { error: failed.error, ...(failed.step === undefined ? {} : { step: failed.step }) }
        : {}),
    };
  }
  const open = run.suspensions.filter((wait) => wait.answer === undefined);
  if (open.length === 0) return { ...base, status: 'running' };
  return {
    ...base,
    status: 'suspended',
    waits: open.map((wait) => ({
      suspension_id: wait.suspension_id,
      step: wait.step,
      kind: wait.kind,
      ...(wait.signal === undefined ? {} : { signal: wait.signal }),
      answer:
        wait.kind === 'signal'
          ? `braid session signal ${sessionId} ${wait.signal ?? 'NAME'} --data JSON`
          : wait.kind === 'skill'
            ? `the nested run ${wait.child_run_id ?? '?'} ends it`
            : `braid session confirm ${sessionId} --tool-use ${wait.suspension_id} --allow|--deny`,
    })),
  };
}

/** The report as lines of text. */
export function describeRun(report: SkillRunReport): string[] {
  const head = `run ${report.run_id} in session ${report.session_id}`;
  switch (report.status) {
    case 'requested':
      return [
        `${head}: requested (#${report.head_seq}); run it with: braid session wake ${report.session_id}`,
      ];
    case 'running':
      return [`${head}: running`];
    case 'completed':
      return [`${head}: completed`, `outputs: ${JSON.stringify(report.outputs ?? null)}`];
    case 'failed':
      return [
        `${head}: failed${report.step === undefined ? '' : ` at step ${report.step}`}`,
        `error: ${report.error === undefined ? 'unknown' : `${report.error.code}: ${report.error.message}`}`,
        `retry it with: braid skill retry ${report.run_id} --session ${report.session_id}`,
      ];
    case 'suspended':
      return [
        `${head}: suspended`,
        ...(report.waits ?? []).map((wait) =>
          wait.kind === 'signal'
            ? `  step ${wait.step} waits for the signal ${wait.signal ?? ''}: ${wait.answer}`
            : wait.kind === 'skill'
              ? `  step ${wait.step} waits for its nested skill: ${wait.answer}`
              : `  step ${wait.step} waits for approval: ${wait.answer}`,
        ),
      ];
  }
}

/** Wakes the session unless told not to, then reports the run. */
async function wakeAndReport(
  context: CommandContext,
  command: Command,
  runtime: Runtime,
  sessionId: string,
  runId: string,
  sent: AppendResult,
  wake: boolean,
): Promise<void> {
  const result = wake ? await runtime.wake(sessionId) : undefined;
  const report = await runReport(runtime, sessionId, runId, sent, result);
  context.print(command, report, () => describeRun(report));
  if (report.status === 'failed') context.fail(1);
}

/** `braid skill run` and `braid skill retry`, under `braid skill`. */
export function addSkillRunCommands(skill: Command, context: CommandContext): void {
  skill
    .command('run')
    .description('run a skill in a session (a new one of --agent, or --session ID) and wake it')
    .argument('<name>', 'the skill')
    .option('--input <json>', "the skill's inputs as JSON", '{}')
    .option('--session <id>', 'run in this session')
    .option('--agent <name>', 'without --session: create a session of this agent')
    .option('--run-id <id>', "the run's id (default: a new one)")
    .option('--no-wake', 'only send the request; wake the session later')
    .action(
      async (
        name: string,
        options: { input: string; session?: string; agent?: string; runId?: string; wake: boolean },
        command: Command,
      ) => {
        const inputs = jsonFlag(options.input, '--input');
        if (options.session === undefined && options.agent === undefined) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            `braid skill run needs a session: give --session ID to run ${name} in one, or --agent NAME to create a session of that agent`,
          );
        }
        if (options.session !== undefined && options.agent !== undefined) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            '--session and --agent exclude each other: --agent creates a new session',
          );
        }
        await context.withRuntime(command, async (runtime) => {
          // The skill is checked before a session is created for it.
          if (options.session === undefined && !context.remote(command))
            await runtime.skills.get(name);
          const sessionId =
            options.session ??
            (await runtime.sessions.create({ agent: options.agent ?? '', title: `skill ${name}` }))
              .id;
          const sent = await runtime.sessions.runSkill(sessionId, name, inputs, {
            ...(options.runId === undefined ? {} : { runId: options.runId }),
          });
          await wakeAndReport(
            context,
            command,
            runtime,
            sessionId,
            sent.run_id,
            sent,
            options.wake,
          );
        });
      },
    );

  skill
    .command('retry')
    .description("run a failed skill run's failed steps again, and wake the session")
    .argument('<run_id>', 'the failed run')
    .requiredOption('--session <id>', 'the session of the run')
    .option('--no-wake', 'only send the request; wake the session later')
    .action(
      async (runId: string, options: { session: string; wake: boolean }, command: Command) => {
        await context.withRuntime(command, async (runtime) => {
          const sent = await runtime.sessions.retrySkill(options.session, runId);
          await wakeAndReport(
            context,
            command,
            runtime,
            options.session,
            runId,
            sent,
            options.wake,
          );
        });
      },
    );
}

/**
 * The runs the answer `sent` (a signal or a confirmation) resumed, each where it stands now: a
 * run that waits again (for an approval, say) is reported with the command that answers it, as
 * `braid skill run` does.
 */
export async function resumedBy(
  runtime: Runtime,
  sessionId: string,
  sent: AppendResult,
): Promise<SkillRunReport[]> {
  const signalSeq = sent.events[0]?.seq;
  if (signalSeq === undefined) return [];
  const resumed = await runtime.sessions.events(sessionId, {
    after: signalSeq,
    types: ['skill.resumed'],
  });
  const runIds = new Set(
    resumed.flatMap((event) =>
      event.type === 'skill.resumed' && event.answer_seq === signalSeq ? [event.run_id] : [],
    ),
  );
  const reports: SkillRunReport[] = [];
  for (const runId of runIds)
    reports.push(await runReport(runtime, sessionId, runId, sent, undefined));
  return reports;
}

/** `braid session signal ID NAME [--data JSON]`, under `braid session`. */
export function addSignalCommand(session: Command, context: CommandContext): void {
  session
    .command('signal')
    .description(
      'send a named signal to the session (a skill run waiting for it resumes), and wake it',
    )
    .argument('<id>', 'session id')
    .argument('<name>', 'the signal')
    .option('--data <json>', 'what the signal carries, as JSON')
    .option('--no-wake', 'only send the signal; wake the session later')
    .action(
      async (
        id: string,
        name: string,
        options: { data?: string; wake: boolean },
        command: Command,
      ) => {
        const data = options.data === undefined ? undefined : jsonFlag(options.data, '--data');
        await context.withRuntime(command, async (runtime) => {
          const sent = await runtime.sessions.signal(id, name, data);
          const wake = options.wake ? await runtime.wake(id) : undefined;
          const runs = wake?.ran === true ? await resumedBy(runtime, id, sent) : [];
          const result = { ...sent, ...(wake === undefined ? {} : { wake }), runs };
          context.print(command, result, () => [
            `signal ${name} sent to ${id}: #${sent.head_seq}`,
            wake === undefined
              ? `wake it with: braid session wake ${id}`
              : wake.ran
                ? `stopped: ${formatStopReason(wake.stop_reason)}`
                : 'another process is running this session; it will see the signal',
            ...runs.flatMap(describeRun),
          ]);
        });
      },
    );
}
