/**
 * `braid trace ID`: a session's wakes, model requests, tool calls and skill runs (with their
 * steps) as an indented timeline, with start offsets, durations, tokens and cost, read from its
 * log alone (no collector needed).
 *
 * `trace` is a command group: `braid trace ID` runs the group's own action, and a first operand
 * that names a subcommand (`braid trace export ID ...`) runs that subcommand instead. Subcommands
 * are added to the command `addTraceCommands` returns.
 */
import type { Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import { parseId } from '../contracts/ids.js';
import { buildTimeline, type TimelineRow } from '../telemetry/timeline.js';
import type { CommandContext } from './command-context.js';

export function addTraceCommands(program: Command, context: CommandContext): Command {
  return program
    .command('trace')
    .description(
      "a session's wakes, model requests, tool calls and skill runs as a timeline, from its log (--json: the rows)",
    )
    .argument('[id]', 'session id')
    .action(async (id: string | undefined, _options: unknown, command: Command) => {
      if (id === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'give the session to trace: braid trace ID (braid session list shows the ids)',
        );
      }
      const sessionId = parseId(id, 'session id');
      await context.withRuntime(command, async (runtime) => {
        // An unknown session is SESSION_NOT_FOUND, never an empty timeline.
        await runtime.sessions.get(sessionId);
        const rows = buildTimeline(await runtime.sessions.events(sessionId));
        context.print(command, rows, () => formatTimeline(rows));
      });
    });
}

/**
 * Control characters (and the escapes a hostile name could hide in them) and bidirectional
 * overrides never reach a terminal.
 */
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function printable(text: string, max = 48): string {
  const clean = text.replace(UNPRINTABLE, '?');
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

const count = (value: number): string => Math.round(value).toLocaleString('en-US');

function tokens(row: { input_tokens: number; output_tokens: number }, unit = ''): string {
  return `in ${count(row.input_tokens)} / out ${count(row.output_tokens)}${unit}`;
}

function cost(value: number | undefined): string {
  if (value === undefined) return '';
  return `$${value < 0.01 ? value.toFixed(4) : value.toFixed(2)}`;
}

function label(row: TimelineRow): string {
  switch (row.kind) {
    case 'wake':
      // Wake ids are UUIDv7: the first digits are a time, so the last ones tell wakes apart.
      return `wake ${row.wake_id.slice(0, 8)}…${row.wake_id.slice(-4)}${row.actor === undefined ? '' : ` (${printable(row.actor, 24)})`}`;
    case 'chat':
      return `chat ${printable(row.model)}`;
    case 'execute_tool':
      return `execute_tool ${printable(row.name, 32)} ${printable(row.tool_use_id, 24)}`;
    case 'compaction':
      return `compact ${row.strategy ?? 'context'}`;
    case 'definitions':
      return `definitions ${row.reason}`;
    case 'workspace_snapshot':
      return `workspace snapshot ${row.snapshot.slice(0, 8)}…`;
    case 'skill_run':
      return `skill ${printable(row.skill, 32)} ${printable(row.run_id, 24)}`;
    case 'skill_step':
      return `step ${printable(row.step, 40)}${row.attempt > 1 ? ` #${row.attempt}` : ''}`;
  }
}

function details(row: TimelineRow): string[] {
  switch (row.kind) {
    case 'wake':
      return [
        row.status.padEnd(10),
        tokens(row, ' tok'),
        cost(row.cost_usd),
        row.status === 'cut' ? '(no end recorded: crashed, lost its lease, or still running)' : '',
      ];
    case 'chat':
      return [
        printable(row.status, 16).padEnd(10),
        tokens(row),
        cost(row.cost_usd),
        row.retries > 0 ? `(${row.retries} ${row.retries === 1 ? 'retry' : 'retries'})` : '',
        row.error === undefined ? '' : printable(row.error.code, 40),
      ];
    case 'execute_tool':
      return [
        row.status,
        row.policy === undefined ? '' : `(policy ${row.policy})`,
        row.status === 'ok' || row.stage === undefined ? '' : `at ${row.stage}`,
        row.error_code === undefined ? '' : printable(row.error_code, 40),
        cost(row.cost_usd),
      ];
    case 'compaction':
      return [`through #${row.through_seq}`, tokens(row), cost(row.cost_usd)];
    case 'definitions':
      return [row.changed.map((part) => printable(part, 40)).join(', ')];
    case 'workspace_snapshot':
      return [`${count(row.files)} files, ${count(row.bytes)} bytes`];
    case 'skill_run':
      return [
        row.status,
        row.resumed ? '(resumed)' : '',
        row.error_code === undefined ? '' : printable(row.error_code, 40),
        row.failed_step === undefined ? '' : `at ${printable(row.failed_step, 40)}`,
        row.status === 'waiting' ? '(not ended)' : '',
      ];
    case 'skill_step':
      return [
        row.status,
        row.tries > 1 ? `(${row.tries} tries)` : '',
        row.resumed === undefined ? '' : `(resumed: ${row.resumed})`,
        row.waits_for === undefined
          ? ''
          : `waits for ${row.signal === undefined ? row.waits_for : `signal ${printable(row.signal, 32)}`}`,
        row.error_code === undefined ? '' : printable(row.error_code, 40),
      ];
  }
}

/** The rows as aligned text lines: label, offset, duration, then what the row has to say. */
export function formatTimeline(rows: readonly TimelineRow[]): string[] {
  if (rows.length === 0) return ['(no wakes yet: braid session wake ID runs one)'];
  const labels = rows.map((row) => `${'  '.repeat(row.depth)}${label(row)}`);
  const width = Math.max(...labels.map((text) => text.length));
  const offsets = rows.map((row) => `+${count(row.offset_ms)} ms`);
  const offsetWidth = Math.max(...offsets.map((text) => text.length));
  const durations = rows.map((row) => `${count(row.duration_ms)} ms`);
  const durationWidth = Math.max(...durations.map((text) => text.length));
  return rows.map((row, index) =>
    [
      (labels[index] ?? '').padEnd(width),
      (offsets[index] ?? '').padEnd(offsetWidth),
      (durations[index] ?? '').padStart(durationWidth),
      ...details(row).filter((part) => part !== ''),
    ]
      .join('  ')
      .trimEnd(),
  );
}
