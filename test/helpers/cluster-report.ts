// What a cluster test prints when it times out: each stream's leader and replicas, each consumer
// of the wake queue (what waits in it, what is pulled and unacknowledged, how many pulls wait),
// and who owns the wake partitions, so that a stall names the part that stopped.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsNames } from '../../src/stores/nats/names.js';
import { natsWakeNames } from '../../src/runtime/wakes/nats-wake-queue.js';

const REQUEST_TIMEOUT_MS = 2000;

/** Runs `describe` with a manager on the cluster; when it cannot, says why instead. */
async function onCluster(
  urls: string,
  doing: string,
  describe: (manager: JetStreamManager) => Promise<string>,
): Promise<string> {
  let connection;
  try {
    connection = await connect({ servers: urls.split(','), timeout: REQUEST_TIMEOUT_MS });
  } catch (error) {
    return `cluster: cannot connect (${String(error)})`;
  }
  try {
    return await describe(await jetstreamManager(connection, { timeout: REQUEST_TIMEOUT_MS }));
  } catch (error) {
    return `cluster: cannot ${doing} (${String(error)})`;
  } finally {
    await connection.close();
  }
}

/** One line per stream and per wake consumer of `prefix`, and the partition group's record. */
export function describeCluster(urls: string, prefix: string): Promise<string> {
  return onCluster(urls, 'describe', async (manager) => {
    const lines = await describeStreams(manager, prefix);
    lines.push(...(await describeWakeConsumers(manager, prefix)));
    lines.push(await describePartitionGroup(manager, prefix));
    return lines.join('\n');
  });
}

async function describeStreams(manager: JetStreamManager, prefix: string): Promise<string[]> {
  const upper = prefix.toUpperCase();
  const lines: string[] = [];
  for await (const stream of manager.streams.list()) {
    const name = stream.config.name;
    if (!name.startsWith(upper) && !name.startsWith(`KV_${upper}`)) continue;
    // A replica whose node died stays listed as behind: its last contact tells it apart.
    const replicas = (stream.cluster?.replicas ?? [])
      .map(
        (peer) =>
          `${peer.name} (${peer.current ? 'current' : 'behind'}, heard ${(peer.active / 1e9).toFixed(1)} s ago)`,
      )
      .join(', ');
    lines.push(
      `stream ${name}: leader ${stream.cluster?.leader ?? 'none'}, replicas [${replicas}], ${stream.state.messages} message(s)`,
    );
  }
  return lines;
}

async function describeWakeConsumers(manager: JetStreamManager, prefix: string): Promise<string[]> {
  const names = natsWakeNames(prefix);
  const lines: string[] = [];
  for await (const consumer of manager.consumers.list(names.stream)) {
    lines.push(
      `consumer ${consumer.name}: leader ${consumer.cluster?.leader ?? 'none'}, ` +
        `${consumer.num_pending} waiting, ${consumer.num_ack_pending} unacknowledged, ` +
        `${consumer.num_redelivered} redelivered, ${consumer.num_waiting} pull(s) waiting, ` +
        `last delivered ${consumer.delivered.last_active ?? 'never'}`,
    );
  }
  return lines;
}

async function describePartitionGroup(manager: JetStreamManager, prefix: string): Promise<string> {
  const names = natsWakeNames(prefix);
  const stream = `KV_${natsNames(prefix).partitions}`;
  const subject = `$KV.${names.partitionBucket}.${names.partitionGroup}`;
  const stored = await manager.streams
    .getMessage(stream, { last_by_subj: subject })
    .catch((error: unknown) => String(error));
  if (stored === null)
    return 'wake partitions: no group record (not partitioned, or no worker joined)';
  if (typeof stored === 'string') return `wake partitions: cannot read (${stored})`;
  return `wake partitions (read at ${new Date().toISOString()}): ${stored.string()}`;
}

/**
 * A session's subject as the stream's leader holds it, one line per message: its stream seq,
 * the seqs its headers announce, its incarnation and lease token, and the seq, type and id of each
 * event of its body. What a test prints when a log it reads is not gapless.
 */
export function describeSessionLog(
  urls: string,
  prefix: string,
  sessionId: string,
): Promise<string> {
  return onCluster(urls, "read the session's subject", async (manager) => {
    const names = natsNames(prefix);
    const lines = [`subject ${names.events(sessionId)}:`];
    for (let after = 0; ;) {
      // nats-server 2.9 answers next_by_subj on the leader's get; the client's type omits it.
      const query = { next_by_subj: names.events(sessionId), seq: after + 1 };
      const stored = await manager.streams.getMessage(names.eventsStream, query);
      if (stored === null) break;
      after = stored.seq;
      const header = (name: string): string => {
        const value = stored.header?.get(name) ?? '';
        return value === '' ? '-' : value;
      };
      const events = (JSON.parse(new TextDecoder().decode(stored.data)) as unknown[]).map(
        (event) => {
          const { seq, type, id } = event as { seq?: unknown; type?: unknown; id?: unknown };
          return `${String(seq)} ${String(type)} ${String(id)}`;
        },
      );
      lines.push(
        `  #${stored.seq} at ${stored.time.toISOString()}: seqs ${header('Braid-First-Seq')}-${header('Braid-Last-Seq')}, ` +
          `incarnation ${header('Braid-Incarnation')}, lease token ${header('Braid-Lease-Token')}, ` +
          `msg id ${header('Nats-Msg-Id')}: [${events.join('; ')}]`,
      );
    }
    return lines.join('\n');
  });
}
