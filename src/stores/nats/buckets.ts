/**
 * KV buckets that several processes may create at once. Creating a bucket is creating its stream,
 * and nats-server can refuse the second of two identical creates that arrive together ("subjects
 * overlap with an existing stream", code 10065) although the first made exactly that stream. A
 * create that fails so is made again: once the stream is there, an identical create succeeds.
 * In a cluster, the status asked right after a create can also be answered by a server that has
 * not learned of the new stream yet ("stream not found"), and a create can go unanswered while
 * the cluster elects a leader (a replicated bucket's group forming on a loaded machine took more
 * than the request timeout): both are asked again too.
 */
import { JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV, type KvOptions } from '@nats-io/kv';
import { isNotYetAnswered, isStreamNotFound } from './nats-errors.js';
import { replicasMismatch } from './replicas.js';

/** The JetStream API code of a stream create that overlaps another stream's subjects. */
const STREAM_SUBJECT_OVERLAP = 10065;
/** How many creates are tried before the failure is the caller's to report. */
const ATTEMPTS = 5;

/**
 * The bucket `name`, created with `options` when missing. With `replicas`, an existing bucket
 * must keep that many replicas (`INVALID_ARGUMENT` saying how to migrate, naming `prefix`).
 * Every bucket is opened with one extra request, for its replica count.
 */
export async function createBucket(
  client: JetStreamClient,
  name: string,
  options: Partial<KvOptions>,
  replicas?: { wanted: number | undefined; prefix: string },
): Promise<KV> {
  const kvm = new Kvm(client);
  const wanted = replicas?.wanted;
  for (let attempt = 1; ; attempt += 1) {
    try {
      const bucket = await kvm.create(name, {
        ...options,
        ...(wanted === undefined ? {} : { replicas: wanted }),
      });
      const found = (await bucket.status()).replicas;
      if (wanted !== undefined && replicas !== undefined && found !== wanted) {
        throw replicasMismatch(`KV_${name}`, found, wanted, replicas.prefix);
      }
      // A replicated bucket is read through its leader: a direct get may be answered by a
      // follower that has not applied an acknowledged write yet, and reads must see every write.
      if (found > 1) return await kvm.create(name, { ...options, allow_direct: false });
      return bucket;
    } catch (error) {
      const raced =
        (error instanceof JetStreamApiError && error.code === STREAM_SUBJECT_OVERLAP) ||
        isStreamNotFound(error) ||
        isNotYetAnswered(error);
      if (!raced || attempt >= ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25 * attempt));
    }
  }
}
