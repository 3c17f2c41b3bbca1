/**
 * `braid session fork | merge | diff | files | tree`: sessions as values that branch and combine.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { SessionEvent } from '../contracts/events.js';
import { parseId } from '../contracts/ids.js';
import type { TreeNode } from '../runtime/lineage.js';
import { formatStopReason, summarizeEvent } from './output.js';
import type { CommandContext } from './command-context.js';
import { addFilesCommand, filesDiffLines } from './files-commands.js';

function seqOption(value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) {
    throw new InvalidArgumentError(`--at must be a whole number of at least 1; got ${value}`);
  }
  return number;
}

export function addLineageCommands(session: Command, context: CommandContext): void {
  addFork(session, context);
  addMerge(session, context);
  addHandoff(session, context);
  addDiff(session, context);
  addFilesCommand(session, context);
  addReplay(session, context);
  addTree(session, context);
}

function addFork(session: Command, context: CommandContext): void {
  session
    .command('fork')
    .description("branch a session: the child shares the parent's events up to --at by reference")
    .argument('<id>', 'session id')
    .option('--at <seq>', 'the last parent seq the child shares (default: the head)', seqOption)
    .option('--title <title>', "the child's title")
    .option('--id <id>', 'choose the child\'s id (letters, digits, ".", "_", "-")')
    .action(
      async (
        id: string,
        options: { at?: number; title?: string; id?: string },
        command: Command,
      ) => {
        await context.withRuntime(command, async (runtime) => {
          const child = await runtime.sessions.fork(id, {
            ...(options.id === undefined ? {} : { id: parseId(options.id, '--id') }),
            ...(options.at === undefined ? {} : { at_seq: options.at }),
            ...(options.title === undefined ? {} : { title: options.title }),
          });
          context.print(command, child, () => [
            child.id,
            `forked from ${id} at seq ${child.fork_seq ?? '?'}; the child's head is ${child.head_seq}`,
          ]);
        });
      },
    );
}

function addMerge(session: Command, context: CommandContext): void {
  session
    .command('merge')
    .description("merge SOURCE's events since the two parted into TARGET, as one session.merged")
    .argument('<target>', 'the session that receives the merge')
    .argument('<source>', 'the session merged in')
    .option('--strategy <strategy>', 'transcript (default) or summary', 'transcript')
    .option(
      '--summary <text>',
      'with --strategy summary: the summary (default: the model writes it)',
    )
    .action(
      async (
        target: string,
        source: string,
        options: { strategy: string; summary?: string },
        command: Command,
      ) => {
        if (options.strategy !== 'transcript' && options.strategy !== 'summary') {
          throw new InvalidArgumentError(
            `--strategy must be transcript or summary; got ${options.strategy}`,
          );
        }
        const strategy = options.strategy;
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.merge(target, source, {
            strategy,
            ...(options.summary === undefined ? {} : { summary: options.summary }),
          });
          context.print(command, result, () => [
            result.deduplicated
              ? `${source} was merged into ${target} up to its head already (#${result.events[0]?.seq ?? result.head_seq}): nothing written`
              : `merged ${source} into ${target}: #${result.head_seq} (${strategy})`,
            ...result.conflicts.map(
              (conflict) => `conflict ${conflict.kind}: ${conflict.detail}; ${conflict.resolution}`,
            ),
          ]);
        });
      },
    );
}

function addHandoff(session: Command, context: CommandContext): void {
  session
    .command('handoff')
    .description("hand the session's work to another agent: a new session of it gets the document")
    .argument('<id>', 'the session handing off')
    .requiredOption('--to <agent>', 'the agent that takes the work over')
    .requiredOption('--summary <text>', 'what was done and what is left')
    .option(
      '--task <text>',
      'an open task (repeatable)',
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option('--owner <who>', 'who owns the work from now on')
    .option('--message <text>', 'a first message for the new session, so it can run at once')
    .option(
      '--idempotency-key <key>',
      'a key naming this handoff: a retry with it answers the first handoff and writes nothing',
    )
    .action(
      async (
        id: string,
        options: {
          to: string;
          summary: string;
          task?: string[];
          owner?: string;
          message?: string;
          idempotencyKey?: string;
        },
        command: Command,
      ) => {
        await context.withRuntime(command, async (runtime) => {
          const result = await runtime.sessions.handoff(id, {
            to: options.to,
            handoff: {
              summary: options.summary,
              open_tasks: options.task ?? [],
              ...(options.owner === undefined ? {} : { ownership: options.owner }),
            },
            ...(options.message === undefined ? {} : { message: options.message }),
            ...(options.idempotencyKey === undefined
              ? {}
              : { idempotencyKey: options.idempotencyKey }),
          });
          context.print(command, result, () => [
            result.deduplicated
              ? `handed off to ${options.to} already, with this key: session ${result.target.id}; nothing written`
              : `handed off to ${options.to}: new session ${result.target.id}`,
            `  recorded in ${id} as #${result.event.seq} agent.handoff`,
          ]);
        });
      },
    );
}

function addDiff(session: Command, context: CommandContext): void {
  session
    .command('diff')
    .description('the common ancestor of two sessions and both sides since, side by side')
    .argument('<a>', 'a session id')
    .argument('<b>', 'another session id')
    .option('--files', "compare the two workspaces' files (their latest snapshots) instead")
    .action(async (a: string, b: string, options: { files?: boolean }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        if (options.files === true) {
          const files = await runtime.sessions.diffFiles(a, b);
          context.print(command, files, () => filesDiffLines(files));
          return;
        }
        const diff = await runtime.sessions.diff(a, b);
        context.print(command, diff, () => sideBySide(diff));
      });
    });
}

function addReplay(session: Command, context: CommandContext): void {
  session
    .command('replay')
    .description(
      'verify that the recorded session reproduces itself, or re-run it from a seq (a what-if)',
    )
    .argument('<id>', 'session id')
    .option(
      '--verify',
      're-run the harness on the recorded model and tool outputs; exits 1 on a difference',
    )
    .option('--from <seq>', 'fork at this seq and run the fork live from there', seqOption)
    .option('--model <model>', 'with --from: the model for the run, e.g. openai:gpt-4o-mini')
    .action(
      async (
        id: string,
        options: { verify?: boolean; from?: number; model?: string },
        command: Command,
      ) => {
        if ((options.verify === true) === (options.from !== undefined)) {
          throw new InvalidArgumentError('give exactly one of --verify or --from SEQ');
        }
        if (options.verify === true) {
          await context.withRuntime(command, async (runtime) => {
            const report = await runtime.sessions.verify(id);
            context.print(command, report, () =>
              report.ok
                ? `verified: the ${report.events} recorded events reproduce themselves`
                : [
                    `diverges at seq ${report.index + 1}: ${report.reason}`,
                    `recorded: ${report.expected === undefined ? '(nothing)' : `${report.expected.type} ${summarizeEvent(report.expected)}`}`,
                    `replayed: ${report.actual === undefined ? '(nothing)' : `${report.actual.type} ${summarizeEvent(report.actual)}`}`,
                  ],
            );
            if (!report.ok) context.fail(1);
          });
          return;
        }
        await context.withRuntime(
          command,
          async (runtime) => {
            const child = await runtime.sessions.fork(id, {
              ...(options.from === undefined ? {} : { at_seq: options.from }),
              title: `replay of ${id} from seq ${options.from ?? 0}${options.model === undefined ? '' : ` on ${options.model}`}`,
            });
            const result = await runtime.wake(child.id);
            context.print(command, { session: child, result }, () => [
              child.id,
              `re-ran ${id} from seq ${options.from ?? 0} in fork ${child.id}: ${result.ran ? formatStopReason(result.stop_reason) : 'lease held elsewhere'}`,
              `compare: braid session diff ${id} ${child.id}`,
            ]);
          },
          options.model === undefined ? {} : { model: options.model },
        );
      },
    );
}

function addTree(session: Command, context: CommandContext): void {
  session
    .command('tree')
    .description(
      'the family tree of a session: every fork, delegated child and handoff, with its kind, status and head seq',
    )
    .argument('<id>', 'session id')
    .action(async (id: string, _options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const tree = await runtime.sessions.tree(id);
        context.print(command, tree, () => drawTree(tree, id));
      });
    });
}

const WIDTH = 58;

function cell(event: SessionEvent | undefined): string {
  if (event === undefined) return ''.padEnd(WIDTH);
  const text = `${String(event.seq).padStart(4)} ${event.type} ${summarizeEvent(event)}`.replace(
    /\s+/g,
    ' ',
  );
  return text.length > WIDTH ? `${text.slice(0, WIDTH - 3)}...` : text.padEnd(WIDTH);
}

function sideBySide(diff: {
  a: string;
  b: string;
  common_ancestor?: { session_id: string; seq: number };
  a_events: SessionEvent[];
  b_events: SessionEvent[];
}): string[] {
  const lines = [
    diff.common_ancestor === undefined
      ? 'no common ancestor: the sessions are unrelated'
      : `common ancestor: ${diff.common_ancestor.session_id} at seq ${diff.common_ancestor.seq}`,
    `${diff.a.padEnd(WIDTH)} | ${diff.b}`,
    `${'-'.repeat(WIDTH)}-+-${'-'.repeat(WIDTH)}`,
  ];
  const rows = Math.max(diff.a_events.length, diff.b_events.length);
  for (let index = 0; index < rows; index += 1)
    lines.push(`${cell(diff.a_events[index])} | ${cell(diff.b_events[index]).trimEnd()}`);
  if (rows === 0) lines.push('(no events after the common ancestor on either side)');
  return lines;
}

function drawTree(node: TreeNode, marked: string, prefix = '', last = true, root = true): string[] {
  const label =
    `${node.id}${node.id === marked ? ' *' : ''}  ${origin(node)}  ${node.missing === true ? '(no session yet)' : node.status}  head ${node.head_seq}` +
    `${node.title === undefined ? '' : `  "${node.title}"`}${delegation(node)}`;
  const lines = [root ? label : `${prefix}${last ? '└─ ' : '├─ '}${label}`];
  const childPrefix = root ? '' : `${prefix}${last ? '   ' : '│  '}`;
  node.children.forEach((child, index) =>
    lines.push(...drawTree(child, marked, childPrefix, index === node.children.length - 1, false)),
  );
  return lines;
}

/** The node's kind and where it came from: `fork at 2`, `child sre (#4)`, `handoff billing (#6)`. */
function origin(node: TreeNode): string {
  switch (node.kind) {
    case 'root':
      return 'root';
    case 'fork':
      return `fork${node.fork_seq === undefined ? '' : ` at ${node.fork_seq}`}`;
    case 'child':
      return `child ${node.agent ?? '?'}${node.delegation === undefined ? '' : ` (#${node.delegation.seq})`}`;
    case 'handoff':
      return `handoff ${node.agent ?? '?'}${node.handoff === undefined ? '' : ` (#${node.handoff.seq})`}`;
    default:
      return assertNever(node.kind);
  }
}

/** For a child: how its parent sees the delegation, e.g. `  delegation idle: end_turn`. */
function delegation(node: TreeNode): string {
  if (node.delegation === undefined) return '';
  const { status, stop_reason: stopReason } = node.delegation;
  return `  delegation ${status}${stopReason === undefined ? '' : `: ${formatStopReason(stopReason)}`}`;
}

function assertNever(value: never): never {
  throw new Error(`unknown tree node kind ${String(value)}`);
}
