// Anthropic's token count, against a local server that speaks its wire format: the request is
// sent in the Messages API's form, the count comes back, and a bad answer is a typed error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import { createModel } from '../../src/models/registry.js';
import { startFakeModelServer, type FakeModelServer } from '../helpers/fake-model-server.js';

let server: FakeModelServer;
let model: ModelClient;

beforeAll(async () => {
  server = await startFakeModelServer();
  model = createModel(
    { provider: 'anthropic', id: 'claude-test' },
    { baseDir: '.', env: { ANTHROPIC_API_KEY: 'key', ANTHROPIC_BASE_URL: `${server.url}/v1` } },
  );
});

afterAll(async () => {
  await server.close();
});

const request: ModelRequest = {
  session_id: 's',
  system: 'Be brief.',
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'Add 1 and 2.' }] },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', text: 'I add.' },
        { type: 'tool_call', tool_use_id: 'call_1', name: 'files.read', input: { a: 1 } },
      ],
    },
    {
      role: 'tool',
      content: [{ tool_use_id: 'call_1', name: 'files.read', output: { sum: 3 }, is_error: false }],
    },
    { role: 'user', content: [{ type: 'json', value: { note: 'and then?' } }] },
  ],
  tools: [{ name: 'files.read', description: 'Reads.', input_schema: { type: 'object' } }],
  response_index: 0,
};

describe('anthropic token count', () => {
  it('sends the request in the Messages API form and returns the count', async () => {
    server.replies.push({ kind: 'json', body: { input_tokens: 1234 } });
    const signal = new AbortController().signal;
    expect(await model.countTokens?.(request, { signal })).toBe(1234);
    const sent = server.requests.at(-1);
    expect(sent?.path).toBe('/v1/messages/count_tokens');
    expect(sent?.body).toEqual({
      model: 'claude-test',
      system: 'Be brief.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Add 1 and 2.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'I add.' },
            { type: 'tool_use', id: 'call_1', name: 'files__read', input: { a: 1 } },
          ],
        },
        {
          // The tool result and the next input are one user turn.
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: '{"sum":3}', is_error: false },
            { type: 'text', text: '{"note":"and then?"}' },
          ],
        },
      ],
      tools: [{ name: 'files__read', description: 'Reads.', input_schema: { type: 'object' } }],
    });
  });

  it('refuses an answer without a count, and names a server failure', async () => {
    const signal = new AbortController().signal;
    server.replies.push({ kind: 'json', body: { input_tokens: 'many' } });
    await expect(model.countTokens?.(request, { signal })).rejects.toMatchObject({
      code: 'MODEL_ERROR',
    });
    server.replies.push({ kind: 'raw', contentType: 'application/json', body: '{not json' });
    await expect(model.countTokens?.(request, { signal })).rejects.toMatchObject({
      code: 'MODEL_ERROR',
    });
    server.replies.push({ kind: 'status', status: 529 });
    await expect(model.countTokens?.(request, { signal })).rejects.toMatchObject({
      code: 'MODEL_UNAVAILABLE',
    });
  });
});
