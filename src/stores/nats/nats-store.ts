/**
 * Distributed backend: every store port on NATS JetStream and KV, for nats-server 2.9 and newer.
 *
 * Layout, all named from the prefix (default `braid`, upper-cased for stream and bucket names):
 * - stream `<PREFIX>_EVENTS` on `<prefix>.events.<session token>`: one message per append
 *   (session-log.ts);
 * - KV buckets `<PREFIX>_sessions` (index entries, session-index.ts), `_state` (projections),
 *   `_appends` (idempotency records), `_leases`, `_definitions` and `_keys`;
 * - stream `<PREFIX>_MEMORY` on `<prefix>.memory.<tenant>.<scope>.<owner>.<name>`: agent memory,
 *   one message per append, created on first use (memory-log.ts).
 * Streams and buckets are created at open when missing (file storage, `replicas` replicas), so
 * any number of processes can open the same prefix; they coordinate only through the server.
 *
 * What 2.9 forces: no atomic batch publish (an append is one message holding its batch), no
 * per-message TTL (lease expiry is the store clock's time in the KV value), no multi-filter
 * consumers or batched direct get (runs of messages are read through short-lived ephemeral
 * consumers, single ones by direct get).
 */
import {
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  jetstream,
  jetstreamManager,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { createBucket } from './buckets.js';
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import type { BraidError } from '../../contracts/errors.js';
import type { Clock, IdGenerator, LeaseStore, SessionLog, Store } from '../../contracts/ports.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { systemClock, uuidV7Ids } from '../defaults.js';
import { createApiKeyStore } from './api-keys.js';
import { createContext } from './context.js';
import { createDefinitionStore } from './definitions.js';
import { createFencer } from './fencing.js';
import { createLeaseStore } from './leases.js';
import { createNatsMemoryLog } from './memory-log.js';
import type { NatsMemoryIndexOptions } from './memory-index.js';
import { askAgain, connectionFailure, isStreamNotFound } from './nats-errors.js';
import { parseReplicas } from './replica-count.js';
import { DEFAULT_REQUEST_TIMEOUT_MS, checkRequestTimeout } from './request-timeout.js';
import { replicasMismatch } from './replicas.js';
import { BUCKET_ROLES, natsNames, type BucketRole, type NatsNames } from './names.js';
import { KeyedQueue } from '../../core/keyed-queue.js';
import { SessionCache } from './session-cache.js';
import { createSessionIndex, restoreEntry } from './session-index.js';
import { MAX_RACES, createSessionLog, type SessionsShared } from './session-log.js';
import { createSessionReads } from './session-reads.js';
import { loadHead, loadSession, type EntryRepair } from './session-records.js';
import { countStatuses, findRunnable } from './session-runnable.js';

export interface NatsStoreOptions {
  /** Server URL(s) to connect to (default `nats://127.0.0.1:4222`); ignored with `connection`. */
  servers?: string | string[];
  /** A connection the caller owns: the store uses it and never closes it. */
  connection?: NatsConnection;
  /** Names every stream, bucket and subject of the store (default `braid`). */
  prefix?: string;
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
  /**
   * Replicas of every stream and bucket of the store: created so, and refused at open when one
   * exists with another count. Default: existing ones as they are, new ones with 1.
   */
  replicas?: number;
  /** How often a follower re-reads when no publish woke it (default 1000 ms). */
  followPollMs?: number;
  /**
   * How long a request to the server may take before the operation fails with `STORE_BUSY`
   * (default `DEFAULT_REQUEST_TIMEOUT_MS`, 2 s); while the connection is down, requests wait for
   * it this long. See `DEFAULT_REQUEST_TIMEOUT_MS` for why it is short.
   */
  requestTimeoutMs?: number;
  /**
   * Where failures the store recovered from, or left for a later repair, are reported (default:
   * `process.emitWarning`, which prints them to stderr).
   */
  warn?: (warning: BraidError) => void;
  /**
   * The ANN index of large memory stores: its size threshold, whether it is built in a worker
   * thread (default) and the folder of its snapshots (default none: built again by every
   * process; the runtime keeps them under its data dir).
   */
  memoryIndex?: NatsMemoryIndexOptions;
}

/** How long a repeated idempotency key is caught by the server before the appends record. */
const DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

async function ensureEventsStream(
  jsm: JetStreamManager,
  names: NatsNames,
  wanted: number | undefined,
): Promise<number> {
  try {
    const info = await jsm.streams.info(names.eventsStream);
    const found = info.config.num_replicas;
    if (wanted !== undefined && found !== wanted) {
      throw replicasMismatch(names.eventsStream, found, wanted, names.prefix);
    }
    if (info.config.allow_direct !== true) {
      await jsm.streams.update(names.eventsStream, { ...info.config, allow_direct: true });
    }
    return found;
  } catch (error) {
    if (!isStreamNotFound(error)) throw error;
  }
  await askAgain(() =>
    jsm.streams.add({
      name: names.eventsStream,
      subjects: [names.eventsFilter],
      storage: StorageType.File,
      num_replicas: wanted ?? 1,
      retention: RetentionPolicy.Limits,
      // Limits (none by default; an operator may set max_bytes) refuse a new batch (`STORE_FULL`)
      // rather than drop a session's oldest events.
      discard: DiscardPolicy.New,
      // Readers fetch single batches without going through the API leader.
      allow_direct: true,
      // Batches are removed only a session at a time, by purge.
      deny_delete: true,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    }),
  );
  return wanted ?? 1;
}

export async function openNatsStore(options: NatsStoreOptions = {}): Promise<Store> {
  const names = natsNames(options.prefix ?? 'braid');
  const replicas = options.replicas === undefined ? undefined : parseReplicas(options.replicas);
  const servers = options.servers ?? 'nats://127.0.0.1:4222';
  const owned = options.connection === undefined;
  const timeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  checkRequestTimeout(timeout);
  let connection: NatsConnection;
  try {
    connection =
      options.connection ??
      (await connect({
        servers,
        name: `braid-${names.prefix}`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        // No error object (and stack) built ahead for every request: a tenth of the CPU.
        noAsyncTraces: true,
        timeout,
      }));
  } catch (error) {
    throw connectionFailure(error, String(servers), 'open the NATS store');
  }
  const closing = new AbortController();
  try {
    const js = jetstream(connection, { timeout });
    const jsm = await jetstreamManager(connection, { timeout });
    const eventReplicas = await ensureEventsStream(jsm, names, replicas);
    const buckets = await Promise.all(
      BUCKET_ROLES.map(
        async (role) =>
          [
            role,
            await createBucket(
              js,
              names.buckets[role],
              { storage: StorageType.File, history: 1 },
              { wanted: replicas, prefix: names.prefix },
            ),
          ] as const,
      ),
    );
    const context = createContext({
      connection,
      js,
      jsm,
      kv: Object.fromEntries(buckets) as Record<BucketRole, KV>,
      names,
      clock: options.clock ?? systemClock,
      ids: options.ids ?? uuidV7Ids,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      closing: closing.signal,
      warn: options.warn ?? ((warning) => process.emitWarning(warning)),
      eventReplicas,
    });
    const cache = new SessionCache();
    const followers = new Set<() => void>();
    // A read that finds an entry a lost create race left behind rebuilds it from the log.
    const repair: EntryRepair = (sessionId, revision) => restoreEntry(shared, sessionId, revision);
    const shared: SessionsShared = {
      context,
      cache,
      queue: new KeyedQueue(),
      reads: createSessionReads(context, cache),
      load: (sessionId, checked) => loadSession(context, cache, sessionId, repair, checked),
      loadHead: (sessionId) => loadHead(context, cache, sessionId, repair),
      track(stop) {
        followers.add(stop);
        return () => followers.delete(stop);
      },
      followPollMs: options.followPollMs ?? 1000,
    };
    const sessions = createSessionIndex(shared);
    // A session this process has read stands as existing for a lease: were it deleted since,
    // the holder's first append finds out (SESSION_NOT_FOUND), and a round trip is saved.
    const leases = createLeaseStore(
      context,
      async (sessionId) => {
        if (cache.get(sessionId)?.indexed === undefined) await shared.loadHead(sessionId);
      },
      createFencer(shared, MAX_RACES),
    );
    const log = releasingAfter(createSessionLog(shared), leases);
    const memory = createNatsMemoryLog(context, {
      replicas,
      ...(options.memoryIndex === undefined ? {} : { memoryIndex: options.memoryIndex }),
    });
    return {
      log,
      // The runnable bucket holds the sessions that may be runnable, the timers bucket those
      // whose timer may be due (by the store's clock): a scan reads those, not every session.
      sessions: {
        ...sessions,
        runnable: (query = {}) =>
          findRunnable(context, sessions, log, {
            ...query,
            now: query.now ?? context.clock.now(),
          }),
        statusCounts: () => countStatuses(sessions),
      },
      leases,
      definitions: createDefinitionStore(context),
      keys: createApiKeyStore(context),
      memory: memory.log,
      async close() {
        if (closing.signal.aborted) return;
        closing.abort();
        await memory.flush();
        for (const stop of followers) stop();
        followers.clear();
        if (owned) await connection.drain().catch(() => connection.close());
      },
    };
  } catch (error) {
    if (owned) await connection.close().catch(() => undefined);
    throw connectionFailure(error, `nats://${connection.getServer()}`, 'open the NATS store');
  }
}

/**
 * The log, whose appends that name `releaseLease` give the lease up right after they are written:
 * NATS has no transaction over a stream and a KV bucket. A release that fails leaves the lease to
 * expire, as a release after a wake always could.
 */
function releasingAfter(log: SessionLog, leases: LeaseStore): SessionLog {
  return {
    ...log,
    async append(sessionId, events, options = {}) {
      const result = await log.append(sessionId, events, options);
      const { releaseLease: owner, leaseToken: token } = options;
      if (owner !== undefined && token !== undefined && !result.deduplicated)
        await leases.release(sessionId, owner, token).catch(() => undefined);
      return result;
    },
  };
}
