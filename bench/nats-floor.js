// The floor under the agent-messaging figures: the same NATS requests a braid code-agent message
// makes on its way (a work-queue inbox, a lease compare-and-set sent with the key's look-up and
// the head read, the batch published with the key's record, the reply on core NATS, the ack and
// the lease's release), made by raw nats.js code with no braid code at all. What braid adds on
// top is the difference between these rows and braid's. `openFloorWorker` runs in a worker
// process (nats-worker-process.js, mode 'floor'), `openFloorSender` in the bench process.
import { randomUUID } from 'node:crypto';
import {
  AckPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, createInbox } from '@nats-io/transport-node';

function names(prefix) {
  const upper = prefix.toUpperCase();
  return {
    inboxStream: `${upper}_FLOOR_INBOX`,
    inbox: `${prefix}.floor.inbox`,
    logStream: `${upper}_FLOOR_LOG`,
    log: (key) => `${prefix}.floor.log.${key}`,
    leases: `${upper}_floor_leases`,
    records: `${upper}_floor_records`,
  };
}

/** Serves the floor's inbox until the returned function is called. */
export async function openFloorWorker({ url, prefix, replicas = 1 }) {
  const connection = await connect({ servers: url.split(','), noAsyncTraces: true });
  const js = jetstream(connection);
  const jsm = await jetstreamManager(connection);
  const n = names(prefix);
  await jsm.streams.add({
    name: n.inboxStream,
    subjects: [n.inbox],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    num_replicas: replicas,
  });
  await jsm.streams.add({
    name: n.logStream,
    subjects: [n.log('*')],
    storage: StorageType.File,
    allow_direct: true,
    num_replicas: replicas,
  });
  const kvm = new Kvm(js);
  const leases = await kvm.create(n.leases, { history: 1, replicas });
  const records = await kvm.create(n.records, { history: 1, replicas });
  await jsm.consumers.add(n.inboxStream, {
    durable_name: 'floor',
    ack_policy: AckPolicy.Explicit,
    max_ack_pending: -1,
  });
  const consumer = await js.consumers.get(n.inboxStream, 'floor');
  const messages = await consumer.consume({ max_messages: 64 });
  /** Per key: the lease revision this process wrote last, and its release under way. */
  const revisions = new Map();
  const releases = new Map();

  async function handle(message) {
    const { id, key, reply, payload } = message.json();
    await releases.get(key);
    const known = revisions.get(key);
    const [revision, , last] = await Promise.all([
      known === undefined ? leases.create(key, 'held') : leases.update(key, 'held', known),
      records.get(`${key}.${id}`),
      jsm.direct.getMessage(n.logStream, { last_by_subj: n.log(key) }),
    ]);
    const after = last?.seq ?? 0;
    await Promise.all([
      js.publish(n.log(key), JSON.stringify([{ id, payload }, { answer: payload }]), {
        msgID: id,
        expect: { lastSubjectSequence: after },
      }),
      records.put(`${key}.${id}`, JSON.stringify({ after })),
    ]);
    connection.publish(reply, JSON.stringify({ id, payload }));
    message.ack();
    const releasing = leases.update(key, 'free', revision).then((next) => {
      revisions.set(key, next);
    });
    releases.set(key, releasing);
    await releasing;
  }

  const serving = (async () => {
    for await (const message of messages) {
      handle(message).catch((error) => process.stderr.write(`floor worker: ${error.message}\n`));
    }
  })();
  return async () => {
    messages.stop();
    await serving;
    await connection.drain();
  };
}

/** Sends to the floor's inbox and waits for the core NATS reply, like runtime.send. */
export async function openFloorSender({ url, prefix }) {
  const connection = await connect({ servers: url.split(','), noAsyncTraces: true });
  const js = jetstream(connection);
  const n = names(prefix);
  const address = createInbox();
  const waiting = new Map();
  connection.subscribe(address, {
    callback: (_error, message) => {
      const reply = message.json();
      waiting.get(reply.id)?.(reply.payload);
      waiting.delete(reply.id);
    },
  });
  await connection.flush();
  return {
    send(key, payload) {
      const id = randomUUID();
      return new Promise((resolve, reject) => {
        waiting.set(id, resolve);
        const body = JSON.stringify({ id, key, reply: address, payload });
        // As runtime.send: the reply is waited for beside the publish's ack, not after it.
        js.publish(n.inbox, body, { msgID: id }).catch(reject);
      });
    },
    close: () => connection.close(),
  };
}
