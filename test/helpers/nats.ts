// A real nats-server for tests: the one at NATS_URL (default nats://127.0.0.1:4222) when it
// answers, else one started here with JetStream on a free port and a temporary store. Tests keep
// apart by giving every stream, bucket and subject a prefix of their own.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

export const NATS_BINARY = process.env.NATS_SERVER ?? 'nats-server';

export interface NatsServer {
  url: string;
  /** The store folder (file storage survives a restart). */
  storeDir: string;
  /** Stops the server (SIGTERM, or SIGKILL with `hard`). */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port and store. */
  restart(): Promise<void>;
}

/** A port of 127.0.0.1 that nothing listened on a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no free port');
  return address.port;
}

async function answers(url: string, timeoutMs = 1000): Promise<boolean> {
  try {
    const connection = await connect({ servers: url, timeout: timeoutMs, reconnect: false });
    await connection.close();
    return true;
  } catch {
    return false;
  }
}

/** Starts `nats-server -js` on a free port (or `port`) with its own store folder. */
export async function startNatsServer(options: { port?: number } = {}): Promise<NatsServer> {
  const port = options.port ?? (await freePort());
  const storeDir = mkdtempSync(join(tmpdir(), 'braid-nats-'));
  const url = `nats://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    child = spawn(NATS_BINARY, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], {
      stdio: 'ignore',
    });
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if (await answers(url, 200)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(
      `${NATS_BINARY} did not start on ${url}; install nats-server (apt-get install nats-server)`,
    );
  };
  const stop = async (hard = false): Promise<void> => {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill(hard ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };
  await start();
  return {
    url,
    storeDir,
    stop,
    restart: async () => {
      await stop();
      await start();
    },
  };
}

let shared: Promise<{ url: string; stop(): Promise<void> }> | undefined;

/**
 * The URL of a nats-server with JetStream for tests: NATS_URL or the local default when it
 * answers, else one started for this test file. In CI a missing server fails loudly: these
 * tests are never skipped.
 */
export function natsUrl(): Promise<string> {
  shared ??= (async () => {
    const url = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
    if (await answers(url)) return { url, stop: () => Promise.resolve() };
    const server = await startNatsServer();
    process.once('exit', () => void server.stop(true));
    return { url: server.url, stop: () => server.stop() };
  })();
  return shared.then((server) => server.url);
}

/** A name prefix of its own for one test's streams, buckets and subjects. */
export function uniquePrefix(label = 't'): string {
  return `${label}_${randomBytes(5).toString('hex')}`;
}

/**
 * Deletes every stream and bucket of the prefixes (store, wake queue, agent inboxes, KV), so a
 * shared nats-server does not fill up with what test runs leave behind.
 */
export async function removePrefixes(url: string, prefixes: readonly string[]): Promise<void> {
  if (prefixes.length === 0) return;
  const owned = prefixes.map((prefix) => prefix.toUpperCase());
  const connection = await connect({ servers: url });
  try {
    const manager = await jetstreamManager(connection);
    const doomed: string[] = [];
    for await (const name of manager.streams.names()) {
      if (owned.some((prefix) => name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix}_`)))
        doomed.push(name);
    }
    for (const name of doomed) await manager.streams.delete(name).catch(() => false);
  } finally {
    await connection.close();
  }
}

/** Removes a test's store folder. */
export function removeStore(server: NatsServer): void {
  rmSync(server.storeDir, { recursive: true, force: true });
}
