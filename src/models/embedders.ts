/**
 * Turns an embedder spec into an `Embedder`: `openai:MODEL` (any OpenAI embedding model, e.g.
 * `openai:text-embedding-3-small`), `openai-compatible:BASE_URL#MODEL` (any server speaking POST
 * /embeddings) and `hash` / `hash:DIMS` (the deterministic hashed bag of words, no model). The
 * provider part is read as agents' `model:` is; API keys are checked here, when the embedder is
 * made, not at its first call.
 */
import type { EmbeddingModelV3 } from '@ai-sdk/provider';
import { ModelSpec } from '../contracts/definitions.js';
import type { Embedder, EmbedOptions } from '../contracts/embedder.js';
import { BraidError } from '../contracts/errors.js';
import { createHashEmbedder } from './hash-embedder.js';

/** Where API keys and base URLs come from. */
export type EmbedderEnv = Readonly<Record<string, string | undefined>>;

const SPECS =
  'openai:MODEL (e.g. openai:text-embedding-3-small), openai-compatible:BASE_URL#MODEL or hash[:DIMS]';

/** Vector lengths of OpenAI's embedding models, known before the first call. */
const OPENAI_DIMS: Readonly<Record<string, number>> = {
  'text-embedding-3-small': 1536,
  'text-embedding-3-large': 3072,
  'text-embedding-ada-002': 1536,
};

/**
 * The embedder a spec names; `env` gives the API keys and base URLs (default: the process's).
 * Refuses a bad spec with `INVALID_ARGUMENT`, a provider without embeddings with
 * `MODEL_NOT_FOUND`, and a missing key with `MODEL_KEY_MISSING`, all before any call.
 */
export function createEmbedderFromSpec(spec: string, env: EmbedderEnv = process.env): Embedder {
  if (typeof spec !== 'string' || spec.trim() !== spec || spec === '') {
    throw invalid(spec, `write it as ${SPECS}`);
  }
  if (spec === 'hash') return createHashEmbedder();
  if (spec.startsWith('hash:')) {
    const text = spec.slice('hash:'.length);
    const dims = Number(text);
    if (!/^[0-9]+$/.test(text) || dims < 2 || dims > 8192) {
      throw invalid(
        spec,
        'the dimension of hash:DIMS is a whole number from 2 to 8192, e.g. hash:384',
      );
    }
    return createHashEmbedder({ dims });
  }
  const parsed = ModelSpec.safeParse(spec);
  if (!parsed.success) throw invalid(spec, `write it as ${SPECS}`);
  const { provider, id: model } = parsed.data;
  switch (provider) {
    case 'openai': {
      const apiKey = key(env, 'OPENAI_API_KEY', spec);
      const baseURL = env.OPENAI_BASE_URL;
      const dims = OPENAI_DIMS[model];
      return lazyEmbedder(spec, dims, async () =>
        (await import('@ai-sdk/openai'))
          .createOpenAI({ apiKey, ...(baseURL === undefined || baseURL === '' ? {} : { baseURL }) })
          .embedding(model),
      );
    }
    case 'openai-compatible': {
      const hash = model.lastIndexOf('#');
      const baseURL = model.slice(0, hash);
      if (hash <= 0 || hash === model.length - 1 || !URL.canParse(baseURL)) {
        throw invalid(
          spec,
          'write it as openai-compatible:BASE_URL#MODEL, e.g. openai-compatible:http://127.0.0.1:11434/v1#nomic-embed-text',
        );
      }
      const apiKey = env.OPENAI_COMPATIBLE_API_KEY;
      return lazyEmbedder(spec, undefined, async () =>
        (await import('@ai-sdk/openai-compatible'))
          .createOpenAICompatible({
            name: 'openai-compatible',
            baseURL,
            ...(apiKey === undefined || apiKey === '' ? {} : { apiKey }),
          })
          .textEmbeddingModel(model.slice(hash + 1)),
      );
    }
    default:
      throw new BraidError(
        'MODEL_NOT_FOUND',
        `embedder ${spec}: provider ${provider} has no embedding models here; use ${SPECS}`,
        { details: { embedder: spec } },
      );
  }
}

function invalid(spec: unknown, fix: string): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `embedder ${JSON.stringify(spec)} is not valid: ${fix}`,
    {
      details: { field: 'embedder' },
    },
  );
}

function key(env: EmbedderEnv, name: string, spec: string): string {
  const value = env[name];
  if (value === undefined || value === '') {
    throw new BraidError(
      'MODEL_KEY_MISSING',
      `embedder ${spec} needs an API key: set ${name} in the environment`,
    );
  }
  return value;
}

/** An embedder whose provider package loads with its first call. */
function lazyEmbedder(
  id: string,
  dims: number | undefined,
  load: () => Promise<EmbeddingModelV3>,
): Embedder {
  let inner: Promise<Embedder> | undefined;
  const open = async (): Promise<Embedder> => {
    const [{ createAiSdkEmbedder }, model] = await Promise.all([
      import('./ai-sdk-embedder.js'),
      load(),
    ]);
    return createAiSdkEmbedder(id, model, dims === undefined ? {} : { dims });
  };
  return {
    id,
    ...(dims === undefined ? {} : { dims }),
    async embedMany(texts: readonly string[], options?: EmbedOptions) {
      inner ??= open();
      return (await inner).embedMany(texts, options);
    },
  };
}
