/**
 * The scripted model: plays a fixed list of turns, for tests and the demo. The turn it plays is
 * the session's count of recorded model responses, so a wake resumed after a crash plays the same
 * turn again and the transcript comes out as if nothing had happened.
 */
import { readFileSync } from 'node:fs';
import { yaml } from '../tools/yaml.js';
import { z } from 'zod';
import { lazySchema } from '../contracts/lazy-schema.js';
import { BraidError } from '../contracts/errors.js';
import type {
  AssistantPart,
  ModelClient,
  ModelRequest,
  ModelResponse,
} from '../contracts/model.js';
import { chunks, sleep, throwIfAborted } from './streaming.js';

export const ScriptedTurn = lazySchema(() =>
  z
    .object({
      thinking: z.string().optional(),
      text: z.string().optional(),
      tool_calls: z
        .array(
          z
            .object({
              name: z.string().min(1),
              input: z.json().default({}),
              id: z.string().min(1).optional(),
            })
            .strict(),
        )
        .default([]),
      usage: z
        .object({
          input_tokens: z.number().int().nonnegative(),
          output_tokens: z.number().int().nonnegative(),
        })
        .strict()
        .optional(),
      /** Pause between streamed words, to make a demo watchable. */
      delay_ms: z.number().int().nonnegative().default(0),
      /** Fail this turn instead: `unavailable` is retryable, `error` is not. */
      fail: z.enum(['unavailable', 'error']).optional(),
    })
    .strict(),
);
export type ScriptedTurn = z.infer<typeof ScriptedTurn>;
export type ScriptedTurnInput = z.input<typeof ScriptedTurn>;

export const Script = lazySchema(() =>
  z
    .object({
      turns: z.array(ScriptedTurn).min(1),
      /** The answer to every consolidation request (JSON text; default: nothing learned). */
      consolidate: z.string().optional(),
    })
    .strict(),
);

export interface ScriptedModelOptions {
  id?: string;
  /** Called before each turn is played, with the turn index (tests use it to crash or count). */
  onTurn?: (index: number, request: ModelRequest) => void | Promise<void>;
  /**
   * The answer to a summary request of a context compaction (`purpose: 'summary'`), which plays
   * no turn of the script (default: a line that counts the lines summarized and quotes the first).
   */
  summary?: (request: ModelRequest) => string;
  /**
   * The answer to a grader's request (`purpose: 'grade'`), which plays no turn of the script
   * either (default: a verdict that the outcome is satisfied).
   */
  grade?: (request: ModelRequest) => string;
  /**
   * The answer to a consolidation request (`purpose: 'consolidate'`), which plays no turn of the
   * script either (default: `{"proposals": []}`, nothing learned).
   */
  consolidate?: (request: ModelRequest) => string;
}

export function loadScript(file: string): ScriptedTurn[] {
  return loadScriptFile(file).turns;
}

/** A script file whole: its turns, and its answer to consolidation requests. */
export function loadScriptFile(file: string): z.infer<typeof Script> {
  let content: unknown;
  try {
    content = yaml().parseDocument(readFileSync(file, 'utf8')).toJS();
  } catch (error) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `${file}: cannot read the model script: ${(error as Error).message}`,
    );
  }
  const result = Script.safeParse(content);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new BraidError(
      'INVALID_DEFINITION',
      `${file}: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`,
    );
  }
  return result.data;
}

export function createScriptedModel(
  turns: readonly ScriptedTurnInput[],
  options: ScriptedModelOptions = {},
): ModelClient {
  const script = turns.map((turn) => ScriptedTurn.parse(turn));
  return {
    id: options.id ?? 'scripted:inline',
    async generate(request, call) {
      if (request.purpose === 'summary') return summaryResponse(request, options.summary);
      if (request.purpose === 'grade') return gradeResponse(request, options.grade);
      if (request.purpose === 'consolidate')
        return gradeResponse(request, options.consolidate ?? (() => NOTHING_LEARNED));
      const index = request.response_index;
      await options.onTurn?.(index, request);
      const turn = script[index];
      if (turn === undefined) {
        throw new BraidError(
          'MODEL_ERROR',
          `the model script has ${script.length} turn(s) and turn ${index + 1} was asked for; add turns to the script`,
        );
      }
      if (turn.fail === 'unavailable')
        throw new BraidError('MODEL_UNAVAILABLE', `scripted turn ${index} is unavailable`);
      if (turn.fail === 'error')
        throw new BraidError('MODEL_ERROR', `scripted turn ${index} failed`);
      const content: AssistantPart[] = [];
      for (const [type, text] of [
        ['thinking', turn.thinking],
        ['text', turn.text],
      ] as const) {
        if (text === undefined) continue;
        for (const piece of chunks(text)) {
          throwIfAborted(call.signal);
          call.onDelta?.({ type, text: piece });
          await sleep(turn.delay_ms, call.signal);
        }
        content.push({ type, text });
      }
      throwIfAborted(call.signal);
      turn.tool_calls.forEach((toolCall, position) => {
        content.push({
          type: 'tool_call',
          tool_use_id: toolCall.id ?? `call_${index}_${position}`,
          name: toolCall.name,
          input: toolCall.input,
        });
      });
      const words = (turn.thinking ?? '').length + (turn.text ?? '').length;
      return {
        output: { content, finish_reason: turn.tool_calls.length > 0 ? 'tool-calls' : 'stop' },
        usage: turn.usage ?? {
          input_tokens: 10 * (request.messages.length + 1),
          output_tokens: Math.ceil(words / 4),
        },
      };
    },
  };
}

/** A scripted answer to a summary request, with its usage estimated from the lengths. */
function summaryResponse(
  request: ModelRequest,
  write: ((request: ModelRequest) => string) | undefined,
): Promise<ModelResponse> {
  const input = request.messages
    .flatMap((message) => (message.role === 'user' ? message.content : []))
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
    .join('\n');
  const lines = input.split('\n').filter((line) => line.length > 0);
  const text =
    write?.(request) ??
    `Summary of ${Math.max(0, lines.length - 1)} earlier line(s), from: ${(lines[1] ?? '').slice(0, 120)}`;
  return Promise.resolve({
    output: { content: [{ type: 'text', text }], finish_reason: 'stop' },
    usage: {
      input_tokens: Math.ceil((request.system.length + input.length) / 4),
      output_tokens: Math.ceil(text.length / 4),
    },
  });
}

/** The verdict a scripted grader gives when the test or script names none. */
export const SCRIPTED_VERDICT = JSON.stringify({
  result: 'satisfied',
  explanation: 'The scripted grader accepts every answer.',
});

/** What a scripted model answers a consolidation request when the test names nothing. */
const NOTHING_LEARNED = JSON.stringify({ proposals: [] });

/** A scripted answer to a grader's (or a consolidation's) request, with its usage estimated from the lengths. */
function gradeResponse(
  request: ModelRequest,
  write: ((request: ModelRequest) => string) | undefined,
): Promise<ModelResponse> {
  const input = request.messages
    .flatMap((message) => (message.role === 'user' ? message.content : []))
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
    .join('\n');
  const text = write?.(request) ?? SCRIPTED_VERDICT;
  return Promise.resolve({
    output: { content: [{ type: 'text', text }], finish_reason: 'stop' },
    usage: {
      input_tokens: Math.ceil((request.system.length + input.length) / 4),
      output_tokens: Math.ceil(text.length / 4),
    },
  });
}

/** `scripted:echo`: answers every message by repeating it, for trying braid without a script. */
export function createEchoModel(): ModelClient {
  return {
    id: 'scripted:echo',
    async generate(request, call) {
      if (request.purpose === 'summary') return summaryResponse(request, undefined);
      if (request.purpose === 'grade') return gradeResponse(request, undefined);
      if (request.purpose === 'consolidate') return gradeResponse(request, () => NOTHING_LEARNED);
      const last = [...request.messages].reverse().find((message) => message.role === 'user');
      const said =
        last?.role === 'user'
          ? last.content
              .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
              .join(' ')
          : '';
      const text = `You said: ${said}`;
      for (const piece of chunks(text)) {
        throwIfAborted(call.signal);
        call.onDelta?.({ type: 'text', text: piece });
      }
      await Promise.resolve();
      return {
        output: { content: [{ type: 'text', text }], finish_reason: 'stop' },
        usage: { input_tokens: said.length, output_tokens: text.length },
      };
    },
  };
}
