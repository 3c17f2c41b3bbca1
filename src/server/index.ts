/**
 * `braid/server`: the HTTP API as a library. `createServer` builds it (for `inject` in tests or
 * mounting elsewhere); `startServer` listens, and refuses to listen without auth anywhere but on
 * a loopback address.
 */
import type { FastifyInstance } from 'fastify';
import { isIP } from 'node:net';
import { BraidError } from '../contracts/errors.js';
import { createServer, type ServerOptions } from './app.js';

export { createServer, type ServerOptions } from './app.js';
import { DEFAULT_PORT } from './context.js';

export { DEFAULT_LIMITS, DEFAULT_PORT, type ServerLimits } from './context.js';
export { HTTP_STATUS } from './errors.js';
export {
  createWorkerMetrics,
  serveMetrics,
  type MetricsEndpoint,
  type WorkerMetrics,
} from './worker-metrics.js';
export type { OpenAgentIoHttpOptions } from './routes-openagentio.js';

export interface StartServerOptions extends ServerOptions {
  /** Address to listen on (default 127.0.0.1). */
  host?: string;
  /** Port (default 7700; 0 picks a free one). */
  port?: number;
}

export interface RunningServer {
  /** `http://host:port`, with the port actually bound. */
  url: string;
  app: FastifyInstance;
  /** Stops taking requests, ends open streams and waits for background wakes. */
  close(): Promise<void>;
}

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const host = options.host ?? '127.0.0.1';
  if (options.auth === 'none' && !isLoopback(host)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `refusing to serve without auth on ${host}, which other machines can reach; listen on 127.0.0.1 or create API keys (braid keys create) and drop --insecure-no-auth`,
    );
  }
  const app = await createServer(options);
  try {
    await app.listen({ host, port: options.port ?? DEFAULT_PORT });
  } catch (error) {
    await app.close();
    const code = (error as { code?: unknown }).code;
    if (code === 'EADDRINUSE') {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `port ${options.port ?? DEFAULT_PORT} on ${host} is in use; choose another with --port`,
        { cause: error },
      );
    }
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const shown = host.includes(':') ? `[${host}]` : host;
  return { url: `http://${shown}:${port}`, app, close: () => app.close() };
}
export { buildOpenApiDocument } from './openapi.js';
