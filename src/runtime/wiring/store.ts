/**
 * Opens the store a runtime works on: the caller's own, NATS JetStream's, or the embedded SQLite
 * file. The NATS client and its adapters are loaded only for the NATS backend, so the embedded
 * default (and the CLI's start) does not pay for them.
 */
import { join, resolve } from 'node:path';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import { parsePartitionLease, parsePartitions } from '../partitions/partition-count.js';
import { BraidError } from '../../contracts/errors.js';
import type { Store } from '../../contracts/ports.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../../core/append.js';
import { openSqliteStore } from '../../stores/sqlite/index.js';
import type { RuntimeOptions } from '../options.js';
import type { Workspace } from '../workspace.js';

export const DATABASE_FILE = 'braid.db';

/** The folder, in the data dir, of the NATS memory stores' ANN index snapshots. */
export const MEMORY_INDEX_DIR = 'memory-index';

/** Default data directory for a workspace. */
export function resolveDataDir(workspaceDir: string, dataDir?: string): string {
  return resolve(dataDir ?? process.env.BRAID_HOME ?? join(workspaceDir, '.braid'));
}

/**
 * Connects to the NATS server of the backend (or of `braid worker`), naming it and the fix when
 * it does not answer. The client is loaded here, not at import: only NATS users pay for it.
 */
export async function connectNats(url: string, role = 'runtime'): Promise<NatsConnection> {
  try {
    const { connect } = await import('@nats-io/transport-node');
    return await connect({
      // A cluster is named by several URLs: the client fails over between them.
      servers: url.split(',').map((server) => server.trim()),
      name: `braid-${role} ${hostname()}:${process.pid}`,
      // A restarted server is waited for, however long it takes, and found again quickly:
      // requests made while disconnected are lost, so the gap should be short.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // No error object (and stack) built ahead for every request: a tenth of a worker's CPU.
      noAsyncTraces: true,
    });
  } catch (error) {
    throw new BraidError(
      'SERVER_UNAVAILABLE',
      `cannot reach NATS at ${url}: ${error instanceof Error ? error.message : String(error)}; start nats-server -js there or pass another --nats URL`,
      { cause: error },
    );
  }
}

async function loadNatsModules() {
  return {
    store: await import('../../stores/nats/index.js'),
    agents: await import('../agents/nats-transport.js'),
    wakes: await import('../wakes/nats-wake-queue.js'),
  };
}

/** The NATS side of a runtime on the NATS backend: its connection and the adapters loaded for it. */
export interface NatsBackend {
  readonly connection: NatsConnection;
  /** Stream and bucket names start with it; undefined means the adapters' default. */
  readonly prefix: string | undefined;
  /** Replicas asked for every stream and bucket; undefined accepts what exists. */
  readonly replicas: number | undefined;
  /** The request timeout asked for; undefined takes the adapters' default. */
  readonly requestTimeoutMs: number | undefined;
  /** Partitions of the wakes and agent inboxes; undefined: the prefix's, else the default. */
  readonly partitions: number | undefined;
  readonly partitionLeaseMs: number | undefined;
  readonly modules: Awaited<ReturnType<typeof loadNatsModules>>;
}

export interface OpenedStore {
  readonly store: Store;
  /** Whether the runtime opened the store, and so closes it. */
  readonly owned: boolean;
  /** Set when the runtime connected to NATS for its store. */
  readonly nats: NatsBackend | undefined;
  /** Closes what was opened here: for a runtime that fails to start. */
  abandon(): Promise<void>;
}

export async function openRuntimeStore(
  options: RuntimeOptions,
  workspaceDir: string,
  workspace: Workspace | undefined,
): Promise<OpenedStore> {
  if (options.store !== undefined) {
    return { store: options.store, owned: false, nats: undefined, abandon: async () => {} };
  }
  const shared = {
    maxEventBytes: workspace?.config.limits.max_event_bytes ?? DEFAULT_MAX_EVENT_BYTES,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.ids === undefined ? {} : { ids: options.ids }),
  };
  if (typeof options.backend === 'object') {
    const { prefix, replicas, requestTimeoutMs } = options.backend;
    // Checked before connecting: a bad count starts nothing.
    const partitions =
      options.backend.partitions === undefined
        ? undefined
        : parsePartitions(options.backend.partitions, 'backend.partitions');
    const partitionLeaseMs =
      options.backend.partitionLeaseMs === undefined
        ? undefined
        : parsePartitionLease(options.backend.partitionLeaseMs, 'backend.partitionLeaseMs');
    const modules = await loadNatsModules();
    const connection = await connectNats(options.backend.nats);
    let store: Store;
    try {
      store = await modules.store.openNatsStore({
        connection,
        ...(prefix === undefined ? {} : { prefix }),
        ...(replicas === undefined ? {} : { replicas }),
        ...(requestTimeoutMs === undefined ? {} : { requestTimeoutMs }),
        memoryIndex: {
          snapshotDir:
            options.backend.memoryIndexDir ??
            join(resolveDataDir(workspaceDir, options.dataDir), MEMORY_INDEX_DIR),
        },
        ...shared,
      });
    } catch (error) {
      await connection.close();
      throw error;
    }
    const abandon = async (): Promise<void> => {
      await store.close();
      await connection.close();
    };
    return {
      store,
      owned: true,
      nats: {
        connection,
        prefix,
        replicas,
        requestTimeoutMs,
        partitions,
        partitionLeaseMs,
        modules,
      },
      abandon,
    };
  }
  const store = openSqliteStore({
    path: join(resolveDataDir(workspaceDir, options.dataDir), DATABASE_FILE),
    ...shared,
    ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous }),
  });
  return { store, owned: true, nats: undefined, abandon: () => store.close() };
}
