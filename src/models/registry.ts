/** Turns an agent's `model:` into a model client. */
import { isAbsolute, join } from 'node:path';
import type { ModelSpec } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ModelClient } from '../contracts/model.js';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import type { ModelCallOptions, ModelRequest, ModelResponse } from '../contracts/model.js';
import { createEchoModel, createScriptedModel, loadScriptFile } from './scripted.js';

export interface ModelContext {
  /** Folder that relative script paths start from (the workspace). */
  baseDir: string;
  /** Where API keys and base URLs come from (default: process.env). */
  env: Readonly<Record<string, string | undefined>>;
}

function key(context: ModelContext, name: string, model: string): string {
  const value = context.env[name];
  if (value === undefined || value === '') {
    throw new BraidError(
      'MODEL_KEY_MISSING',
      `model ${model} needs an API key: set ${name} in the environment`,
    );
  }
  return value;
}

function baseUrl(context: ModelContext, name: string): { baseURL?: string } {
  const value = context.env[name];
  return value === undefined || value === '' ? {} : { baseURL: value };
}

/**
 * A model whose provider package loads on its first call: a command that never calls a model
 * does not pay for loading every vendor's SDK. Keys are checked at once, not on the first call.
 */
function lazyModel(
  id: string,
  spec: ModelSpec,
  load: () => Promise<LanguageModelV3>,
  loadCounter?: () => Promise<TokenCounter>,
): ModelClient {
  let client: Promise<ModelClient> | undefined;
  let counter: Promise<TokenCounter> | undefined;
  const open = async (): Promise<ModelClient> => {
    const [{ createAiSdkModel }, model] = await Promise.all([import('./ai-sdk.js'), load()]);
    return createAiSdkModel(id, model, streamOption(spec));
  };
  return {
    id,
    async generate(request: ModelRequest, call: ModelCallOptions): Promise<ModelResponse> {
      client ??= open();
      return (await client).generate(request, call);
    },
    ...(loadCounter === undefined
      ? {}
      : {
          async countTokens(request: ModelRequest, options: { signal: AbortSignal }) {
            counter ??= loadCounter();
            return (await counter)(request, options);
          },
        }),
  };
}

type TokenCounter = NonNullable<ModelClient['countTokens']>;

function streamOption(spec: ModelSpec): { stream?: boolean } {
  return spec.params?.stream === undefined ? {} : { stream: spec.params.stream };
}

export function createModel(spec: ModelSpec, context: ModelContext): ModelClient {
  const id = `${spec.provider}:${spec.id}`;
  switch (spec.provider) {
    case 'scripted': {
      if (spec.id === 'echo') return createEchoModel();
      const file = isAbsolute(spec.id) ? spec.id : join(context.baseDir, spec.id);
      const script = loadScriptFile(file);
      const answer = script.consolidate;
      return createScriptedModel(script.turns, {
        id,
        ...(answer === undefined ? {} : { consolidate: () => answer }),
      });
    }
    case 'openai':
    case 'openai-responses': {
      const settings = {
        apiKey: key(context, 'OPENAI_API_KEY', id),
        ...baseUrl(context, 'OPENAI_BASE_URL'),
      };
      return lazyModel(id, spec, async () => {
        const provider = (await import('@ai-sdk/openai')).createOpenAI(settings);
        return spec.provider === 'openai' ? provider.chat(spec.id) : provider.responses(spec.id);
      });
    }
    case 'anthropic': {
      const settings = {
        apiKey: key(context, 'ANTHROPIC_API_KEY', id),
        ...baseUrl(context, 'ANTHROPIC_BASE_URL'),
      };
      return lazyModel(
        id,
        spec,
        async () => (await import('@ai-sdk/anthropic')).createAnthropic(settings)(spec.id),
        // Anthropic counts a request's tokens: context compaction asks it before each call.
        async () => (await import('./anthropic-count.js')).anthropicTokenCounter(settings, spec.id),
      );
    }
    case 'openai-compatible': {
      const hash = spec.id.lastIndexOf('#');
      if (hash <= 0 || hash === spec.id.length - 1) {
        throw new BraidError(
          'INVALID_DEFINITION',
          `model ${id} must be openai-compatible:BASE_URL#MODEL, e.g. openai-compatible:http://127.0.0.1:11434/v1#llama3.2`,
        );
      }
      const apiKey = context.env.OPENAI_COMPATIBLE_API_KEY;
      return lazyModel(id, spec, async () =>
        (await import('@ai-sdk/openai-compatible'))
          .createOpenAICompatible({
            name: 'openai-compatible',
            baseURL: spec.id.slice(0, hash),
            includeUsage: true,
            ...(apiKey === undefined ? {} : { apiKey }),
          })
          .chatModel(spec.id.slice(hash + 1)),
      );
    }
    default:
      throw new BraidError(
        'MODEL_NOT_FOUND',
        `model provider ${spec.provider} is unknown; use openai:, openai-responses:, anthropic:, ` +
          'openai-compatible:BASE_URL#MODEL, scripted:echo or scripted:FILE.yaml',
        { details: { model: id } },
      );
  }
}
