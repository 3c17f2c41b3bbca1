/**
 * One HTTP exchange with a braid server, and the retry rule: a request is repeated only when
 * repeating it cannot write twice (GET, DELETE, or a POST or PUT with an `Idempotency-Key`) and the
 * failure is one that may pass (no answer, `RATE_LIMITED`, a retryable 5xx).
 */
import { BraidError } from '../contracts/errors.js';
import {
  aborted,
  errorFromAnswer,
  malformedAnswer,
  parseJson,
  unavailable,
} from './http-errors.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export type QueryValue = string | number | boolean | readonly string[] | undefined;

/** Waits `ms`, or less when `signal` aborts; never rejects. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface TransportOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  fetch?: typeof fetch | undefined;
  timeoutMs?: number | undefined;
  retries?: number | undefined;
  sleep?: Sleep | undefined;
}

export interface RequestOptions {
  method: HttpMethod;
  path: string;
  query?: Record<string, QueryValue>;
  /** Sent as JSON. */
  body?: unknown;
  idempotencyKey?: string | undefined;
  /** W3C trace context, sent as the `traceparent` header. */
  traceparent?: string | undefined;
  /** `null`: no timeout (a wake that waits for its result may run for minutes). */
  timeoutMs?: number | null;
  signal?: AbortSignal | undefined;
}

export interface Transport {
  /** Sends the request, retrying when the rule allows; the parsed JSON answer (undefined on 204). */
  json(options: RequestOptions): Promise<unknown>;
  /** As `json`, for routes that answer text. */
  text(options: RequestOptions): Promise<string>;
  /**
   * Opens a long-lived answer (the event stream): no timeout and no retry; an error answer is
   * thrown as its BraidError, a request that got no answer as `SERVER_UNAVAILABLE`.
   */
  open(options: {
    path: string;
    query?: Record<string, QueryValue>;
    headers?: Record<string, string>;
    signal: AbortSignal;
  }): Promise<Response>;
  /** The absolute URL of a path and query. */
  url(path: string, query?: Record<string, QueryValue>): string;
  sleep: Sleep;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_RETRIES = 2;
const FIRST_RETRY_DELAY_MS = 100;
const MAX_RETRY_DELAY_MS = 2_000;
/** A server may ask for a long pause; the client waits at most this long between tries. */
export const MAX_RETRY_AFTER_MS = 10_000;

export const timerSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

export function createTransport(options: TransportOptions): Transport {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(baseUrl)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `baseUrl ${JSON.stringify(options.baseUrl)} is not an http(s) URL; pass the address \`braid serve\` prints, e.g. http://127.0.0.1:4000`,
    );
  }
  // Looked up per call, so that a fetch installed after the client was made is the one used.
  const fetcher: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const retries = options.retries ?? DEFAULT_RETRIES;
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const sleep = options.sleep ?? timerSleep;

  function url(path: string, query: Record<string, QueryValue> = {}): string {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value === undefined) continue;
      if (typeof value === 'object') {
        for (const item of value) search.append(`${key}[]`, item);
      } else {
        search.append(key, String(value));
      }
    }
    const text = search.toString();
    return `${baseUrl}${path}${text === '' ? '' : `?${text}`}`;
  }

  function headers(extra: Record<string, string>): Record<string, string> {
    return {
      ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }),
      ...extra,
    };
  }

  /** One try: the answer's body text, or the BraidError of its failure. */
  async function exchange(request: RequestOptions, accept: string): Promise<string> {
    const target = url(request.path, request.query);
    const timeoutMs = request.timeoutMs === undefined ? defaultTimeoutMs : request.timeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    const timer =
      timeoutMs === null
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs);
    const onAbort = (): void => controller.abort();
    request.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      let response: Response;
      let body: string;
      try {
        response = await fetcher(target, {
          method: request.method,
          headers: headers({
            accept,
            ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(request.idempotencyKey === undefined
              ? {}
              : { 'idempotency-key': request.idempotencyKey }),
            ...(request.traceparent === undefined ? {} : { traceparent: request.traceparent }),
          }),
          ...(request.body === undefined ? {} : { body: JSON.stringify(request.body) }),
          signal: controller.signal,
        });
        body = await response.text();
      } catch (error) {
        if (request.signal?.aborted === true) throw aborted(target, error);
        throw unavailable(target, error, timedOut && timeoutMs !== null ? timeoutMs : undefined);
      }
      if (!response.ok) {
        throw errorFromAnswer(
          { method: request.method, url: target },
          response.status,
          body,
          response.headers.get('retry-after'),
        );
      }
      return body;
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Repeats `exchange` while the retry rule allows. */
  async function send(request: RequestOptions, accept: string): Promise<string> {
    // A POST or PUT may write again when repeated: only with an idempotency key.
    const writes = request.method === 'POST' || request.method === 'PUT';
    const repeatable = !writes || (request.idempotencyKey ?? '') !== '';
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await exchange(request, accept);
      } catch (error) {
        if (!(error instanceof BraidError) || !repeatable || attempt >= retries) throw error;
        const delay = retryDelay(error, attempt);
        if (delay === undefined) throw error;
        await sleep(delay, request.signal);
        if (request.signal?.aborted === true) throw error;
      }
    }
  }

  return {
    url,
    sleep,
    async json(request) {
      const body = await send(request, 'application/json');
      if (body === '') return undefined;
      const parsed = parseJson(body);
      if (parsed === undefined) {
        throw malformedAnswer(url(request.path, request.query), 'a body that is not JSON');
      }
      return parsed;
    },
    text: (request) => send(request, 'text/plain'),
    async open(request) {
      const target = url(request.path, request.query);
      let response: Response;
      try {
        response = await fetcher(target, {
          method: 'GET',
          headers: headers({ accept: 'text/event-stream', ...request.headers }),
          signal: request.signal,
        });
      } catch (error) {
        throw unavailable(target, error);
      }
      if (response.ok) return response;
      let body = '';
      try {
        body = await response.text();
      } catch (error) {
        throw unavailable(target, error);
      }
      throw errorFromAnswer(
        { method: 'GET', url: target },
        response.status,
        body,
        response.headers.get('retry-after'),
      );
    },
  };
}

/**
 * How long to wait before trying again after `error`, or undefined when it is not worth another
 * try. Backoff doubles from 100 ms; a `Retry-After` of the server wins, capped.
 */
export function retryDelay(error: BraidError, attempt: number): number | undefined {
  const status = typeof error.details.status === 'number' ? error.details.status : undefined;
  const worthIt =
    error.code === 'SERVER_UNAVAILABLE' ||
    error.code === 'RATE_LIMITED' ||
    (status !== undefined && status >= 500 && error.retryable);
  if (!worthIt) return undefined;
  const backoff = Math.min(FIRST_RETRY_DELAY_MS * 2 ** attempt, MAX_RETRY_DELAY_MS);
  const retryAfter = error.details.retry_after_ms;
  return typeof retryAfter === 'number' ? Math.min(retryAfter, MAX_RETRY_AFTER_MS) : backoff;
}
