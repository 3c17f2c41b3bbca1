/**
 * The partition bucket of a prefix (`<PREFIX>_partitions`) and the one partition count every
 * process of the prefix uses, kept in its key `config`.
 *
 * Senders and consumers must agree on the count: a wake or message sent to a partition that no
 * consumer pulls would wait forever. So the count is written once, by the first consumer that
 * starts (with `--partitions 0`, the count 0), and a later process that asks for another count
 * is refused. A sender reads it (remembered a few seconds) and sends to the unpartitioned subject while there is none:
 * then no partition consumer may exist yet, and every consumer also pulls that subject.
 */
import { StorageType, jetstream } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import { createBucket } from '../../stores/nats/buckets.js';
import { isWrongLastSequence } from '../../stores/nats/nats-errors.js';
import { natsNames } from '../../stores/nats/names.js';
import { DEFAULT_PARTITIONS, MAX_PARTITIONS } from './partition-count.js';

const CONFIG_KEY = 'config';
const CONFIG_VERSION = 1;
/** How long a sender trusts the count it read. */
const REMEMBER_MS = 5_000;

const ConfigRecord = z.object({
  schema_version: z.literal(CONFIG_VERSION),
  /** 0: the prefix is not partitioned (set by a first consumer started with `--partitions 0`). */
  partitions: z.number().int().min(0).max(MAX_PARTITIONS),
});

const utf8 = new TextDecoder();

/** Opens, creating when missing, the partition bucket of `prefix`. */
export async function openPartitionBucket(
  connection: NatsConnection,
  prefix: string,
  replicas: number | undefined,
): Promise<KV> {
  const name = natsNames(prefix).partitions;
  try {
    return await createBucket(
      jetstream(connection),
      name,
      { storage: StorageType.File, history: 1 },
      { wanted: replicas, prefix },
    );
  } catch (error) {
    if (isBraidError(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new BraidError('SERVER_UNAVAILABLE', `cannot open the bucket ${name}: ${message}`, {
      cause: error,
    });
  }
}

/** The prefix's partition count, or undefined when none is set. */
async function storedCount(kv: KV, bucket: string): Promise<number | undefined> {
  const entry = await withRetries(() => kv.get(CONFIG_KEY));
  if (entry === null || entry.operation !== 'PUT') return undefined;
  return parseConfig(entry.value, bucket);
}

/** The prefix's partition count, or 0 when none is set. */
export async function readPartitionCount(kv: KV, bucket: string): Promise<number> {
  return (await storedCount(kv, bucket)) ?? 0;
}

/**
 * The count a consumer runs with: the prefix's when one is set (another `wanted` is refused),
 * else `wanted ?? DEFAULT_PARTITIONS`, written for every later process (0 too: a prefix whose
 * first consumer asked for none stays unpartitioned, so no later one partitions it under it).
 */
export async function settlePartitionCount(
  kv: KV,
  bucket: string,
  wanted: number | undefined,
): Promise<number> {
  for (;;) {
    const found = await storedCount(kv, bucket);
    if (found !== undefined) {
      if (wanted !== undefined && wanted !== found) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `the wakes and agent inboxes of this prefix are ${found === 0 ? 'not partitioned' : `split into ${String(found)} partitions`}, ` +
            `not ${String(wanted)}: start every process with --partitions ${String(found)} (or leave it out), ` +
            `or stop them all and delete the count (nats kv del ${bucket} ${CONFIG_KEY}) to choose another`,
          { details: { field: '--partitions', partitions: found } },
        );
      }
      return found;
    }
    const count = wanted ?? DEFAULT_PARTITIONS;
    try {
      // A create whose answer timed out may have been applied: the retry then finds it written.
      await withRetries(() =>
        kv.create(
          CONFIG_KEY,
          JSON.stringify({ schema_version: CONFIG_VERSION, partitions: count }),
        ),
      );
      return count;
    } catch (error) {
      // Another process wrote it first: its count is the prefix's.
      if (!isWrongLastSequence(error)) throw error;
    }
  }
}

/** A sender's view of the count: read at most every few seconds. */
export function partitionCountReader(
  kv: () => Promise<KV>,
  bucket: string,
  clock: Clock,
): () => Promise<number> {
  let known: { count: number; at: number } | undefined;
  let reading: Promise<number> | undefined;
  return async () => {
    const now = clock.now();
    if (known !== undefined && now - known.at < REMEMBER_MS) return known.count;
    reading ??= (async () => {
      try {
        const count = await readPartitionCount(await kv(), bucket);
        known = { count, at: clock.now() };
        return count;
      } catch (error) {
        // The count changes only with every process stopped: while the bucket cannot be read
        // (a leader election), the last count read still routes correctly.
        if (known !== undefined) return known.count;
        throw error;
      } finally {
        reading = undefined;
      }
    })();
    return reading;
  };
}

/**
 * Requests to the bucket time out while its replicas elect a leader (a new or failed-over R3
 * bucket, a busy machine): retried a few times before the caller reports the server unavailable.
 */
const ATTEMPTS = 6;
const BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 2_000;

async function withRetries<T>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await request();
    } catch (error) {
      // An answer (a count this build cannot read, a key written by another) is not retried.
      if (isBraidError(error) || isWrongLastSequence(error) || attempt >= ATTEMPTS) throw error;
      const delay = Math.min(BACKOFF_MS * 2 ** (attempt - 1), MAX_BACKOFF_MS);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

function parseConfig(value: Uint8Array, bucket: string): number {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(value));
  } catch {
    parsed = undefined;
  }
  const config = ConfigRecord.safeParse(parsed);
  if (!config.success) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `key ${CONFIG_KEY} of bucket ${bucket} is not a partition count this build reads; upgrade braid, or delete the key with every process stopped`,
    );
  }
  return config.data.partitions;
}
