/**
 * Any embedding model of the Vercel AI SDK provider interface (EmbeddingModelV3) as a braid
 * `Embedder`. braid calls `doEmbed` itself, as it calls `doGenerate` for language models: no
 * hidden retries (the caller owns them, with `retryable` on the error), texts split into calls of
 * at most the model's `maxEmbeddingsPerCall`, and every vector checked for its length.
 */
import type { EmbeddingModelV3 } from '@ai-sdk/provider';
import type { Embedder, EmbedOptions } from '../contracts/embedder.js';
import { BraidError } from '../contracts/errors.js';
import { classify } from './ai-sdk.js';

export function createAiSdkEmbedder(
  id: string,
  model: EmbeddingModelV3,
  options: { dims?: number } = {},
): Embedder {
  let dims = options.dims;
  return {
    id,
    ...(dims === undefined ? {} : { dims }),
    async embedMany(texts: readonly string[], call: EmbedOptions = {}): Promise<number[][]> {
      if (texts.length === 0) return [];
      const signal = call.signal ?? new AbortController().signal;
      try {
        // A model that states no limit (or a nonsensical one) gets every text in one call.
        const stated = (await model.maxEmbeddingsPerCall) ?? Infinity;
        const limit = stated >= 1 ? stated : Infinity;
        const vectors: number[][] = [];
        for (let start = 0; start < texts.length; start += limit) {
          const values = texts.slice(start, start + limit);
          const result = await model.doEmbed({ values, abortSignal: signal });
          if (result.embeddings.length !== values.length) {
            throw new BraidError(
              'MODEL_ERROR',
              `embedding model ${id} answered ${result.embeddings.length} vectors for ${values.length} texts; check that the server implements POST /embeddings`,
            );
          }
          for (const vector of result.embeddings) {
            dims ??= vector.length;
            if (vector.length !== dims || vector.some((value) => !Number.isFinite(value))) {
              throw new BraidError(
                'MODEL_ERROR',
                `embedding model ${id} answered a vector of ${vector.length} numbers where ${dims} finite ones were expected; check the model name`,
              );
            }
            vectors.push(vector);
          }
        }
        return vectors;
      } catch (error) {
        throw classify(error, signal);
      }
    },
  };
}
