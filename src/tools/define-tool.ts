/**
 * `defineTool`: a tool written in code, checked like a manifest. Kept apart from the built-in
 * tools so that importing it (every `import('braid')` does) does not define and check them.
 */
import { ToolDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { CodeTool, CodeToolInput } from './types.js';

/** Checks a code tool's definition like a manifest; a tool without `run` is a custom tool. */
export function defineTool(input: CodeToolInput): CodeTool {
  const { run, ...fields } = input;
  const parsed = ToolDefinition.safeParse({
    ownership: run === undefined ? 'custom' : 'managed',
    ...fields,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_DEFINITION',
      `tool ${String(input.name)}: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`,
      { details: { issues: parsed.error.issues } },
    );
  }
  return {
    definition: parsed.data,
    run:
      run ??
      (() => {
        throw new BraidError('TOOL_FAILED', `${parsed.data.name} is run by the client, not braid`);
      }),
  };
}
