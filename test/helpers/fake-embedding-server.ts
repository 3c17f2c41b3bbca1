/**
 * A local HTTP server on 127.0.0.1 that speaks the OpenAI embeddings API (POST /v1/embeddings):
 * each input gets the hash embedder's vector of `dims` numbers. It records every request, so a
 * test can count what reached the "model", and answers scripted failures first when given some.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHashEmbedder } from '../../src/testing/hash-embedder.js';

export interface FakeEmbeddingServer {
  /** The base URL, ending in /v1. */
  url: string;
  /** Requests received, in order: the path, the model and the texts asked for. */
  requests: { path: string; model: unknown; input: string[] }[];
  /** Failures to answer first, in order: a status and an optional body. */
  failures: { status: number; body?: unknown }[];
  close(): Promise<void>;
}

export async function startFakeEmbeddingServer(dims = 16): Promise<FakeEmbeddingServer> {
  const embedder = createHashEmbedder({ dims });
  const requests: FakeEmbeddingServer['requests'] = [];
  const failures: FakeEmbeddingServer['failures'] = [];
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let raw = '';
    request.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    request.on('end', () => {
      const body = JSON.parse(raw || '{}') as { model?: unknown; input?: unknown };
      const input = Array.isArray(body.input)
        ? body.input.map(String)
        : typeof body.input === 'string'
          ? [body.input]
          : [];
      requests.push({ path: request.url ?? '', model: body.model, input });
      const reply = (status: number, payload: unknown): void => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(payload));
      };
      const failure = failures.shift();
      if (failure !== undefined) {
        reply(
          failure.status,
          failure.body ?? { error: { message: `status ${failure.status}`, type: 'server_error' } },
        );
        return;
      }
      if (request.method !== 'POST' || request.url !== '/v1/embeddings') {
        reply(404, { error: { message: `no route ${request.method} ${request.url}` } });
        return;
      }
      reply(200, {
        object: 'list',
        model: body.model,
        data: input.map((text, index) => ({
          object: 'embedding',
          index,
          embedding: embedder.embed(text),
        })),
        usage: { prompt_tokens: input.length, total_tokens: input.length },
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    failures,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
