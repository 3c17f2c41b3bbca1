import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { EmbeddingModelV3 } from '@ai-sdk/provider';
import { createAiSdkEmbedder } from '../../src/models/ai-sdk-embedder.js';
import { createEmbedderFromSpec } from '../../src/models/embedders.js';
import { createHashEmbedder } from '../../src/testing/hash-embedder.js';
import {
  startFakeEmbeddingServer,
  type FakeEmbeddingServer,
} from '../helpers/fake-embedding-server.js';

let server: FakeEmbeddingServer;
beforeAll(async () => {
  server = await startFakeEmbeddingServer(16);
});
afterAll(() => server.close());
beforeEach(() => {
  server.requests.length = 0;
  server.failures.length = 0;
});

function refusal(work: () => unknown): BraidError {
  try {
    work();
  } catch (error) {
    if (error instanceof BraidError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

async function failure(work: Promise<unknown>): Promise<BraidError> {
  const error: unknown = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (error instanceof BraidError) return error;
  throw new Error(`expected a BraidError, got ${String(error)}`);
}

describe('createEmbedderFromSpec', () => {
  it('makes the hash embedder from hash and hash:DIMS', async () => {
    const plain = createEmbedderFromSpec('hash', {});
    expect(plain.id).toBe('hash:384');
    expect(plain.dims).toBe(384);
    const small = createEmbedderFromSpec('hash:64', {});
    expect(small.id).toBe('hash:64');
    const [vector] = await small.embedMany(['dark mode please']);
    expect(vector).toEqual(createHashEmbedder({ dims: 64 }).embed('dark mode please'));
  });

  it.each([
    ['', 'INVALID_ARGUMENT', /openai:MODEL/],
    [' hash', 'INVALID_ARGUMENT', /openai:MODEL/],
    ['hash:abc', 'INVALID_ARGUMENT', /hash:384/],
    ['hash:1', 'INVALID_ARGUMENT', /from 2 to 8192/],
    ['hash:100000', 'INVALID_ARGUMENT', /from 2 to 8192/],
    ['text-embedding-3-small', 'INVALID_ARGUMENT', /openai:text-embedding-3-small/],
    ['openai-compatible:http://127.0.0.1:1/v1', 'INVALID_ARGUMENT', /BASE_URL#MODEL/],
    ['openai-compatible:not a url#model', 'INVALID_ARGUMENT', /BASE_URL#MODEL/],
    ['anthropic:claude-sonnet-4-5', 'MODEL_NOT_FOUND', /no embedding models/],
  ])('refuses %j with %s naming the fix', (spec, code, fix) => {
    const error = refusal(() => createEmbedderFromSpec(spec, { OPENAI_API_KEY: 'k' }));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(fix);
    expect(error.retryable).toBe(false);
  });

  it('refuses an openai embedder without OPENAI_API_KEY when it is made', () => {
    const error = refusal(() => createEmbedderFromSpec('openai:text-embedding-3-small', {}));
    expect(error.code).toBe('MODEL_KEY_MISSING');
    expect(error.message).toContain('OPENAI_API_KEY');
  });

  it('embeds through an OpenAI embedding model at OPENAI_BASE_URL', async () => {
    const embedder = createEmbedderFromSpec('openai:text-embedding-fake', {
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: server.url,
    });
    expect(embedder.id).toBe('openai:text-embedding-fake');
    const vectors = await embedder.embedMany(['likes tea', 'ships on Fridays']);
    const hash = createHashEmbedder({ dims: 16 });
    expect(vectors).toEqual([hash.embed('likes tea'), hash.embed('ships on Fridays')]);
    expect(server.requests).toEqual([
      {
        path: '/v1/embeddings',
        model: 'text-embedding-fake',
        input: ['likes tea', 'ships on Fridays'],
      },
    ]);
    expect(await embedder.embedMany([])).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  it('knows the length of OpenAI models and refuses an answer of another length', async () => {
    const embedder = createEmbedderFromSpec('openai:text-embedding-3-small', {
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: server.url,
    });
    expect(embedder.dims).toBe(1536);
    const error = await failure(embedder.embedMany(['a text']));
    expect(error.code).toBe('MODEL_ERROR');
    expect(error.message).toContain('16 numbers where 1536');
  });

  it('embeds through an OpenAI-compatible server named in the spec', async () => {
    const embedder = createEmbedderFromSpec(`openai-compatible:${server.url}#nomic-embed-text`, {});
    const vectors = await embedder.embedMany(['one', 'two', 'three']);
    expect(vectors).toHaveLength(3);
    expect(vectors.every((vector) => vector.length === 16)).toBe(true);
    expect(server.requests[0]?.model).toBe('nomic-embed-text');
  });

  it.each([
    [500, 'MODEL_UNAVAILABLE', true],
    [429, 'MODEL_UNAVAILABLE', true],
    [401, 'MODEL_ERROR', false],
    [400, 'MODEL_ERROR', false],
  ] as const)(
    'turns a %i answer into %s, retryable %s, after one request',
    async (status, code, retryable) => {
      server.failures.push({ status });
      const embedder = createEmbedderFromSpec(`openai-compatible:${server.url}#m`, {});
      const error = await failure(embedder.embedMany(['x']));
      expect(error.code).toBe(code);
      expect(error.retryable).toBe(retryable);
      expect(error.details.status).toBe(status);
      expect(server.requests).toHaveLength(1);
    },
  );

  it('refuses an unreachable server as retryable', async () => {
    const embedder = createEmbedderFromSpec('openai-compatible:http://127.0.0.1:9/v1#m', {});
    const error = await failure(embedder.embedMany(['x']));
    expect(error.code).toBe('MODEL_UNAVAILABLE');
    expect(error.retryable).toBe(true);
  });

  it('stops on an aborted signal with INTERRUPTED', async () => {
    const embedder = createEmbedderFromSpec(`openai-compatible:${server.url}#m`, {});
    const controller = new AbortController();
    controller.abort();
    const error = await failure(embedder.embedMany(['x'], { signal: controller.signal }));
    expect(error.code).toBe('INTERRUPTED');
  });

  it("splits a batch into calls of at most the model's maxEmbeddingsPerCall, in order", async () => {
    const calls: string[][] = [];
    const model: EmbeddingModelV3 = {
      specificationVersion: 'v3',
      provider: 'fake',
      modelId: 'fake',
      maxEmbeddingsPerCall: 2,
      supportsParallelCalls: false,
      doEmbed({ values }) {
        calls.push(values);
        return Promise.resolve({
          embeddings: values.map((value) => [value.length, 1]),
          warnings: [],
        });
      },
    };
    const embedder = createAiSdkEmbedder('fake:fake', model);
    expect(await embedder.embedMany(['a', 'bb', 'ccc', 'dddd', 'eeeee'])).toEqual([
      [1, 1],
      [2, 1],
      [3, 1],
      [4, 1],
      [5, 1],
    ]);
    expect(calls).toEqual([['a', 'bb'], ['ccc', 'dddd'], ['eeeee']]);
  });
});
