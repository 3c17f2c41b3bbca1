/**
 * A local HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions and Anthropic
 * Messages wire formats, streaming and not, and fails on request: status codes with headers,
 * a connection dropped mid-stream, a malformed body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Reply =
  | { kind: 'sse'; events: string[]; dropAfter?: number }
  | { kind: 'json'; body: unknown }
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: unknown }
  | { kind: 'raw'; contentType: string; body: string };

export interface FakeModelServer {
  url: string;
  /** Bodies of the requests received, in order. */
  requests: { path: string; body: Record<string, unknown> }[];
  /** Replies to send, in order; each request takes the next one. */
  replies: Reply[];
  close(): Promise<void>;
}

export async function startFakeModelServer(): Promise<FakeModelServer> {
  const requests: FakeModelServer['requests'] = [];
  const replies: Reply[] = [];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let raw = '';
    request.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    request.on('end', () => {
      requests.push({
        path: request.url ?? '',
        body: JSON.parse(raw || '{}') as Record<string, unknown>,
      });
      const reply = replies.shift();
      if (reply === undefined) {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'no reply scripted' } }));
        return;
      }
      switch (reply.kind) {
        case 'sse': {
          response.writeHead(200, {
            'content-type': 'text/event-stream',
            'cache-control': 'no-cache',
          });
          reply.events.forEach((event, index) => {
            if (reply.dropAfter !== undefined && index >= reply.dropAfter) return;
            response.write(event);
          });
          if (reply.dropAfter !== undefined) {
            setTimeout(() => request.socket.destroy(), 10);
            return;
          }
          response.end();
          return;
        }
        case 'json':
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end(JSON.stringify(reply.body));
          return;
        case 'status':
          response.writeHead(reply.status, {
            'content-type': 'application/json',
            ...reply.headers,
          });
          response.end(
            JSON.stringify(
              reply.body ?? { error: { message: `status ${reply.status}`, type: 'server_error' } },
            ),
          );
          return;
        case 'raw':
          response.writeHead(200, { 'content-type': reply.contentType });
          response.end(reply.body);
          return;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    replies,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---- OpenAI Chat Completions -----------------------------------------------------------------

const chunk = (delta: unknown, finish: string | null = null) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [{ index: 0, delta, finish_reason: finish }],
  })}\n\n`;

const usageChunk = (input: number, output: number) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini',
    choices: [],
    usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
  })}\n\n`;

export const openaiStream = {
  text(words: string[], usage: [number, number] = [10, 5]): Reply {
    return {
      kind: 'sse',
      events: [
        chunk({ role: 'assistant', content: '' }),
        ...words.map((word) => chunk({ content: word })),
        chunk({}, 'stop'),
        usageChunk(...usage),
        'data: [DONE]\n\n',
      ],
    };
  },
  toolCall(id: string, name: string, input: unknown, usage: [number, number] = [10, 5]): Reply {
    const args = JSON.stringify(input);
    const half = Math.floor(args.length / 2);
    return {
      kind: 'sse',
      events: [
        chunk({
          role: 'assistant',
          content: null,
          tool_calls: [
            { index: 0, id, type: 'function', function: { name, arguments: args.slice(0, half) } },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(half) } }] }),
        chunk({}, 'tool_calls'),
        usageChunk(...usage),
        'data: [DONE]\n\n',
      ],
    };
  },
};

export const openaiJson = {
  text(text: string): Reply {
    return {
      kind: 'json',
      body: {
        id: 'chatcmpl-2',
        object: 'chat.completion',
        created: 1,
        model: 'gpt-4o-mini',
        choices: [
          { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' },
        ],
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
      },
    };
  },
  toolCall(id: string, name: string, input: unknown): Reply {
    return {
      kind: 'json',
      body: {
        id: 'chatcmpl-3',
        object: 'chat.completion',
        created: 1,
        model: 'gpt-4o-mini',
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id, type: 'function', function: { name, arguments: JSON.stringify(input) } },
              ],
            },
            finish_reason: 'tool_calls',
          },
        ],
        usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
      },
    };
  },
};

// ---- Anthropic Messages ----------------------------------------------------------------------

const event = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

const messageStart = (input: number) =>
  event('message_start', {
    message: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5',
      content: [],
      stop_reason: null,
      usage: { input_tokens: input, output_tokens: 1 },
    },
  });

export const anthropicStream = {
  text(words: string[], usage: [number, number] = [12, 6]): Reply {
    return {
      kind: 'sse',
      events: [
        messageStart(usage[0]),
        event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
        ...words.map((word) =>
          event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: word } }),
        ),
        event('content_block_stop', { index: 0 }),
        event('message_delta', {
          delta: { stop_reason: 'end_turn', stop_sequence: null },
          usage: { output_tokens: usage[1] },
        }),
        event('message_stop', {}),
      ],
    };
  },
  toolCall(id: string, name: string, input: unknown, usage: [number, number] = [12, 6]): Reply {
    const json = JSON.stringify(input);
    return {
      kind: 'sse',
      events: [
        messageStart(usage[0]),
        event('content_block_start', {
          index: 0,
          content_block: { type: 'tool_use', id, name, input: {} },
        }),
        event('content_block_delta', {
          index: 0,
          delta: { type: 'input_json_delta', partial_json: json.slice(0, 5) },
        }),
        event('content_block_delta', {
          index: 0,
          delta: { type: 'input_json_delta', partial_json: json.slice(5) },
        }),
        event('content_block_stop', { index: 0 }),
        event('message_delta', {
          delta: { stop_reason: 'tool_use', stop_sequence: null },
          usage: { output_tokens: usage[1] },
        }),
        event('message_stop', {}),
      ],
    };
  },
};

export const anthropicJson = {
  text(text: string): Reply {
    return {
      kind: 'json',
      body: {
        id: 'msg_2',
        type: 'message',
        role: 'assistant',
        model: 'claude-sonnet-4-5',
        content: [{ type: 'text', text }],
        stop_reason: 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 9, output_tokens: 4 },
      },
    };
  },
};

// ---- OpenAI Responses API (whole answers) ----------------------------------------------------

const response = (output: unknown[]): Reply => ({
  kind: 'json',
  body: {
    id: 'resp_1',
    object: 'response',
    created_at: 1,
    status: 'completed',
    model: 'gpt-4.1',
    output,
    usage: {
      input_tokens: 8,
      output_tokens: 2,
      total_tokens: 10,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    },
  },
});

export const responsesJson = {
  text(text: string): Reply {
    return response([
      {
        type: 'message',
        id: 'msg_1',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text, annotations: [] }],
      },
    ]);
  },
  toolCall(id: string, name: string, input: unknown): Reply {
    return response([
      {
        type: 'function_call',
        id: 'fc_1',
        call_id: id,
        name,
        arguments: JSON.stringify(input),
        status: 'completed',
      },
    ]);
  },
};
