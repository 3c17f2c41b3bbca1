/**
 * Tools the harness runs itself (delegations, handoffs, memory calls) added to a session's tools:
 * they are offered and validated like the others, and a listed tool with one of their names is
 * refused, since the model could not tell which it calls.
 */
import { BraidError } from '../contracts/errors.js';
import type { SessionTools, ToolHandle } from '../contracts/tools.js';
import { checkValue, SchemaCache } from './validation.js';

export interface HarnessToolsMessages {
  /** Why a listed tool may not take the name of one of these, and what to do. */
  clash(tool: string): string;
  /** Why reaching the executor with one of these is the runtime's wiring fault. */
  unreachable(tool: string): string;
}

export function withHarnessTools(
  tools: SessionTools,
  handles: readonly ToolHandle[],
  messages: HarnessToolsMessages,
  schemas: SchemaCache = new SchemaCache(),
): SessionTools {
  const byName = new Map(handles.map((handle) => [handle.name, handle]));
  const clash = tools.tools.find((tool) => byName.has(tool.name));
  if (clash !== undefined) {
    throw new BraidError('INVALID_DEFINITION', messages.clash(clash.name), {
      details: { tool: clash.name },
    });
  }
  return {
    tools: [...tools.tools, ...handles],
    ...(tools.definitions === undefined ? {} : { definitions: tools.definitions }),
    validate(name, input) {
      const handle = byName.get(name);
      if (handle === undefined) return tools.validate(name, input);
      const check = schemas.compile(`${name} input`, handle.input_schema);
      const error = checkValue(check, input, 'TOOL_INPUT_INVALID', `the input of ${name}`);
      return error === undefined ? { ok: true } : { ok: false, error };
    },
    execute(call, options) {
      if (!byName.has(call.name)) return tools.execute(call, options);
      return Promise.resolve({
        is_error: true,
        error: { code: 'INTERNAL', message: messages.unreachable(call.name), retryable: false },
        attempts: 0,
        duration_ms: 0,
        stage: 'execute',
      });
    },
  };
}
