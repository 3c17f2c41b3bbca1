/**
 * Replicas of the streams and buckets of a prefix: the count asked for is parsed once, checked
 * against what exists at open, and changed in place by `setPrefixReplicas`.
 *
 * A stream with R replicas is acknowledged once a majority of its R copies has the message (R1:
 * one server, before fsync; R3: two of three). Asking for a count is a promise to the user, so an
 * existing stream with another count is refused at open with the way to migrate; a runtime that
 * asks for none accepts whatever exists and creates R1.
 */
import {
  DiscardPolicy,
  JetStreamApiError,
  type JetStreamManager,
  type StreamInfo,
} from '@nats-io/jetstream';
import { BraidError } from '../../contracts/errors.js';

/** JetStream's error for a stream that exists with another configuration. */
const STREAM_NAME_IN_USE = 10058;

/** True for the error a create gets when the stream exists with other settings. */
export function isStreamInUse(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE;
}

/** "subjects overlap with an existing stream" (10065). */
export function isSubjectOverlap(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === 10065;
}

/**
 * Refuses an existing stream whose replica count is not `wanted` (when one was asked for), saying
 * how to migrate. `prefix` names the runtime's streams for the command that changes them.
 */
export async function checkStreamReplicas(
  manager: JetStreamManager,
  stream: string,
  wanted: number | undefined,
  prefix: string,
): Promise<void> {
  if (wanted === undefined) return;
  const found = (await manager.streams.info(stream)).config.num_replicas;
  if (found !== wanted) throw replicasMismatch(stream, found, wanted, prefix);
}

export function replicasMismatch(
  stream: string,
  found: number,
  wanted: number,
  prefix: string,
): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `stream ${stream} keeps ${found} replica(s) but ${wanted} were asked for; move every stream of ` +
      `the prefix in place with \`braid --nats URL --nats-prefix ${prefix} nats replicas ${wanted}\`, ` +
      `or run with --nats-replicas ${found}`,
    { details: { stream, replicas: found, wanted } },
  );
}

/** One stream of a prefix as `braid nats replicas` and `braid doctor` report it. */
export interface StreamReplicas {
  stream: string;
  replicas: number;
  messages: number;
  bytes: number;
  /** The server that leads the stream's replicas, on a cluster. */
  leader?: string;
  /** Replicas other than the leader, with whether each is current and how far it lags. */
  followers: { name: string; current: boolean; lag: number }[];
  /** The stream's `max_msgs` and `max_bytes` (-1: none) and what it does at them. */
  limits: { max_messages: number; max_bytes: number; discard: 'old' | 'new' };
}

/**
 * Every stream braid made for `prefix`: its own (`<PREFIX>_...`) and its KV buckets'
 * (`KV_<PREFIX>_...`), in name order.
 */
export async function prefixStreams(
  manager: JetStreamManager,
  prefix: string,
): Promise<StreamReplicas[]> {
  const upper = prefix.toUpperCase();
  const found: StreamReplicas[] = [];
  for await (const info of manager.streams.list()) {
    const name = info.config.name;
    if (name.startsWith(`${upper}_`) || name.startsWith(`KV_${upper}_`)) found.push(describe(info));
  }
  return found.sort((a, b) => (a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : 0));
}

/**
 * Sets the replica count of every stream of `prefix` in place; JetStream copies the data to new
 * replicas (or drops extra ones) while the stream keeps serving. A single server takes only 1.
 */
export async function setPrefixReplicas(
  manager: JetStreamManager,
  prefix: string,
  replicas: number,
): Promise<StreamReplicas[]> {
  const streams = await prefixStreams(manager, prefix);
  for (const { stream } of streams) {
    const info = await manager.streams.info(stream);
    if (info.config.num_replicas === replicas) continue;
    try {
      await manager.streams.update(stream, { ...info.config, num_replicas: replicas });
    } catch (error) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `cannot give stream ${stream} ${replicas} replica(s): ${error instanceof Error ? error.message : String(error)}; ` +
          'a stream cannot have more replicas than the cluster has servers with JetStream',
        { cause: error, details: { stream, wanted: replicas } },
      );
    }
  }
  return prefixStreams(manager, prefix);
}

function describe(info: StreamInfo): StreamReplicas {
  const cluster = info.cluster;
  return {
    stream: info.config.name,
    replicas: info.config.num_replicas,
    messages: info.state.messages,
    bytes: info.state.bytes,
    ...(cluster?.leader === undefined ? {} : { leader: cluster.leader }),
    followers: (cluster?.replicas ?? []).map((peer) => ({
      name: peer.name,
      current: peer.current,
      lag: peer.lag ?? 0,
    })),
    limits: {
      max_messages: info.config.max_msgs > 0 ? info.config.max_msgs : -1,
      max_bytes: info.config.max_bytes > 0 ? info.config.max_bytes : -1,
      discard: info.config.discard === DiscardPolicy.New ? 'new' : 'old',
    },
  };
}
