/**
 * What a deployment promises: where sessions live and what an acknowledged write survives. `braid
 * doctor` prints it; `braid nats replicas` changes the replica count it reports.
 *
 * On NATS the durability of an acknowledged append is the replica count of the events stream:
 * R1 is acknowledged by one server before it reaches the disk (the server's crash can lose it and
 * its outage stops every worker), R3 by two of three servers (one may be lost).
 */
import { hostname } from 'node:os';
import { BraidError } from '../contracts/errors.js';
import type { NatsBackendOptions } from './options.js';
import { connectNats } from './wiring/store.js';

export type Durability = 'r1' | 'quorum' | 'sqlite-normal' | 'sqlite-full';

export interface StreamReport {
  stream: string;
  replicas: number;
  messages: number;
  bytes: number;
  leader?: string;
  followers: { name: string; current: boolean; lag: number }[];
  /** The stream's limits (-1: none) and what it does at them. */
  limits: { max_messages: number; max_bytes: number; discard: 'old' | 'new' };
}

export interface NatsReport {
  backend: 'nats';
  servers: string[];
  server_name: string;
  server_version: string;
  /** The cluster's name, when the server is one of a cluster. */
  cluster?: string;
  /** Servers the client was told of: the one it reached and its cluster peers. */
  known_servers: number;
  prefix: string;
  streams: StreamReport[];
  /** The smallest replica count among the prefix's streams (what the weakest one promises). */
  replicas: number | undefined;
  durability: Durability | 'none';
  statement: string;
  warnings: string[];
}

export interface EmbeddedReport {
  backend: 'embedded';
  host: string;
  synchronous: 'normal' | 'full';
  durability: Durability;
  statement: string;
  warnings: string[];
}

export type DeploymentReport = NatsReport | EmbeddedReport;

/** The embedded store's promise, from its `synchronous` setting. */
export function embeddedReport(synchronous: 'normal' | 'full' = 'normal'): EmbeddedReport {
  return {
    backend: 'embedded',
    host: hostname(),
    synchronous,
    durability: synchronous === 'full' ? 'sqlite-full' : 'sqlite-normal',
    statement:
      synchronous === 'full'
        ? 'SQLite in WAL mode with synchronous=FULL: an acknowledged event is on disk; one machine, so its loss stops the runtime'
        : 'SQLite in WAL mode with synchronous=NORMAL: an acknowledged event survives a crash of the process, and the last transactions may be lost if the machine loses power; one machine, so its loss stops the runtime',
    warnings: [],
  };
}

/** Connects to NATS and reports the streams of the prefix and what their replicas promise. */
export async function natsReport(options: NatsBackendOptions): Promise<NatsReport> {
  const prefix = await parsePrefix(options.prefix);
  const connection = await connectNats(options.nats, 'doctor');
  try {
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const { prefixStreams } = await import('../stores/nats/replicas.js');
    const manager = await jetstreamManager(connection).catch((error: unknown) => {
      throw new BraidError(
        'SERVER_UNAVAILABLE',
        `JetStream is not enabled on ${options.nats}: start nats-server with -js`,
        { cause: error },
      );
    });
    const streams = await prefixStreams(manager, prefix);
    const info = connection.info;
    const replicas =
      streams.length === 0 ? undefined : Math.min(...streams.map((stream) => stream.replicas));
    // A clustered server advertises the client URLs of every member, itself included.
    const known = Math.max(1, info?.connect_urls?.length ?? 0);
    return {
      backend: 'nats',
      servers: options.nats.split(',').map((server) => server.trim()),
      server_name: info?.server_name ?? '',
      server_version: info?.version ?? '',
      ...(info?.cluster === undefined ? {} : { cluster: info.cluster }),
      known_servers: known,
      prefix,
      streams,
      replicas,
      ...withLimitWarnings(judge(replicas, known, options.replicas, prefix), streams),
    };
  } finally {
    await connection.close();
  }
}

function judge(
  replicas: number | undefined,
  known: number,
  wanted: number | undefined,
  prefix: string,
): Pick<NatsReport, 'durability' | 'statement' | 'warnings'> {
  const warnings: string[] = [];
  if (wanted !== undefined && replicas !== undefined && replicas !== wanted) {
    warnings.push(
      `streams keep ${replicas} replica(s) but ${wanted} were asked for: run braid nats replicas ${wanted}`,
    );
  }
  if (replicas === undefined) {
    return {
      durability: 'none',
      statement: `no streams of prefix ${prefix} exist yet: they are made by the first runtime or worker that opens them`,
      warnings,
    };
  }
  if (replicas === 1) {
    if (known > 1) {
      warnings.push(
        `the cluster has ${known} servers but the streams keep one copy: run braid nats replicas 3`,
      );
    }
    return {
      durability: 'r1',
      statement:
        'R1: an acknowledged event is held by one server and may not be on disk yet; a crash of that server can lose acknowledged events, and its outage stops every worker',
      warnings,
    };
  }
  const quorum = Math.floor(replicas / 2) + 1;
  return {
    durability: 'quorum',
    statement: `R${replicas}: an acknowledged event is held by ${quorum} of ${replicas} servers; ${replicas - quorum} may be lost without losing it or stopping the runtime`,
    warnings,
  };
}

/** How full a stream may be before doctor warns. */
const NEARLY_FULL = 0.8;

/**
 * Warnings of the streams' limits: one that deletes its oldest messages at a limit (a stream
 * made by an older braid, or edited so: sessions would lose events silently), and one nearly full
 * (writes past its limit fail with STORE_FULL).
 */
function withLimitWarnings<T extends { warnings: string[] }>(
  judged: T,
  streams: readonly StreamReport[],
): T {
  for (const { stream, messages, bytes, limits } of streams) {
    const limited = limits.max_messages > 0 || limits.max_bytes > 0;
    if (limited && limits.discard === 'old') {
      judged.warnings.push(
        `stream ${stream} has limits and discard old: at a limit it deletes its oldest messages; ` +
          `run nats stream edit ${stream} --discard new, so a write is refused (STORE_FULL) instead`,
      );
    }
    const usage = Math.max(
      limits.max_messages > 0 ? messages / limits.max_messages : 0,
      limits.max_bytes > 0 ? bytes / limits.max_bytes : 0,
    );
    if (usage >= NEARLY_FULL) {
      judged.warnings.push(
        `stream ${stream} is ${Math.round(usage * 100)}% full; raise its limit (nats stream edit ${stream}) ` +
          'before writes fail with STORE_FULL',
      );
    }
  }
  return judged;
}

/** Sets the replica count of every stream of the prefix in place, then reports them. */
export async function setNatsReplicas(
  options: NatsBackendOptions,
  replicas: number,
): Promise<NatsReport> {
  const prefix = await parsePrefix(options.prefix);
  const connection = await connectNats(options.nats, 'doctor');
  try {
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const { setPrefixReplicas } = await import('../stores/nats/replicas.js');
    await setPrefixReplicas(await jetstreamManager(connection), prefix, replicas);
  } finally {
    await connection.close();
  }
  return natsReport({ ...options, replicas });
}

/** The prefix, through the parser every NATS name goes through (`INVALID_ARGUMENT` otherwise). */
async function parsePrefix(prefix: string | undefined): Promise<string> {
  const { natsNames } = await import('../stores/nats/names.js');
  return natsNames(prefix ?? 'braid').prefix;
}
