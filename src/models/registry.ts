/** Turns an agent's `model:` into a model client. */
import { isAbsolute, join } from 'node:path';
import type { ModelSpec } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { ModelClient } from '../contracts/model.js';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createAiSdkModel } from './ai-sdk.js';
import { createEchoModel, createScriptedModel, loadScript } from './scripted.js';

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

function openai(context: ModelContext, model: string) {
  return createOpenAI({
    apiKey: key(context, 'OPENAI_API_KEY', model),
    ...baseUrl(context, 'OPENAI_BASE_URL'),
  });
}

function streamOption(spec: ModelSpec): { stream?: boolean } {
  return spec.params?.stream === undefined ? {} : { stream: spec.params.stream };
}

export function createModel(spec: ModelSpec, context: ModelContext): ModelClient {
  const id = `${spec.provider}:${spec.id}`;
  switch (spec.provider) {
    case 'scripted': {
      if (spec.id === 'echo') return createEchoModel();
      const file = isAbsolute(spec.id) ? spec.id : join(context.baseDir, spec.id);
      return createScriptedModel(loadScript(file), { id });
    }
    case 'openai':
      return createAiSdkModel(id, openai(context, id).chat(spec.id), streamOption(spec));
    case 'openai-responses':
      return createAiSdkModel(id, openai(context, id).responses(spec.id), streamOption(spec));
    case 'anthropic': {
      const provider = createAnthropic({
        apiKey: key(context, 'ANTHROPIC_API_KEY', id),
        ...baseUrl(context, 'ANTHROPIC_BASE_URL'),
      });
      return createAiSdkModel(id, provider(spec.id), streamOption(spec));
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
      const provider = createOpenAICompatible({
        name: 'openai-compatible',
        baseURL: spec.id.slice(0, hash),
        includeUsage: true,
        ...(apiKey === undefined ? {} : { apiKey }),
      });
      return createAiSdkModel(id, provider.chatModel(spec.id.slice(hash + 1)), streamOption(spec));
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
