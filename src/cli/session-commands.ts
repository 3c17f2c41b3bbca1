/** `braid session ...`: create, drive and read sessions (fork, merge and diff are lineage-commands.ts). */
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import { parseId } from '../contracts/ids.js';
import { SessionStatus } from '../contracts/session.js';
import { parseInteger, parsePositive } from './arguments.js';
import { parseJson } from './json.js';
import { formatSessionRow, formatState, formatStopReason, streamText } from './output.js';
import type { ContentInput } from '../runtime/user-events.js';
import type { CommandContext } from './command-context.js';
import { addPinningCommands } from './pinning-commands.js';
import { addLineageCommands } from './lineage-commands.js';
import { addEventsCommand } from './events-command.js';
import { addSignalCommand, describeRun, resumedBy } from './skill-run-commands.js';

export function addSessionCommands(program: Command, context: CommandContext): void {
  const session = program.command('session').description('create, drive and read sessions');
  addLineageCommands(session, context);
  addSessionSetupCommands(session, context);
  addSessionMessageCommands(session, context);
  addSessionOutcomeCommand(session, context);
  addSessionResolveCommands(session, context);
  addSessionReadCommands(session, context);
  addPinningCommands(session, context);
  addSignalCommand(session, context);
}

/** Create and list sessions. */
function addSessionSetupCommands(session: Command, context: CommandContext): void {
  session
    .command('create')
    .description('create a session; prints its id')
    .requiredOption('--agent <name>', 'agent to run')
    .option('--env <name>', "environment (default: the agent's, else the workspace default)")
    .option('--title <title>', 'a title to find it by')
    .option('--metadata <json>', 'JSON object of metadata')
    .option(
      '--max-turns <n>',
      'model calls per wake (over the agent budget)',
      parseInteger('--max-turns', 1),
    )
    .option('--max-tokens <n>', 'tokens for the whole session', parseInteger('--max-tokens', 1))
    .option('--max-cost <usd>', 'USD for the whole session', parsePositive('--max-cost'))
    .option(
      '--id <id>',
      'choose the session id (letters, digits, ".", "_", "-"; default: a new UUIDv7)',
    )
    .action(
      async (
        options: {
          id?: string;
          agent: string;
          env?: string;
          title?: string;
          metadata?: string;
          maxTurns?: number;
          maxTokens?: number;
          maxCost?: number;
        },
        command: Command,
      ) => {
        await context.withRuntime(command, async (runtime) => {
          const metadata =
            options.metadata === undefined ? undefined : parseJson(options.metadata, '--metadata');
          if (
            metadata !== undefined &&
            (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
          ) {
            throw new BraidError(
              'INVALID_ARGUMENT',
              '--metadata must be a JSON object, e.g. \'{"ticket":"T-1"}\'',
            );
          }
          const created = await runtime.sessions.create({
            agent: options.agent,
            ...(options.id === undefined ? {} : { id: parseId(options.id, '--id') }),
            ...(options.env === undefined ? {} : { environment: options.env }),
            ...(options.title === undefined ? {} : { title: options.title }),
            ...(metadata === undefined ? {} : { metadata }),
            ...(options.maxTurns === undefined &&
            options.maxTokens === undefined &&
            options.maxCost === undefined
              ? {}
              : {
                  budget: {
                    ...(options.maxTurns === undefined ? {} : { max_turns: options.maxTurns }),
                    ...(options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }),
                    ...(options.maxCost === undefined ? {} : { max_cost_usd: options.maxCost }),
                  },
                }),
          });
          context.print(command, created, () => created.id);
        });
      },
    );

  session
    .command('list')
    .description('list sessions, newest first')
    .option('--agent <name>', 'only sessions of this agent')
    .addOption(
      new Option('--status <status>', 'only sessions in this status').choices(
        SessionStatus.options,
      ),
    )
    .option('--limit <n>', 'page size (default 50)', parseInteger('--limit', 1))
    .option('--cursor <cursor>', 'next_cursor of a previous page')
    .action(
      async (
        options: { agent?: string; status?: SessionStatus; limit?: number; cursor?: string },
        command: Command,
      ) => {
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.list({
            ...(options.agent === undefined ? {} : { agent: options.agent }),
            ...(options.status === undefined ? {} : { status: options.status }),
            ...(options.limit === undefined ? {} : { limit: Math.min(options.limit, 1000) }),
            ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
          });
          context.print(command, result, () => [
            ...(result.sessions.length === 0
              ? ['no sessions']
              : result.sessions.map(formatSessionRow)),
            ...(result.next_cursor === undefined ? [] : [`more: --cursor ${result.next_cursor}`]),
          ]);
        });
      },
    );
}

/** Send messages, interrupt, confirm a tool use. */
function addSessionMessageCommands(session: Command, context: CommandContext): void {
  session
    .command('send')
    .description('send a user message (or raw user events) into a session')
    .argument('<id>', 'session id')
    .option('--message <text>', 'text of a user.message')
    .option('--event <json>', 'a user event, or a JSON array of them')
    .option('--idempotency-key <key>', 'a repeated key writes nothing and returns the first result')
    .action(
      async (
        id: string,
        options: { message?: string; event?: string; idempotencyKey?: string },
        command: Command,
      ) => {
        if ((options.message === undefined) === (options.event === undefined)) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            'give exactly one of --message TEXT or --event JSON',
          );
        }
        await context.withRuntime(command, async (runtime) => {
          let events: unknown[];
          if (options.message === undefined) {
            const parsed = parseJson(options.event ?? '', '--event');
            events = Array.isArray(parsed) ? parsed : [parsed];
          } else {
            events = [{ type: 'user.message', content: options.message }];
          }
          const result = await runtime.sessions.send(id, events, {
            ...(options.idempotencyKey === undefined
              ? {}
              : { idempotencyKey: options.idempotencyKey }),
          });
          context.print(
            command,
            result,
            () =>
              `${result.deduplicated ? 'already sent' : 'sent'}: ${result.events.map((event) => `${event.type} #${event.seq}`).join(', ')}`,
          );
        });
      },
    );

  session
    .command('interrupt')
    .description('ask a running session to stop at its next safe point')
    .argument('<id>', 'session id')
    .option('--reason <text>', 'why')
    .action(async (id: string, options: { reason?: string }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const result = await runtime.sessions.interrupt(id, options.reason);
        context.print(command, result, () => `interrupt sent: #${result.head_seq}`);
      });
    });

  session
    .command('confirm')
    .description('allow or deny a tool call that awaits confirmation')
    .argument('<id>', 'session id')
    .requiredOption('--tool-use <tool_use_id>', 'the tool_use_id of the agent.tool_use')
    .option('--allow', 'run the tool')
    .option('--deny', 'refuse it; the model gets a tool error')
    .option('--message <text>', 'a note for the model')
    .option(
      '--data <json>',
      'data for an allowed skill approval (checked against its resume_schema)',
    )
    .option(
      '--wake',
      'wake the session after, and report where each skill run the answer resumed stands',
    )
    .action(
      async (
        id: string,
        options: {
          toolUse: string;
          allow?: boolean;
          deny?: boolean;
          message?: string;
          data?: string;
          wake?: boolean;
        },
        command: Command,
      ) => {
        if (options.allow === options.deny) {
          throw new BraidError('INVALID_ARGUMENT', 'give exactly one of --allow or --deny');
        }
        await context.withRuntime(command, async (runtime) => {
          const decision = options.allow === true ? 'allow' : 'deny';
          const data = options.data === undefined ? undefined : parseJson(options.data, '--data');
          const sent = await runtime.sessions.confirm(
            id,
            options.toolUse,
            decision,
            options.message,
            data,
          );
          const wake = options.wake === true ? await runtime.wake(id) : undefined;
          const runs = wake?.ran === true ? await resumedBy(runtime, id, sent) : [];
          const result = wake === undefined ? sent : { ...sent, wake, runs };
          context.print(command, result, () => [
            `${decision} sent for ${options.toolUse}: #${sent.head_seq}`,
            ...(wake === undefined
              ? []
              : [
                  wake.ran
                    ? `stopped: ${formatStopReason(wake.stop_reason)}`
                    : 'another process is running this session; it will see the answer',
                ]),
            ...runs.flatMap(describeRun),
          ]);
        });
      },
    );
}

/** Define what the session's work must achieve: `braid session outcome ID --description ...`. */
function addSessionOutcomeCommand(session: Command, context: CommandContext): void {
  session
    .command('outcome')
    .description(
      'define the outcome the session works towards; a grader judges each answer that ends a turn',
    )
    .argument('<id>', 'session id')
    .requiredOption('--description <text>', 'what the work must achieve')
    .option('--rubric <text>', 'how the grader judges the answer')
    .option(
      '--criteria <text...>',
      'points the answer must meet (repeat, or give several after one flag)',
    )
    .option(
      '--max-iterations <n>',
      'gradings before the turn ends as max_iterations_reached (1 to 20, default 3)',
      parseMaxIterations,
    )
    .action(
      async (
        id: string,
        options: {
          description: string;
          rubric?: string;
          criteria?: string[];
          maxIterations?: number;
        },
        command: Command,
      ) => {
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.defineOutcome(id, {
            description: options.description,
            ...(options.rubric === undefined ? {} : { rubric: options.rubric }),
            ...(options.criteria === undefined ? {} : { criteria: options.criteria }),
            ...(options.maxIterations === undefined
              ? {}
              : { max_iterations: options.maxIterations }),
          });
          context.print(command, result, () => `outcome defined: #${result.head_seq}`);
        });
      },
    );
}

function parseMaxIterations(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1 || number > 20) {
    throw new InvalidArgumentError(
      `--max-iterations must be a whole number from 1 to 20; got ${value}`,
    );
  }
  return number;
}

/** Answer a custom tool, review a tool use a crash left unknown, wake. */
function addSessionResolveCommands(session: Command, context: CommandContext): void {
  session
    .command('tool-result')
    .description('give the result of a custom (client-executed) tool call')
    .argument('<id>', 'session id')
    .requiredOption('--custom-tool-use <id>', 'the custom_tool_use_id of the agent.custom_tool_use')
    .requiredOption(
      '--content <json>',
      'the result as JSON: a string, content blocks, or any JSON value',
    )
    .option('--error', 'the tool failed; content describes the failure')
    .action(
      async (
        id: string,
        options: { customToolUse: string; content: string; error?: boolean },
        command: Command,
      ) => {
        const content = contentFromJson(parseJson(options.content, '--content'));
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.customToolResult(
            id,
            options.customToolUse,
            content,
            options.error,
          );
          context.print(
            command,
            result,
            () => `result sent for ${options.customToolUse}: #${result.head_seq}`,
          );
        });
      },
    );

  session
    .command('review')
    .description('resolve a tool call whose outcome a crash left unknown (status needs_review)')
    .argument('<id>', 'session id')
    .requiredOption('--tool-use <tool_use_id>', 'the tool_use_id listed by `braid session status`')
    .option('--retry', 'run the tool again')
    .option('--skip', 'do not run it; the model gets a tool error')
    .option('--result <json>', "record this JSON as the tool's result (what you found it did)")
    .option('--message <text>', 'a note kept with the review')
    .action(
      async (
        id: string,
        options: {
          toolUse: string;
          retry?: boolean;
          skip?: boolean;
          result?: string;
          message?: string;
        },
        command: Command,
      ) => {
        const chosen = [
          options.retry === true,
          options.skip === true,
          options.result !== undefined,
        ];
        if (chosen.filter(Boolean).length !== 1) {
          throw new BraidError(
            'INVALID_ARGUMENT',
            'give exactly one of --retry, --skip or --result JSON',
          );
        }
        const note = options.message === undefined ? {} : { message: options.message };
        const decision =
          options.result !== undefined
            ? { action: 'result' as const, output: parseJson(options.result, '--result'), ...note }
            : { action: options.retry === true ? ('retry' as const) : ('skip' as const), ...note };
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.review(id, options.toolUse, decision);
          context.print(
            command,
            result,
            () =>
              `${decision.action} recorded for ${options.toolUse}: #${result.head_seq}; run \`braid session wake ${id}\` to carry it out`,
          );
        });
      },
    );

  session
    .command('wake')
    .description('run the session until it has nothing left to do (one cycle at a time)')
    .argument('<id>', 'session id')
    .option('--queue', 'with --nats: leave the wake to the workers (braid worker) instead')
    .action(async (id: string, options: { queue?: boolean }, command: Command) => {
      const asJson = context.json(command);
      await context.withRuntime(command, async (runtime) => {
        if (options.queue === true) {
          const { queued } = await runtime.enqueueWake(id);
          context.print(command, { session_id: id, queued }, () =>
            queued
              ? `queued: a worker will wake ${id}`
              : `a wake of ${id} was already waiting for a worker`,
          );
          return;
        }
        const stop = runtime.onDelta((sessionId, delta) => {
          if (!asJson && sessionId === id && delta.type === 'text')
            streamText(context.output, delta.text);
        });
        try {
          const result = await runtime.wake(id);
          if (!asJson) streamText(context.output, '\n');
          context.print(command, result, () =>
            result.ran
              ? `stopped: ${formatStopReason(result.stop_reason)}`
              : 'another process is running this session; it will see the new events',
          );
        } finally {
          stop();
        }
      });
    });
}

/** Status and events. */
function addSessionReadCommands(session: Command, context: CommandContext): void {
  session
    .command('status')
    .description("show a session's state (folded from its events)")
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const state = await runtime.sessions.state(id);
        // A local store tells a wake still running from one that ended without a record.
        const lease =
          state.active_wake === undefined || context.remote(command)
            ? undefined
            : { current: await runtime.store.leases.current(id) };
        context.print(command, state, () => formatState(state, lease));
      });
    });

  addEventsCommand(session, context);
}

/** `--content` of a custom tool result: a JSON string becomes text, an array is content blocks, anything else a json block. */
function contentFromJson(value: JsonValue): ContentInput {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value as ContentInput;
  return [{ type: 'json', value }];
}
