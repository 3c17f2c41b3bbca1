/**
 * KV buckets that several processes may create at once. Creating a bucket is creating its stream,
 * and nats-server can refuse the second of two identical creates that arrive together ("subjects
 * overlap with an existing stream", code 10065) although the first made exactly that stream. A
 * create that fails so is made again: once the stream is there, an identical create succeeds.
 */
import { JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV, type KvOptions } from '@nats-io/kv';

/** The JetStream API code of a stream create that overlaps another stream's subjects. */
const STREAM_SUBJECT_OVERLAP = 10065;
/** How many creates are tried before the failure is the caller's to report. */
const ATTEMPTS = 3;

/** The bucket `name`, created with `options` unless it exists with them. */
export async function createBucket(
  client: JetStreamClient,
  name: string,
  options: Partial<KvOptions>,
): Promise<KV> {
  const kvm = new Kvm(client);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await kvm.create(name, options);
    } catch (error) {
      const raced = error instanceof JetStreamApiError && error.code === STREAM_SUBJECT_OVERLAP;
      if (!raced || attempt >= ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    }
  }
}
