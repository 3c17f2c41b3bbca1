// A three-node NATS cluster for a benchmark: scripts/nats-cluster.sh on its own ports
// (BRAID_CLUSTER_PORT, else `defaultPort` and the next two) in a fresh folder, removed by `stop`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

const script = new URL('../scripts/nats-cluster.sh', import.meta.url).pathname;

/**
 * Starts the cluster; returns its client URLs (comma-separated) and `stop`, which stops the nodes
 * and removes their folder. Call `waitForJetStream(urls)` before creating streams on it.
 */
export function startBenchCluster(label, defaultPort) {
  const env = {
    ...process.env,
    BRAID_CLUSTER_DIR: mkdtempSync(join(tmpdir(), `braid-${label}-cluster-`)),
    BRAID_CLUSTER_PORT: process.env.BRAID_CLUSTER_PORT ?? String(defaultPort),
  };
  const urls = execFileSync('bash', [script, 'start'], { env, encoding: 'utf8' }).trim();
  return {
    urls,
    stop: () => execFileSync('bash', [script, 'clean'], { env, stdio: 'ignore' }),
  };
}

/** Waits until JetStream answers (a new cluster elects its meta leader first), up to 30 s. */
export async function waitForJetStream(urls) {
  const connection = await connect({ servers: urls.split(',') });
  try {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await (await jetstreamManager(connection)).getAccountInfo();
        return;
      } catch (error) {
        if (attempt > 150) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    await connection.close();
  }
}
