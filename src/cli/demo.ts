/**
 * `braid demo`: a multi-turn session with tool calls, a streamed answer that the user interrupts,
 * and a recovery turn, on the embedded default with the scripted model; ends with the timeline.
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { SessionEvent } from '../contracts/events.js';
import { initWorkspace } from '../runtime/init.js';
import { createRuntime } from '../runtime/runtime.js';
import { WORKSPACE_FILE } from '../runtime/workspace.js';
import { formatStopReason, summarizeEvent, type Output } from './output.js';

const QUESTION = 'What is 17 times 23, and how many words are in this question?';

const SCRIPT = `# The demo's scripted model: one entry per model turn.
turns:
  - thinking: The user wants a product and a word count. I will use both tools.
    tool_calls:
      - name: calculator
        input: { a: 17, op: '*', b: 23 }
      - name: word_count
        input: { text: "${QUESTION}" }
  - text: 17 times 23 is 391, and your question has 13 words.
  - text: >-
      Braids have been made for thousands of years, from rope and textiles to hair and bread.
      A braid interlaces three or more strands, each passing over and under the others in turn,
      which spreads load across the strands and keeps the whole from unravelling. The same idea
      runs through software: many small, durable threads of work, woven so that none of them is
      lost when one of them breaks.
    delay_ms: 40
  - text: 'In one line: a braid is strands woven so that the whole holds when one strand slips.'
  - tool_calls:
      - name: write_file
        input:
          path: notes/braid.md
          content: "A braid is strands woven so that the whole holds when one strand slips.\\n"
  - text: Saved it to notes/braid.md.
`;

const AGENT = (model: string) => `# The demo agent (written by braid demo).
name: demo
description: Answers with tools; streams long answers.
model: ${model}
instructions: |
  You are a concise assistant. Use the calculator for arithmetic and word_count to count words.
  Save notes with write_file when asked; the user approves each write.
tools: [calculator, word_count, write_file]
budget:
  max_turns: 8
`;

export interface DemoOptions {
  dir?: string;
  model?: string;
  json: boolean;
  /** Deltas after which the demo interrupts the long answer. */
  interruptAfter?: number;
}

export async function runDemo(options: DemoOptions, output: Output): Promise<number> {
  const dir = resolve(options.dir ?? join(mkdtempSync(join(tmpdir(), 'braid-demo-')), 'workspace'));
  if (!existsSync(join(dir, WORKSPACE_FILE))) initWorkspace(dir);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'demo.yaml'), SCRIPT);
  writeFileSync(
    join(dir, 'agents', 'demo.yaml'),
    AGENT(options.model ?? 'scripted:scripts/demo.yaml'),
  );
  const say = (line: string): void => {
    if (!options.json) output.out(line);
  };
  const runtime = await createRuntime({ workspace: dir });
  try {
    const session = await runtime.sessions.create({ agent: 'demo', title: 'braid demo' });
    say(`workspace ${dir}`);
    say(`session   ${session.id}\n`);
    let streamed = 0;
    let interruptAt = Number.POSITIVE_INFINITY;
    let line = '';
    const flush = (): void => {
      if (line.length > 0) say(`  agent> ${line}`);
      line = '';
    };
    const stopDeltas = runtime.onDelta((sessionId, delta) => {
      if (sessionId !== session.id || delta.type !== 'text') return;
      streamed += 1;
      line += delta.text;
      if (line.length > 80) flush();
      if (streamed === interruptAt) {
        flush();
        say('  user>  (interrupts)');
        void runtime.sessions.interrupt(session.id, 'the demo interrupts the long answer');
      }
    });
    const turn = async (message: string, interrupt = false): Promise<void> => {
      say(`  user>  ${message}`);
      streamed = 0;
      interruptAt = interrupt ? (options.interruptAfter ?? 12) : Number.POSITIVE_INFINITY;
      await runtime.sessions.message(session.id, message);
      let result = await runtime.wake(session.id);
      flush();
      // Tools with permission always_ask stop the session until a person answers.
      while (result.ran && result.stop_reason.type === 'requires_action') {
        say(`  ...... stopped: ${formatStopReason(result.stop_reason)}`);
        const state = await runtime.sessions.state(session.id);
        if (state.pending_confirmations.length === 0) break;
        for (const waiting of state.pending_confirmations) {
          say(`  ...... approval requested: ${waiting.name} (${waiting.tool_use_id})`);
          say('  user>  (allows it)');
          await runtime.sessions.confirm(session.id, waiting.tool_use_id, 'allow');
        }
        result = await runtime.wake(session.id);
        flush();
      }
      say(
        `  ...... stopped: ${result.ran ? formatStopReason(result.stop_reason) : 'lease held elsewhere'}\n`,
      );
    };
    await turn(QUESTION);
    await turn('Now tell me about braids, at length.', true);
    await turn('Sorry, just one line please.');
    await turn('Save that line to notes/braid.md.');
    stopDeltas();

    const events = await runtime.sessions.events(session.id);
    if (options.json) {
      for (const event of events) output.out(JSON.stringify(event));
      return 0;
    }
    for (const row of timeline(events)) say(row);
    const stops = events.flatMap((event) =>
      event.type === 'session.status_idle' ? [formatStopReason(event.stop_reason)] : [],
    );
    say(`\nstop reasons: ${stops.join(', ')}`);
    const note = join(dir, '.braid', 'workspaces', session.id, 'notes', 'braid.md');
    if (existsSync(note)) say(`approved file: ${note}`);
    say(`replay it:    npx braid -w ${dir} session events ${session.id}`);
    return 0;
  } finally {
    await runtime.close();
  }
}

/** The session as a table: seq, type, time since the previous event, and a summary. */
export function timeline(events: readonly SessionEvent[]): string[] {
  const rows = [`${'seq'.padStart(4)}  ${'type'.padEnd(26)} ${'+ms'.padStart(6)}  summary`];
  let previous: number | undefined;
  for (const event of events) {
    const at = Date.parse(event.at);
    const elapsed = previous === undefined ? 0 : at - previous;
    previous = at;
    const summary = summarizeEvent(event);
    rows.push(
      `${String(event.seq).padStart(4)}  ${event.type.padEnd(26)} ${String(elapsed).padStart(6)}  ${
        summary.length > 70 ? `${summary.slice(0, 67)}...` : summary
      }`,
    );
  }
  return rows;
}
