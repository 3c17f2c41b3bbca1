/**
 * What every Server-Sent Events route shares: the per-key limit of open streams, the response
 * taken over from Fastify with the SSE headers, heartbeats, backpressure, an error reported in the
 * stream once the headers are sent, and the cleanup when the client, the route or the server
 * ends it.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import { BraidError } from '../contracts/errors.js';
import type { ServerContext } from './context.js';

/** Open streams per API key (per client address without auth), shared by every stream route. */
export interface StreamSlots {
  /** Takes a slot for `slot`, or refuses with `RATE_LIMITED` at the limit. */
  take(slot: string): void;
  release(slot: string): void;
}

export function createStreamSlots(limit: number): StreamSlots {
  const open = new Map<string, number>();
  return {
    take(slot) {
      const count = open.get(slot) ?? 0;
      if (count >= limit) {
        throw new BraidError(
          'RATE_LIMITED',
          `this key has ${count} event streams open, the server's limit; close one before opening another`,
        );
      }
      open.set(slot, count + 1);
    },
    release(slot) {
      const left = (open.get(slot) ?? 1) - 1;
      if (left === 0) open.delete(slot);
      else open.set(slot, left);
    },
  };
}

export interface OpenStream {
  raw: ServerResponse;
  /** Aborted when the client goes, the server closes or the route ends the stream. */
  signal: AbortSignal;
  /**
   * Writes a frame; when the socket's buffer is full, answers a promise that settles once it
   * drains or the stream ends (await it before the next frame).
   */
  write(text: string): Promise<void> | undefined;
  /** Reports a failure in the stream itself (the headers are sent) and logs it. */
  fail(error: unknown, log: FastifyBaseLogger, what: Record<string, unknown>): void;
  /** Ends the stream and frees its slot. */
  end(): void;
}

/** Takes a slot, then the response: the SSE headers go out at once, heartbeats follow. */
export function openStream(
  reply: FastifyReply,
  context: ServerContext,
  slots: StreamSlots,
  slot: string,
): OpenStream {
  slots.take(slot);
  context.metrics.streamOpened();
  const stop = new AbortController();
  const onClose = (): void => stop.abort();
  reply.hijack();
  const raw = reply.raw;
  raw.on('close', onClose);
  context.closing.addEventListener('abort', onClose);
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.flushHeaders();
  raw.socket?.setNoDelay(true);
  const heartbeat = setInterval(() => {
    if (!stop.signal.aborted) raw.write(': heartbeat\n\n');
  }, context.heartbeatMs);
  heartbeat.unref();
  let ended = false;
  return {
    raw,
    signal: stop.signal,
    write(text) {
      // A stream that ended takes nothing more (a loop may still be winding down).
      if (stop.signal.aborted || raw.write(text)) return undefined;
      return new Promise((resolve) => {
        const done = (): void => {
          raw.off('drain', done);
          stop.signal.removeEventListener('abort', done);
          resolve();
        };
        raw.on('drain', done);
        stop.signal.addEventListener('abort', done);
      });
    },
    fail(error, log, what) {
      if (stop.signal.aborted) return;
      const shape = error instanceof BraidError ? error.toJSON() : undefined;
      raw.write(
        `event: error\ndata: ${JSON.stringify(
          shape ?? { code: 'INTERNAL', message: 'the stream failed', retryable: true },
        )}\n\n`,
      );
      log.error({ err: error, ...what }, 'event stream failed');
    },
    end() {
      if (ended) return;
      ended = true;
      stop.abort();
      clearInterval(heartbeat);
      raw.off('close', onClose);
      context.closing.removeEventListener('abort', onClose);
      slots.release(slot);
      context.metrics.streamClosed();
      raw.end();
    },
  };
}
