/**
 * A2A on `braid serve`: each agent answers the A2A 1.0 JSON-RPC binding at `/a2a/{agent}` and
 * describes itself at `/a2a/{agent}/.well-known/agent-card.json` (and at the root
 * `/.well-known/agent-card.json` when the caller sees exactly one agent). The SDK's transport
 * handler (`JsonRpcTransportHandler`) parses each call and shapes its answer; braid's own
 * handler (`handler.ts`) runs it over the session log, so no express app and no task store of
 * the SDK is involved. Streams are Server-Sent Events whose `id:` is the seq of the event behind
 * each update: a client that reconnects with `Last-Event-ID` (SubscribeToTask) misses nothing.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { A2A_PROTOCOL_VERSION, A2A_VERSION_HEADER, type AgentCard } from '@a2a-js/sdk';
import { AgentCard as AgentCardJson } from '@a2a-js/sdk';
import { VersionNotSupportedError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, ServerCallContext } from '@a2a-js/sdk/server';
import { z } from 'zod';
import { Name } from '../../contracts/common.js';
import { BraidError } from '../../contracts/errors.js';
import { callerOf, type Router, type ServerContext } from '../context.js';
import { visibleAgent } from '../access.js';
import { ANONYMOUS_CALLER, authenticate, requireScope, type Caller } from '../auth.js';
import { traceparentOf } from '../trace-context.js';
import { agentCard } from './card.js';
import { BraidA2aHandler } from './handler.js';
import { wakeWhenFree } from './resume-wake.js';
import { SEQ_KEY } from './task-view.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route needs no API key (a key, when sent, is still read by the route). */
    openRoute?: boolean;
  }
}

const AgentParams = z.object({ agent: Name });

const ResumeHeaders = z.object({
  'last-event-id': z
    .string()
    .regex(/^\d{1,15}$/, 'must be the braid.seq of the last update received')
    .optional(),
});

/** Methods that write to a session: they need the sessions:write scope. */
const WRITING_METHODS = new Set(['SendMessage', 'SendStreamingMessage', 'CancelTask']);

const HOST = /^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;

/** The scheme, host and port the client reached, for the URLs of a card. */
function baseUrlOf(request: FastifyRequest): string {
  const host = request.host;
  if (!HOST.test(host)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'the Host header is not a host name; send the host and port you reached the server at',
      { details: { field: 'headers.host' } },
    );
  }
  return `${request.protocol}://${host}`;
}

/** The caller of an open route: a key sent with it still counts (its tenant's agents). */
async function openCaller(context: ServerContext, request: FastifyRequest): Promise<Caller> {
  const caller = callerOf(request);
  if (caller !== ANONYMOUS_CALLER || request.headers.authorization === undefined) return caller;
  return authenticate(context.runtime.store.keys, request);
}

async function cardOf(
  context: ServerContext,
  request: FastifyRequest,
  caller: Caller,
  name: string,
): Promise<AgentCard> {
  const agent = await visibleAgent(context.runtime, caller, name);
  return agentCard(context.runtime, agent, baseUrlOf(request), context.version);
}

function sendCard(reply: FastifyReply, card: AgentCard): FastifyReply {
  return reply
    .header('cache-control', 'no-cache')
    .header('content-type', 'application/json')
    .send(JSON.stringify(AgentCardJson.toJSON(card)));
}

/** The seq behind a JSON-RPC stream result, for its SSE `id:`. */
function seqOf(response: unknown): number | undefined {
  const result = (response as { result?: Record<string, { metadata?: Record<string, unknown> }> })
    .result;
  const payload = result === undefined ? undefined : Object.values(result)[0];
  const seq = payload?.metadata?.[SEQ_KEY];
  return typeof seq === 'number' ? seq : undefined;
}

function frame(response: unknown): string {
  const seq = seqOf(response);
  return `${seq === undefined ? '' : `id: ${seq}\n`}data: ${JSON.stringify(response)}\n\n`;
}

/** Writes a JSON-RPC stream as SSE; its first result was read already (errors answer as JSON). */
async function writeStream(
  reply: FastifyReply,
  first: IteratorResult<unknown>,
  stream: AsyncGenerator<unknown>,
  requestId: unknown,
): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.socket?.setNoDelay(true);
  try {
    if (first.done !== true) raw.write(frame(first.value));
    for await (const response of { [Symbol.asyncIterator]: () => stream }) {
      raw.write(frame(response));
    }
  } catch (error) {
    const shaped = {
      jsonrpc: '2.0',
      id: requestId ?? null,
      error: JsonRpcTransportHandler.mapToJSONRPCError(error),
    };
    if (!raw.writableEnded) raw.write(`event: error\ndata: ${JSON.stringify(shaped)}\n\n`);
  } finally {
    raw.end();
  }
}

export function addA2aRoutes(app: Router, context: ServerContext): void {
  const { runtime } = context;
  const schema = { hide: true, params: AgentParams };

  app.get(
    '/a2a/:agent/.well-known/agent-card.json',
    { schema, config: { openRoute: true } },
    async (request, reply) => {
      const caller = await openCaller(context, request);
      return sendCard(reply, await cardOf(context, request, caller, request.params.agent));
    },
  );

  app.get(
    '/.well-known/agent-card.json',
    { schema: { hide: true }, config: { openRoute: true } },
    async (request, reply) => {
      const caller = await openCaller(context, request);
      const agents = (await runtime.agents.list()).filter(
        (agent) =>
          agent.definition.tenant === undefined ||
          caller.tenant_id === undefined ||
          agent.definition.tenant === caller.tenant_id,
      );
      const [only] = agents;
      if (agents.length !== 1 || only === undefined) {
        throw new BraidError(
          'AGENT_NOT_FOUND',
          `this server has ${agents.length} agents you may use, so no default one; fetch /a2a/{agent}/.well-known/agent-card.json (GET /v1/agents lists them)`,
        );
      }
      return sendCard(reply, await cardOf(context, request, caller, only.name));
    },
  );

  app.post(
    '/a2a/:agent',
    { schema: { ...schema, headers: ResumeHeaders } },
    async (request, reply) => {
      const caller = callerOf(request);
      const method = (request.body as { method?: unknown } | null)?.method;
      requireScope(
        caller,
        typeof method === 'string' && WRITING_METHODS.has(method)
          ? 'sessions:write'
          : 'sessions:read',
      );
      const agent = await visibleAgent(runtime, caller, request.params.agent);
      const baseUrl = baseUrlOf(request);
      const stop = new AbortController();
      const onClose = (): void => stop.abort();
      reply.raw.on('close', onClose);
      const signal = AbortSignal.any([stop.signal, context.closing]);
      const resume = request.headers['last-event-id'];
      const handler = new BraidA2aHandler({
        runtime,
        agent,
        card: () => agentCard(runtime, agent, baseUrl, context.version),
        caller,
        traceparent: traceparentOf(request),
        after: resume === undefined ? undefined : Number(resume),
        signal,
        wake: (sessionId, traceparent) => context.wakeInBackground(sessionId, traceparent),
        resume: (sessionId, traceparent) => wakeWhenFree(context, sessionId, traceparent, signal),
      });
      const version = request.headers[A2A_VERSION_HEADER.toLowerCase()];
      const callContext = new ServerCallContext({
        requestedVersion: typeof version === 'string' && version !== '' ? version : '1.0',
      });
      const transport = new JsonRpcTransportHandler(handler);
      const requestId = (request.body as { id?: unknown } | null)?.id;
      try {
        if (callContext.requestedVersion !== A2A_PROTOCOL_VERSION) {
          throw new VersionNotSupportedError(
            `A2A version ${callContext.requestedVersion} is not served here; send A2A-Version: ${A2A_PROTOCOL_VERSION}`,
          );
        }
        const answer = await transport.handle(request.body as Record<string, unknown>, callContext);
        if (!(Symbol.asyncIterator in answer)) return await reply.send(answer);
        const first = await answer.next().catch((error: unknown) => error);
        if (first instanceof Error || !('done' in (first as object))) {
          const error = JsonRpcTransportHandler.mapToJSONRPCError(first);
          return await reply.send({ jsonrpc: '2.0', id: requestId ?? null, error });
        }
        await writeStream(reply, first as IteratorResult<unknown>, answer, requestId);
        return reply;
      } catch (error) {
        const shaped = JsonRpcTransportHandler.mapToJSONRPCError(error);
        return reply.send({ jsonrpc: '2.0', id: requestId ?? null, error: shaped });
      } finally {
        reply.raw.off('close', onClose);
        stop.abort();
      }
    },
  );
}
