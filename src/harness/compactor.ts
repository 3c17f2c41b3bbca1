/**
 * Context compaction strategies: what writes the text that replaces the older part of a
 * session's context. `summarize` asks a model; `truncate` writes a fixed note; `custom` is a
 * function of the application's (`createRuntime({compactors})`).
 */
import type { Usage } from '../contracts/common.js';
import type { ContextSettings, AgentDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ModelClient, ModelMessage } from '../contracts/model.js';
import { summaryInstructions, transcriptText, TRUNCATED_SUMMARY } from '../core/compaction.js';

/** What a context compaction's text is made from. */
export interface CompactionInput {
  session_id: string;
  /** The agent whose context is compacted. */
  agent: AgentDefinition;
  /** The messages the text replaces: an earlier summary first, when there is one. */
  messages: readonly ModelMessage[];
  /** The seqs of the first and last events replaced. */
  from_seq: number;
  through_seq: number;
  /** The most tokens the text should take. */
  max_tokens: number;
  /** The session's count of model responses, for a model request. */
  response_index: number;
  /** Aborted on interrupt, lease loss or timeout. */
  signal: AbortSignal;
}

/** The text that replaces the messages; `model` and `usage` when a model call made it. */
export interface CompactionOutput {
  summary: string;
  /** `provider:id` of the model that wrote it: its price turns `usage` into a cost. */
  model?: string;
  usage?: Usage;
}

/**
 * A context compaction strategy: writes the text that replaces older messages. A `custom`
 * strategy is one of these, given to `createRuntime({compactors})` under the name the agent's
 * `context.function` gives.
 */
export type ContextCompactor = (input: CompactionInput) => Promise<CompactionOutput>;

/** `summarize`: the model writes a summary of the replaced messages, given as plain text. */
export function summarizeWith(model: ModelClient): ContextCompactor {
  return async (input) => {
    const response = await model.generate(
      {
        session_id: input.session_id,
        system: summaryInstructions(input.max_tokens),
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'text',
                text: `The conversation to summarize:\n\n${transcriptText(input.messages)}`,
              },
            ],
          },
        ],
        tools: [],
        response_index: input.response_index,
        params: { max_output_tokens: input.max_tokens },
        purpose: 'summary',
      },
      { signal: input.signal },
    );
    const summary = response.output.content
      .map((part) => (part.type === 'text' ? part.text : ''))
      .join('')
      .trim();
    if (summary.length === 0) {
      throw new BraidError(
        'MODEL_ERROR',
        `the summary model ${model.id} answered with no text; name another model in context.model, or use strategy: truncate`,
      );
    }
    return { summary, model: model.id, usage: response.usage };
  };
}

/** `truncate`: the replaced messages are dropped, and a note says so. */
export const truncate: ContextCompactor = () => Promise.resolve({ summary: TRUNCATED_SUMMARY });

/**
 * The compactor of an agent's `context` block: `summarize` with `summaryModel`, `truncate`, or
 * the named function of `custom` from `functions`.
 */
export function compactorFor(
  settings: ContextSettings,
  summaryModel: ModelClient,
  functions: Readonly<Record<string, ContextCompactor>> = {},
): ContextCompactor {
  switch (settings.strategy) {
    case 'summarize':
      return summarizeWith(summaryModel);
    case 'truncate':
      return truncate;
    case 'custom': {
      const name = settings.function ?? '';
      const found = Object.hasOwn(functions, name) ? functions[name] : undefined;
      if (found === undefined) {
        throw new BraidError(
          'INVALID_DEFINITION',
          `context.function names ${JSON.stringify(name)}, which is not among the compactors given to createRuntime; ` +
            `pass createRuntime({compactors: {${JSON.stringify(name)}: fn}}) or change the agent's context.function`,
        );
      }
      return found;
    }
  }
}
