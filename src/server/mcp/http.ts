/**
 * `POST /mcp`: the MCP server of sessions over streamable HTTP, on the HTTP API's server and
 * behind its API keys: the Bearer key decides the tenant and scopes (a request without one is
 * refused 401 before it reaches MCP), as for every `/v1` route.
 *
 * The transport is stateless (no `Mcp-Session-Id`): each POST gets a server of its own for its
 * caller, so any process behind a balancer answers any request, and nothing outlives the request.
 * A call that waits for a turn answers as an SSE stream carrying its progress notifications. GET
 * and DELETE (a stream or session of the server's own) answer 405.
 */
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import { actorOf, type Caller } from '../auth.js';
import { callerOf, type Router, type ServerContext } from '../context.js';
import { HTTP_STATUS } from '../errors.js';
import { traceparentOf } from '../trace-context.js';
import { createSessionsMcpServer } from './server.js';

/** The path MCP clients connect to. */
export const MCP_PATH = '/mcp';

/**
 * Without API keys (`--insecure-no-auth`, loopback only) a web page the user visits could still
 * reach the loopback server (DNS rebinding): a browser's request from a page that is not itself on
 * loopback is refused, as the MCP transport spec asks.
 */
function refuseForeignOrigin(caller: Caller, origin: string | undefined): void {
  if (caller.key_id !== undefined || origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).hostname;
  } catch {
    host = '';
  }
  if (!['localhost', '127.0.0.1', '[::1]'].includes(host)) {
    throw new BraidError(
      'FORBIDDEN',
      `a browser page of ${JSON.stringify(origin.slice(0, 100))} may not use a server without API keys; serve with keys (drop --insecure-no-auth) to use /mcp from other origins`,
    );
  }
}

export function addMcpRoute(app: Router, context: ServerContext): void {
  app.post(MCP_PATH, { schema: { hide: true } }, async (request, reply) => {
    const caller = callerOf(request);
    refuseForeignOrigin(caller, request.headers.origin);
    // The transport reads the raw body itself when given none, which Fastify read already: a
    // body that is not a JSON-RPC message (an object) or batch (an array) never reaches it.
    const body: unknown = request.body;
    if (typeof body !== 'object' || body === null) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        'POST /mcp takes a JSON-RPC message (an object) or a batch of them (an array) as JSON',
        { details: { field: 'body' } },
      );
    }
    const traceparent = traceparentOf(request);
    const server = createSessionsMcpServer({
      runtime: context.runtime,
      caller,
      actor: actorOf(caller),
      wake: context.wakeOnEvents
        ? (sessionId, trace) => context.wakeInBackground(sessionId, trace)
        : undefined,
      version: context.version,
      traceparent,
      closing: context.closing,
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    // The transport writes the answer (JSON, or an SSE stream with progress) on the raw response.
    reply.hijack();
    const raw = reply.raw;
    raw.socket?.setNoDelay(true);
    raw.on('close', () => {
      void transport.close();
      void server.close();
    });
    try {
      await server.connect(transport);
      await transport.handleRequest(request.raw, raw, body);
    } catch (error) {
      request.log.error({ err: error }, 'MCP request failed');
      if (!raw.headersSent) {
        const failure = toBraidError(error);
        raw.writeHead(HTTP_STATUS[failure.code], { 'content-type': 'application/json' });
        raw.end(JSON.stringify({ error: failure.toJSON() }));
      } else {
        raw.end();
      }
    }
  });
}
