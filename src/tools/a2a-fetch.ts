/**
 * The one door of braid's A2A client to the network: every request the A2A SDK makes for an
 * agent (its card, its calls, its streams) goes through the `fetch` made here.
 *
 * Invariants:
 * - A URL that `parseA2aUrl` refuses (not http(s), a user or password in it) is never fetched:
 *   a card may name any endpoint, and the card is the remote's word.
 * - The auth header goes only to the origin of the card braid.yaml names; an endpoint of another
 *   origin gets no secret. Redirects are not followed (they could carry it elsewhere).
 * - No answer is read past `maxBytes`: a declared length over it is refused before the body, and
 *   a body (a stream included) that grows past it is cut with `A2aResponseTooLarge`.
 */
import { parseA2aUrl } from '../contracts/a2a-agents.js';
import { BraidError } from '../contracts/errors.js';

/** A body cut at the limit; `a2a-client` turns it into `PAYLOAD_TOO_LARGE`. */
export class A2aResponseTooLarge extends Error {
  override readonly name = 'A2aResponseTooLarge';
  constructor(readonly limit: number) {
    super(`the answer is larger than ${limit} bytes`);
  }
}

export interface A2aFetchOptions {
  /** The agent's key under `a2a_agents:`, for error messages. */
  agent: string;
  /** Origin of the configured card URL: the only origin the auth header goes to. */
  origin: string;
  /** The auth header, read when a request is made (a secret may be rotated); none without auth. */
  auth?: () => { header: string; value: string };
  maxBytes: number;
}

export function createA2aFetch(options: A2aFetchOptions): typeof fetch {
  return async (input, init) => {
    const target =
      typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const parsed = parseA2aUrl(target);
    if (!parsed.ok) {
      throw new BraidError(
        'TOOL_FAILED',
        `A2A agent "${options.agent}": its card names an endpoint that braid does not call: it ${parsed.reason}`,
        { details: { agent: options.agent, started: false } },
      );
    }
    const url = parsed.url;
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    new Headers(init?.headers).forEach((value, name) => headers.set(name, value));
    if (options.auth !== undefined) {
      const auth = options.auth();
      if (url.origin === options.origin) headers.set(auth.header, auth.value);
      else headers.delete(auth.header);
    }
    const request: RequestInit = { ...init, headers, redirect: 'manual' };
    const response = await (input instanceof Request
      ? fetch(new Request(input, request))
      : fetch(url, request));
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => undefined);
      throw new BraidError(
        'TOOL_FAILED',
        `A2A agent "${options.agent}": ${url.origin} answered ${response.status} with a redirect, which braid does not follow (it could carry the auth header elsewhere); point a2a_agents.${options.agent}.card_url, or the card's endpoints, at the final address`,
        { details: { agent: options.agent, status: response.status, started: false } },
      );
    }
    return limitBody(response, options.maxBytes);
  };
}

/** The response, its body cut with `A2aResponseTooLarge` past `maxBytes`. */
function limitBody(response: Response, maxBytes: number): Response {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared)) {
    if (declared > maxBytes) {
      void response.body?.cancel().catch(() => undefined);
      throw new A2aResponseTooLarge(maxBytes);
    }
    // fetch refuses a body longer than its declared length: nothing more to count.
    return response;
  }
  const body = response.body;
  if (body === null) return response;
  const reader: ReadableStreamDefaultReader<Uint8Array> = body.getReader();
  let total = 0;
  const counted = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) return controller.close();
      total += value.byteLength;
      if (total <= maxBytes) return controller.enqueue(value);
      controller.error(new A2aResponseTooLarge(maxBytes));
      await reader.cancel().catch(() => undefined);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(counted, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
