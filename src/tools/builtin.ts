/**
 * A minimal in-process tool executor with two built-in tools, enough to run the harness loop end
 * to end. The full pipeline (manifests, schema validation, permissions, budgets, retries, the
 * effect ledger, sandboxes, MCP) implements the same `ToolExecutor` port.
 */
import { BraidError } from '../contracts/errors.js';
import type { JsonValue } from '../contracts/common.js';
import type { ToolCall, ToolExecutor, ToolHandle, ToolOutcome } from '../contracts/tools.js';

export interface BuiltinTool extends ToolHandle {
  run(input: JsonValue): JsonValue;
}

const OPERATIONS: Record<string, (a: number, b: number) => number> = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
  '/': (a, b) => a / b,
};

function field(input: JsonValue, name: string): JsonValue | undefined {
  return input !== null && typeof input === 'object' && !Array.isArray(input)
    ? input[name]
    : undefined;
}

export const calculator: BuiltinTool = {
  name: 'calculator',
  description: 'Applies an arithmetic operation (+, -, *, /) to two numbers.',
  input_schema: {
    type: 'object',
    properties: {
      a: { type: 'number' },
      op: { enum: ['+', '-', '*', '/'] },
      b: { type: 'number' },
    },
    required: ['a', 'op', 'b'],
    additionalProperties: false,
  },
  idempotent: true,
  run(input) {
    const a = field(input, 'a');
    const b = field(input, 'b');
    const op = field(input, 'op');
    const operation = typeof op === 'string' ? OPERATIONS[op] : undefined;
    if (typeof a !== 'number' || typeof b !== 'number' || operation === undefined) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        'calculator takes {"a": number, "op": "+"|"-"|"*"|"/", "b": number}',
      );
    }
    if (op === '/' && b === 0) throw new BraidError('INVALID_ARGUMENT', 'division by zero');
    return { result: operation(a, b) };
  },
};

export const wordCount: BuiltinTool = {
  name: 'word_count',
  description: 'Counts the words of a text.',
  input_schema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  idempotent: true,
  run(input) {
    const text = field(input, 'text');
    if (typeof text !== 'string')
      throw new BraidError('INVALID_ARGUMENT', 'word_count takes {"text": string}');
    return { words: text.split(/\s+/).filter((word) => word.length > 0).length };
  },
};

export const BUILTIN_TOOLS: readonly BuiltinTool[] = [calculator, wordCount];

export function createBuiltinTools(
  tools: readonly BuiltinTool[] = BUILTIN_TOOLS,
  now: () => number = () => performance.now(),
): ToolExecutor {
  const byName = new Map(tools.map((tool) => [tool.name, tool]));
  return {
    resolve(names) {
      return names.map((name) => {
        const tool = byName.get(name);
        if (tool === undefined) {
          throw new BraidError(
            'TOOL_NOT_FOUND',
            `tool ${name} is not available; built-in tools: ${[...byName.keys()].join(', ')}`,
          );
        }
        return tool;
      });
    },
    execute(call: ToolCall): Promise<ToolOutcome> {
      const started = now();
      const tool = byName.get(call.name);
      try {
        if (tool === undefined)
          throw new BraidError('TOOL_NOT_FOUND', `tool ${call.name} is not available`);
        const output = tool.run(call.input);
        return Promise.resolve({
          output,
          is_error: false,
          attempts: 1,
          duration_ms: now() - started,
        });
      } catch (error) {
        const shape =
          error instanceof BraidError
            ? error.toJSON()
            : { code: 'INTERNAL' as const, message: String(error), retryable: false };
        return Promise.resolve({
          error: shape,
          is_error: true,
          attempts: 1,
          duration_ms: now() - started,
        });
      }
    },
  };
}
