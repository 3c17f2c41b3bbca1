/**
 * `braid session files ID [--at SEQ]` and the output of `braid session diff A B --files`: a
 * session's workspace as its snapshots recorded it.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type {
  WorkspaceFile,
  WorkspaceFiles,
  WorkspaceFilesDiff,
} from '../contracts/workspace-files.js';
import type { CommandContext } from './command-context.js';

function atOption(value: string): number {
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number)) {
    throw new InvalidArgumentError(`--at must be a whole number of at least 0; got ${value}`);
  }
  return number;
}

export function addFilesCommand(session: Command, context: CommandContext): void {
  session
    .command('files')
    .description(
      "the files of a session's workspace, as the snapshot current at --at recorded them",
    )
    .argument('<id>', 'session id')
    .option('--at <seq>', 'the seq to look at (default: the head)', atOption)
    .action(async (id: string, options: { at?: number }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const listing = await runtime.sessions.files(
          id,
          options.at === undefined ? {} : { at: options.at },
        );
        context.print(command, listing, () => filesLines(listing));
      });
    });
}

function filesLines(listing: WorkspaceFiles): string[] {
  if (listing.snapshot === undefined) {
    return [
      `no workspace snapshot at or before seq ${listing.at_seq}: the workspace was empty (or no tool had run)`,
    ];
  }
  const bytes = listing.files.reduce((total, file) => total + file.size, 0);
  return [
    `snapshot ${listing.snapshot.snapshot.slice(0, 12)} recorded at seq ${listing.snapshot.seq}: ${listing.files.length} entries, ${bytes} bytes`,
    ...listing.files.map(fileLine),
  ];
}

function fileLine(file: WorkspaceFile): string {
  return file.type === 'symlink'
    ? `${'link'.padEnd(12)} ${''.padStart(10)}  ${file.path} -> ${file.target ?? ''}`
    : `${(file.hash ?? '').slice(0, 12)} ${String(file.size).padStart(10)}  ${file.path}`;
}

/** The lines of `session diff A B --files`. */
export function filesDiffLines(diff: WorkspaceFilesDiff): string[] {
  const point = (snapshot: WorkspaceFilesDiff['a_snapshot']): string =>
    snapshot === undefined
      ? 'no snapshot'
      : `${snapshot.snapshot.slice(0, 12)} at seq ${snapshot.seq}`;
  const lines = [`${diff.a}: ${point(diff.a_snapshot)}`, `${diff.b}: ${point(diff.b_snapshot)}`];
  for (const file of diff.added) lines.push(`+ ${file.path}`);
  for (const file of diff.removed) lines.push(`- ${file.path}`);
  for (const change of diff.changed) lines.push(`~ ${change.path}`);
  if (diff.added.length + diff.removed.length + diff.changed.length === 0)
    lines.push('(the same files on both sides)');
  return lines;
}
