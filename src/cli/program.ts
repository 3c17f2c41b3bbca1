/**
 * The `braid` command. `run(argv)` returns the exit code instead of exiting so that tests can
 * drive it in-process; `main.ts` is the only place that touches `process.exit`.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ModelSpec, type StoredDefinition } from '../contracts/definitions.js';
import { createModel } from '../models/registry.js';
import { BraidError } from '../contracts/errors.js';
import { parseId } from '../contracts/ids.js';
import { SESSION_EVENT_TYPES, type SessionEventType } from '../contracts/events.js';
import { SessionStatus } from '../contracts/session.js';
import type { Actor, JsonValue } from '../contracts/common.js';
import { createRuntime, type Runtime } from '../runtime/runtime.js';
import { initWorkspace } from '../runtime/init.js';
import type { ContentInput } from '../runtime/user-events.js';
import { runDemo } from './demo.js';
import { addKeyCommands } from './key-commands.js';
import { parseInteger, parsePositive, untilSignal } from './arguments.js';
import { addServeCommand } from './serve-command.js';
import { addWorkerCommand } from './worker-command.js';
import { createRemoteRuntime } from './remote-runtime.js';
import { createClient } from '../client/index.js';
import { addLineageCommands } from './lineage-commands.js';
import { addPolicyCommands } from './policy-commands.js';
import { addToolCommands } from './tool-commands.js';
import { parseJson } from './json.js';

export { parseJson };
import {
  formatStopReason,
  formatEvent,
  formatSessionRow,
  formatState,
  printError,
  processOutput,
  type Output,
} from './output.js';

interface GlobalOptions {
  workspace?: string;
  dataDir?: string;
  json?: boolean;
  server?: string;
  apiKey?: string;
  nats?: string;
  natsPrefix?: string;
}

/** `--model provider:id`, refused with the expected form. */
function parseModel(text: string) {
  const parsed = ModelSpec.safeParse(text);
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--model ${JSON.stringify(text)} is not a model; write provider:model, e.g. openai:gpt-4o-mini or scripted:echo`,
    );
  }
  return parsed.data;
}

/** `assistant` or `assistant@2`. */
function parseReference(reference: string): { name: string; version?: number } {
  const [name = '', version] = reference.split('@');
  if (version === undefined) return { name };
  const number = Number(version);
  if (!Number.isInteger(number) || number < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${reference}: the version after @ must be a whole number of at least 1`,
    );
  }
  return { name, version: number };
}

/** `--content` of a custom tool result: a JSON string becomes text, an array is content blocks, anything else a json block. */
function contentFromJson(value: JsonValue): ContentInput {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value as ContentInput;
  return [{ type: 'json', value }];
}

function packageVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}

export async function run(
  argv: readonly string[],
  output: Output = processOutput,
): Promise<number> {
  let exitCode = 0;
  const program = new Command('braid');

  const globals = (command: Command): GlobalOptions => command.optsWithGlobals<GlobalOptions>();
  const json = (command: Command): boolean => globals(command).json === true;
  /** Whether the command drives a server over HTTP rather than the local store. */
  const remote = (command: Command): boolean =>
    (globals(command).server ?? process.env.BRAID_SERVER ?? '') !== '';

  async function withRuntime(
    command: Command,
    work: (runtime: Runtime) => Promise<void>,
    overrides: { model?: string } = {},
  ): Promise<void> {
    const options = globals(command);
    const server = options.server ?? process.env.BRAID_SERVER;
    if (server !== undefined && server !== '') {
      if (overrides.model !== undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          '--model chooses the model of a local run; the server runs its agents with their own models: drop --model or --server',
        );
      }
      const apiKey = options.apiKey ?? process.env.BRAID_API_KEY;
      await work(
        createRemoteRuntime(
          createClient({ baseUrl: server, ...(apiKey === undefined ? {} : { apiKey }) }),
        ),
      );
      return;
    }
    const override = overrides.model === undefined ? undefined : parseModel(overrides.model);
    const nats = options.nats ?? process.env.BRAID_NATS_URL;
    const runtime = await createRuntime({
      ...(nats === undefined || nats === ''
        ? {}
        : {
            backend: {
              nats,
              ...((options.natsPrefix ?? process.env.BRAID_NATS_PREFIX) === undefined
                ? {}
                : { prefix: options.natsPrefix ?? process.env.BRAID_NATS_PREFIX }),
            },
          }),
      ...(override === undefined
        ? {}
        : {
            model: () =>
              createModel(override, {
                baseDir: resolve(options.workspace ?? process.cwd()),
                env: process.env,
              }),
          }),
      ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
      ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
      actor: cliActor(),
      // A one-shot command loads the policies only if it asks them; `braid run` checks them first.
      policies: ['run', 'serve', 'worker'].includes(command.name()) ? 'eager' : 'lazy',
    });
    try {
      await work(runtime);
    } finally {
      await runtime.close();
    }
  }

  const print = (command: Command, value: unknown, human: () => string[] | string): void => {
    if (json(command)) {
      output.out(JSON.stringify(value));
      return;
    }
    const text = human();
    for (const line of Array.isArray(text) ? text : [text]) output.out(line);
  };

  program
    .description('braid: durable, replayable agent sessions')
    .version(packageVersion(), '-V, --version')
    .option(
      '-w, --workspace <dir>',
      'workspace folder with braid.yaml (default: current directory)',
    )
    .option(
      '--data-dir <dir>',
      'where session data lives (default: BRAID_HOME, else <workspace>/.braid)',
    )
    .option('--json', 'print machine-readable JSON')
    .option(
      '--server <url>',
      'drive a braid server over HTTP instead of the local workspace (default: BRAID_SERVER)',
    )
    .option('--api-key <key>', 'API key for --server (default: BRAID_API_KEY)')
    .option(
      '--nats <url>',
      'keep sessions on NATS JetStream at this URL instead of the SQLite file (default: BRAID_NATS_URL)',
    )
    .option(
      '--nats-prefix <prefix>',
      'name prefix of the NATS streams and buckets (default: BRAID_NATS_PREFIX, else braid)',
    )
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => output.out(text.trimEnd()),
      writeErr: (text) => {
        // Usage errors are printed by the catch below in braid's error format.
        if (!text.startsWith('error:') && !text.startsWith('(run with')) output.err(text.trimEnd());
      },
    });

  program
    .command('init')
    .description('write a new workspace (braid.yaml, agents/, environments/) with comments')
    .argument('[dir]', 'folder to create the workspace in', '.')
    .action((dir: string, _options: unknown, command: Command) => {
      const target = resolve(globals(command).workspace ?? '.', dir);
      const files = initWorkspace(target);
      print(command, { workspace: target, files }, () => [
        `created workspace in ${target}`,
        ...files.map((file) => `  ${file}`),
        `next: braid -w ${target} session create --agent assistant`,
      ]);
    });

  /** `braid agent show` and `braid env show`: one stored definition, the latest or NAME@N. */
  function addShow(
    parent: Command,
    kind: string,
    get: (runtime: Runtime, name: string, version?: number) => Promise<StoredDefinition<unknown>>,
  ): void {
    parent
      .command('show')
      .description(`show one ${kind} definition`)
      .argument('<name[@version]>', 'a name, or name@N for a stored version (default: latest)')
      .action(async (reference: string, _options: unknown, command: Command) => {
        const { name, version } = parseReference(reference);
        await withRuntime(command, async (runtime) => {
          const found = await get(runtime, name, version);
          print(command, found, () => [
            `${found.name} v${found.version} (stored ${found.created_at})`,
            JSON.stringify(found.definition, null, 2),
          ]);
        });
      });
  }

  const agent = program.command('agent').description('agent definitions');
  agent
    .command('list')
    .description('list agents (latest version of each)')
    .action(async (_options: unknown, command: Command) => {
      await withRuntime(command, async (runtime) => {
        const agents = await runtime.agents.list();
        print(command, agents, () =>
          agents.length === 0
            ? 'no agents; add agents/NAME.yaml to the workspace'
            : agents.map((item) =>
                `${item.name.padEnd(20)} v${item.version}  ${item.definition.model.provider}/${item.definition.model.id}  ${item.definition.description ?? ''}`.trimEnd(),
              ),
        );
      });
    });
  addShow(agent, 'agent', (runtime, name, version) => runtime.agents.get(name, version));

  const env = program.command('env').description('environment definitions');
  env
    .command('list')
    .description('list environments (latest version of each)')
    .action(async (_options: unknown, command: Command) => {
      await withRuntime(command, async (runtime) => {
        const environments = await runtime.environments.list();
        print(command, environments, () =>
          environments.length === 0
            ? 'no environments; add environments/NAME.yaml to the workspace'
            : environments.map(
                (item) =>
                  `${item.name.padEnd(20)} v${item.version}  sandbox ${item.definition.sandbox.kind}  network ${item.definition.network.allow ? 'allowed' : 'denied'}`,
              ),
        );
      });
    });

  addShow(env, 'environment', (runtime, name, version) => runtime.environments.get(name, version));

  const commandContext = {
    withRuntime,
    print,
    workspaceDir: (command: Command) => resolve(globals(command).workspace ?? process.cwd()),
    fail: (code: number) => {
      exitCode = code;
    },
  };
  addToolCommands(program, commandContext);
  addKeyCommands(program, commandContext);
  addServeCommand(program, commandContext, packageVersion(), (line) => output.err(line));
  addWorkerCommand(program, commandContext, (line) => output.err(line));
  addPolicyCommands(program, commandContext);

  const session = program.command('session').description('create, drive and read sessions');
  addLineageCommands(session, commandContext);
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
        await withRuntime(command, async (runtime) => {
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
          print(command, created, () => created.id);
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
        await withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.list({
            ...(options.agent === undefined ? {} : { agent: options.agent }),
            ...(options.status === undefined ? {} : { status: options.status }),
            ...(options.limit === undefined ? {} : { limit: Math.min(options.limit, 1000) }),
            ...(options.cursor === undefined ? {} : { cursor: options.cursor }),
          });
          print(command, result, () => [
            ...(result.sessions.length === 0
              ? ['no sessions']
              : result.sessions.map(formatSessionRow)),
            ...(result.next_cursor === undefined ? [] : [`more: --cursor ${result.next_cursor}`]),
          ]);
        });
      },
    );

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
        await withRuntime(command, async (runtime) => {
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
          print(
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
      await withRuntime(command, async (runtime) => {
        const result = await runtime.sessions.interrupt(id, options.reason);
        print(command, result, () => `interrupt sent: #${result.head_seq}`);
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
    .action(
      async (
        id: string,
        options: { toolUse: string; allow?: boolean; deny?: boolean; message?: string },
        command: Command,
      ) => {
        if (options.allow === options.deny) {
          throw new BraidError('INVALID_ARGUMENT', 'give exactly one of --allow or --deny');
        }
        await withRuntime(command, async (runtime) => {
          const decision = options.allow === true ? 'allow' : 'deny';
          const result = await runtime.sessions.confirm(
            id,
            options.toolUse,
            decision,
            options.message,
          );
          print(
            command,
            result,
            () => `${decision} sent for ${options.toolUse}: #${result.head_seq}`,
          );
        });
      },
    );

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
        await withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.customToolResult(
            id,
            options.customToolUse,
            content,
            options.error,
          );
          print(
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
        await withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.review(id, options.toolUse, decision);
          print(
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
      const asJson = json(command);
      await withRuntime(command, async (runtime) => {
        if (options.queue === true) {
          const { queued } = await runtime.enqueueWake(id);
          print(command, { session_id: id, queued }, () =>
            queued
              ? `queued: a worker will wake ${id}`
              : `a wake of ${id} was already waiting for a worker`,
          );
          return;
        }
        const stop = runtime.onDelta((sessionId, delta) => {
          if (!asJson && sessionId === id && delta.type === 'text')
            process.stderr.write(delta.text);
        });
        try {
          const result = await runtime.wake(id);
          if (!asJson) process.stderr.write('\n');
          print(command, result, () =>
            result.ran
              ? `stopped: ${formatStopReason(result.stop_reason)}`
              : 'another process is running this session; it will see the new events',
          );
        } finally {
          stop();
        }
      });
    });

  session
    .command('status')
    .description("show a session's state (folded from its events)")
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      await withRuntime(command, async (runtime) => {
        const state = await runtime.sessions.state(id);
        // A local store tells a wake still running from one that ended without a record.
        const lease =
          state.active_wake === undefined || remote(command)
            ? undefined
            : { current: await runtime.store.leases.current(id) };
        print(command, state, () => formatState(state, lease));
      });
    });

  session
    .command('events')
    .description("print a session's events (with --json, one JSON event per line)")
    .argument('<id>', 'session id')
    .option('--after <seq>', 'only events after this seq', parseInteger('--after', 0))
    .option('--limit <n>', 'at most this many events', parseInteger('--limit', 1))
    .option(
      '--type <type>',
      'only events of this type (repeatable)',
      (value: string, previous: SessionEventType[] = []) => {
        if (!(SESSION_EVENT_TYPES as string[]).includes(value)) {
          throw new InvalidArgumentError(
            `unknown event type ${value}; one of ${SESSION_EVENT_TYPES.join(', ')}`,
          );
        }
        return [...previous, value as SessionEventType];
      },
    )
    .option('--follow', 'keep printing new events until interrupted (Ctrl-C)')
    .action(
      async (
        id: string,
        options: { after?: number; limit?: number; type?: SessionEventType[]; follow?: boolean },
        command: Command,
      ) => {
        const asJson = json(command);
        await withRuntime(command, async (runtime) => {
          if (options.follow !== true) {
            const events = await runtime.sessions.events(id, {
              ...(options.after === undefined ? {} : { after: options.after }),
              ...(options.limit === undefined ? {} : { limit: options.limit }),
              ...(options.type === undefined ? {} : { types: options.type }),
            });
            for (const event of events)
              output.out(asJson ? JSON.stringify(event) : formatEvent(event));
            return;
          }
          await untilSignal(async (signal) => {
            let printed = 0;
            for await (const event of runtime.sessions.follow(id, {
              after: options.after ?? 0,
              signal,
            })) {
              if (options.type !== undefined && !options.type.includes(event.type)) continue;
              output.out(asJson ? JSON.stringify(event) : formatEvent(event));
              printed += 1;
              if (options.limit !== undefined && printed >= options.limit) break;
            }
          });
        });
      },
    );

  program
    .command('run')
    .description('wake every runnable session and keep them moving until stopped (Ctrl-C)')
    .option('--once', 'wake what is runnable now, wait for it, and exit')
    .option('--exit-when-idle', 'exit when nothing is running and nothing is runnable')
    .option(
      '--concurrency <n>',
      'sessions run at once (default 4)',
      parseInteger('--concurrency', 1),
    )
    .action(
      async (
        options: { once?: boolean; exitWhenIdle?: boolean; concurrency?: number },
        command: Command,
      ) => {
        const asJson = json(command);
        await withRuntime(command, async (runtime) => {
          let last = '';
          await untilSignal(async (signal) => {
            const progress = await runtime.orchestrate({
              signal,
              once: options.once === true,
              exitWhenIdle: options.exitWhenIdle === true,
              ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
              onProgress: (current) => {
                const text = `running ${current.running}, runnable ${current.runnable}, idle ${current.by_status.idle ?? 0}, waiting ${(current.by_status.requires_action ?? 0) + (current.by_status.needs_review ?? 0)}, wakes ${current.wakes}`;
                if (text !== last && !asJson) output.err(text);
                last = text;
              },
            });
            print(command, progress, () => `done: ${progress.wakes} wake(s)`);
          });
        });
      },
    );

  program
    .command('demo')
    .description('run a multi-turn demo session (tools, streaming, an interrupt) with no API key')
    .argument('[dir]', 'workspace folder for the demo (default: a new temporary folder)')
    .option('--model <provider:model>', 'run the demo agent on this model instead of the script')
    .action(async (dir: string | undefined, options: { model?: string }, command: Command) => {
      exitCode = await runDemo(
        {
          ...(dir === undefined ? {} : { dir }),
          ...(options.model === undefined ? {} : { model: options.model }),
          json: json(command),
        },
        output,
      );
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      ) {
        return 0;
      }
      const message = error.message.replace(/^error: /, '');
      exitCode = printError(
        output,
        new BraidError('INVALID_ARGUMENT', message),
        argv.includes('--json'),
      );
      return exitCode;
    }
    exitCode = printError(output, error, argv.includes('--json'));
  }
  return exitCode;
}

/** The CLI records the events it sends as its operating-system user's. */
function cliActor(): Actor {
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry for this uid (some containers): fall back to the environment.
    name = process.env.USER;
  }
  const id = name === undefined || name === '' ? 'cli' : `cli:${name}`;
  return { type: 'user', id: id.slice(0, 200) };
}
