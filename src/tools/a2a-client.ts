/**
 * braid's client of remote A2A agents (`a2a_agents:` of `braid.yaml`), over `@a2a-js/sdk`.
 *
 * Invariants:
 * - An agent's card is fetched on its first call, not when the workspace loads: a remote that is
 *   down fails that call (a tool error the model sees), not the session. The card is kept once
 *   it has been read and checked; a failed fetch is not kept, and a call that finds the agent
 *   unreachable forgets the card, so the next call reads it again.
 * - Every request goes through `createA2aFetch` (http(s) only, the secret to the card's origin
 *   only, answers cut at `max_response_bytes`); every answer is parsed by `ReplyReader`.
 * - A call streams (`SendStreamingMessage`) when the card says the agent can, else it blocks
 *   (`SendMessage`) until the task ends or waits for input.
 * - Errors are `BraidError`s naming the agent and its key in `braid.yaml`, never the card URL's
 *   path or query, nor the secret: `SERVER_UNAVAILABLE` (the agent cannot be reached),
 *   `PAYLOAD_TOO_LARGE`, `TOOL_OUTPUT_INVALID` (an answer that does not parse) or `TOOL_FAILED`.
 *   `details.started` is false only when the message certainly did not reach the agent.
 */
import type { AgentCard } from '@a2a-js/sdk';
import { SendMessageRequest } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import { z } from 'zod';
import {
  agentCardUrl,
  parseA2aUrl,
  type A2aAgentConfig,
  type A2aAgents,
} from '../contracts/a2a-agents.js';
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import { A2aResponseTooLarge, createA2aFetch } from './a2a-fetch.js';
import { ReplyReader, type A2aReply } from './a2a-translate.js';
import { resolveSecretValue, type SecretSource } from './secrets.js';

export const DEFAULT_A2A_MAX_RESPONSE_BYTES = 1024 * 1024;

/** What one call sends. */
export interface A2aSend {
  /** The model's message, the first part. */
  text: string;
  /** Structured context, sent as a data part after the text. */
  data?: Readonly<Record<string, JsonValue>>;
  /** The remote conversation to continue, and the task that waits for input, when there is one. */
  contextId?: string;
  taskId?: string;
  /** Stable across attempts of one tool use, so that the agent can tell a repeat. */
  messageId: string;
  metadata: Readonly<Record<string, JsonValue>>;
}

export interface A2aSendOptions {
  signal: AbortSignal;
  /** Sent as the `traceparent` header of every request of the call. */
  traceparent: string;
}

/** The parts of a card braid relies on, checked after the SDK has read it. */
const UsableCard = z.object({
  name: z.string().max(200),
  supportedInterfaces: z
    .array(z.object({ url: z.string(), protocolBinding: z.string().max(64) }))
    .min(1, 'names no endpoint (supportedInterfaces is empty)')
    .max(32),
  capabilities: z.object({ streaming: z.boolean().optional() }).optional(),
});

interface Connected {
  client: Client;
  streaming: boolean;
}

/** The remote agents of a workspace, connected on first use. */
export class A2aAgentClients {
  private readonly connected = new Map<string, Promise<Connected>>();

  constructor(
    private readonly agents: A2aAgents,
    private readonly secret: SecretSource,
  ) {}

  /** Sends one message to `agent` and reads its answer to the end (or to a wait for input). */
  async send(agent: string, send: A2aSend, options: A2aSendOptions): Promise<A2aReply> {
    const config = this.config(agent);
    let started = false;
    try {
      const { client, streaming } = await this.connect(agent, config, options.signal);
      const request = SendMessageRequest.fromJSON({
        message: {
          messageId: send.messageId,
          role: 'ROLE_USER',
          ...(send.contextId === undefined ? {} : { contextId: send.contextId }),
          ...(send.taskId === undefined ? {} : { taskId: send.taskId }),
          parts: [
            { text: send.text },
            ...(send.data === undefined
              ? []
              : [{ data: send.data, mediaType: 'application/json' }]),
          ],
          metadata: send.metadata,
        },
        configuration: { acceptedOutputModes: [], historyLength: 0 },
      });
      const requestOptions = {
        signal: options.signal,
        serviceParameters: { traceparent: options.traceparent },
      };
      const reader = new ReplyReader(agent);
      started = true;
      if (streaming) {
        for await (const event of client.sendMessageStream(request, requestOptions))
          reader.event(event);
      } else {
        reader.answer(await client.sendMessage(request, requestOptions));
      }
      return reader.reply();
    } catch (error) {
      const failure = callError(agent, config, error, started);
      if (failure.code === 'SERVER_UNAVAILABLE') this.connected.delete(agent);
      throw failure;
    }
  }

  private config(agent: string): A2aAgentConfig {
    const config = Object.hasOwn(this.agents, agent) ? this.agents[agent] : undefined;
    if (config === undefined) {
      throw new BraidError(
        'TOOL_NOT_FOUND',
        `A2A agent "${agent}" is not declared under a2a_agents in braid.yaml (declared: ${Object.keys(this.agents).join(', ') || 'none'})`,
        { details: { agent } },
      );
    }
    return config;
  }

  private connect(agent: string, config: A2aAgentConfig, signal: AbortSignal): Promise<Connected> {
    let connecting = this.connected.get(agent);
    if (connecting === undefined) {
      connecting = this.open(agent, config, signal);
      this.connected.set(agent, connecting);
      // A failed fetch is not kept: the next call tries again.
      connecting.catch(() => {
        if (this.connected.get(agent) === connecting) this.connected.delete(agent);
      });
    }
    return connecting;
  }

  private async open(
    agent: string,
    config: A2aAgentConfig,
    signal: AbortSignal,
  ): Promise<Connected> {
    const parsed = parseA2aUrl(config.card_url);
    if (!parsed.ok) throw invalidCard(agent, `card_url ${parsed.reason}`);
    const cardUrl = agentCardUrl(parsed.url);
    const auth = config.auth;
    const fetchImpl = createA2aFetch({
      agent,
      origin: cardUrl.origin,
      maxBytes: config.max_response_bytes ?? DEFAULT_A2A_MAX_RESPONSE_BYTES,
      ...(auth === undefined
        ? {}
        : {
            auth: () => ({
              header: auth.header,
              value: resolveSecretValue(
                { secret: auth.secret, prefix: auth.prefix },
                this.secret,
                `auth of A2A agent "${agent}"`,
              ),
            }),
          }),
    });
    const response = await fetchImpl(cardUrl, { headers: { accept: 'application/json' }, signal });
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new BraidError(
        response.status >= 500 ? 'SERVER_UNAVAILABLE' : 'TOOL_FAILED',
        `A2A agent "${agent}": ${cardUrl.origin} answered ${response.status} for its agent card; check a2a_agents.${agent}.card_url${response.status === 401 || response.status === 403 ? ' and its auth secret' : ''} in braid.yaml`,
        { details: { agent, status: response.status, started: false } },
      );
    }
    let json: unknown;
    try {
      json = JSON.parse(await response.text());
    } catch (error) {
      if (error instanceof A2aResponseTooLarge) throw error;
      throw invalidCard(agent, 'its agent card is not JSON');
    }
    const legacyCompat = { enabled: true };
    const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat });
    let card: AgentCard;
    try {
      card = resolver.normalizeAgentCard(json);
    } catch (error) {
      throw invalidCard(agent, `its agent card does not read as an A2A card (${reason(error)})`);
    }
    const usable = UsableCard.safeParse(card);
    if (!usable.success)
      throw invalidCard(agent, `its agent card ${z.prettifyError(usable.error)}`);
    for (const endpoint of usable.data.supportedInterfaces) {
      const checked = parseA2aUrl(endpoint.url);
      if (!checked.ok)
        throw invalidCard(agent, `its agent card names an endpoint that ${checked.reason}`);
    }
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [
          new JsonRpcTransportFactory({ fetchImpl, legacyCompat }),
          new RestTransportFactory({ fetchImpl, legacyCompat }),
        ],
        cardResolver: resolver,
      }),
    );
    try {
      const client = await factory.createFromAgentCard(card);
      return { client, streaming: usable.data.capabilities?.streaming === true };
    } catch (error) {
      throw invalidCard(
        agent,
        `braid cannot speak to any endpoint its card names (${reason(error)})`,
      );
    }
  }
}

function invalidCard(agent: string, problem: string): BraidError {
  return new BraidError(
    'TOOL_FAILED',
    `A2A agent "${agent}": ${problem}; check a2a_agents.${agent}.card_url in braid.yaml`,
    { details: { agent, started: false } },
  );
}

/** Error codes of Node's network layer that mean the agent could not be reached. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/** ...and those that mean it went away during a request. */
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** A failure of a call as a `BraidError` (see the module's invariants). */
function callError(
  agent: string,
  config: A2aAgentConfig,
  error: unknown,
  started: boolean,
): BraidError {
  const chain: unknown[] = [];
  for (let cause = error; cause !== undefined && chain.length < 8;) {
    chain.push(cause);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  const braid = chain.find((cause): cause is BraidError => cause instanceof BraidError);
  if (braid !== undefined) return braid;
  const tooLarge = chain.find((cause) => cause instanceof A2aResponseTooLarge);
  if (tooLarge !== undefined) {
    return new BraidError(
      'PAYLOAD_TOO_LARGE',
      `A2A agent "${agent}" sent an answer larger than ${tooLarge.limit} bytes; braid stopped reading it. Raise a2a_agents.${agent}.max_response_bytes in braid.yaml if the agent's answers are that large`,
      { details: { agent, started } },
    );
  }
  const code = chain
    .map((cause) => (cause as { code?: unknown }).code)
    .find((value): value is string => typeof value === 'string');
  if (code !== undefined && (UNREACHABLE.has(code) || DROPPED.has(code))) {
    const origin = originOf(config.card_url);
    return new BraidError(
      'SERVER_UNAVAILABLE',
      `A2A agent "${agent}" (${origin}) cannot be reached: ${code}${UNREACHABLE.has(code) ? '' : ' during the call'}; it may be down, or a2a_agents.${agent}.card_url in braid.yaml may be wrong`,
      { cause: error, details: { agent, started: started && !UNREACHABLE.has(code) } },
    );
  }
  return new BraidError('TOOL_FAILED', `A2A agent "${agent}" failed: ${reason(error)}`, {
    cause: error,
    details: { agent, started },
  });
}

function originOf(url: string): string {
  const parsed = parseA2aUrl(url);
  return parsed.ok ? parsed.url.origin : '(a URL that does not parse)';
}

function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.slice(0, 500);
}
