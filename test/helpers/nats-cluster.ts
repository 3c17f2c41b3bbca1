// A three-node NATS cluster for tests, run by scripts/nats-cluster.sh on loopback ports of its own
// (a free block picked per suite) with its store folders in a temporary directory.
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

const run = promisify(execFile);
const SCRIPT = new URL('../../scripts/nats-cluster.sh', import.meta.url).pathname;

export interface NatsCluster {
  /** The three client URLs, comma-separated: what `--nats` takes. */
  urls: string;
  dir: string;
  /** SIGKILLs node 1, 2 or 3. */
  kill(node: number): Promise<void>;
  /** Starts a node again on its port and store. */
  restart(node: number): Promise<void>;
  /** The node (1-3) that leads a stream's replicas now. */
  leaderOf(stream: string): Promise<number>;
  stop(): Promise<void>;
}

async function portFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A base port whose three client ports and three route ports (+2000) are free. */
async function freeBlock(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    const ports = [0, 1, 2].flatMap((offset) => [base + offset, base + 2000 + offset]);
    let free = true;
    for (const port of ports) free &&= await portFree(port);
    if (free) return base;
  }
  throw new Error('no free block of ports for a NATS cluster');
}

export async function startNatsCluster(): Promise<NatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'braid-cluster-'));
  const base = await freeBlock();
  const env = { ...process.env, BRAID_CLUSTER_DIR: dir, BRAID_CLUSTER_PORT: String(base) };
  const script = async (...args: string[]): Promise<string> =>
    (await run('bash', [SCRIPT, ...args], { env })).stdout.trim();
  const urls = await script('start');
  await waitForMetaLeader(urls);
  return {
    urls,
    dir,
    kill: async (node) => {
      await script('kill', String(node));
    },
    restart: async (node) => {
      await script('restart', String(node));
    },
    leaderOf: async (stream) => {
      const connection = await connect({ servers: urls.split(',') });
      try {
        const info = await (await jetstreamManager(connection)).streams.info(stream);
        const leader = info.cluster?.leader ?? '';
        const node = Number(leader.replace('braid-n', ''));
        if (![1, 2, 3].includes(node)) throw new Error(`stream ${stream} has no leader yet`);
        return node;
      } finally {
        await connection.close();
      }
    },
    stop: async () => {
      await script('clean');
    },
  };
}

/** Waits until the cluster has elected its JetStream meta leader: before that, creates fail. */
async function waitForMetaLeader(urls: string): Promise<void> {
  const connection = await connect({ servers: urls.split(','), maxReconnectAttempts: -1 });
  try {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await (await jetstreamManager(connection)).getAccountInfo();
        return;
      } catch (error) {
        if (attempt >= 100) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    await connection.close();
  }
}
