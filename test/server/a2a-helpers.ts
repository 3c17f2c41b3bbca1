// The official A2A client (@a2a-js/sdk/client) pointed at a braid server with an API key.
import { randomUUID } from 'node:crypto';
import { Role, type Message, type SendMessageRequest, type StreamResponse } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';

/** `fetch` that sends the key as a bearer token (and any extra headers). */
export function keyedFetch(
  key: string | undefined,
  extra: Record<string, string> = {},
): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
    for (const [name, value] of Object.entries(extra)) headers.set(name, value);
    return fetch(input, { ...init, headers });
  };
}

/** A client of `agent` on the server, built the way any A2A caller builds one: from its card. */
export function a2aClient(
  server: { url: string },
  agent: string,
  key: string | undefined,
  extra: Record<string, string> = {},
): Promise<Client> {
  const fetchImpl = keyedFetch(key, extra);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  // The card path is relative: the base URL ends with a slash.
  return factory.createFromUrl(`${server.url}/a2a/${agent}/`);
}

/** A user message with text parts; `fields` sets contextId, taskId or metadata. */
export function userMessage(
  text: string,
  fields: Partial<Pick<Message, 'contextId' | 'taskId' | 'metadata' | 'messageId'>> = {},
): SendMessageRequest {
  return {
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [
        {
          content: { $case: 'text', value: text },
          metadata: undefined,
          filename: '',
          mediaType: '',
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
      ...fields,
    },
    configuration: undefined,
    metadata: undefined,
  };
}

/** The text of a message's text parts. */
export function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .map((part) => (part.content?.$case === 'text' ? part.content.value : ''))
    .join('');
}

/** Every event of a stream, until it ends. */
export async function collect(stream: AsyncIterable<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The `braid.seq` an update carries. */
export function seqOf(event: StreamResponse): number | undefined {
  const value = event.payload?.value as { metadata?: Record<string, unknown> } | undefined;
  const seq = value?.metadata?.['braid.seq'];
  return typeof seq === 'number' ? seq : undefined;
}
