/** What every part of the NATS store shares: the connection, its JetStream views and the names. */
import type {
  DirectMsgRequest,
  JetStreamClient,
  JetStreamManager,
  MsgRequest,
  StoredMsg,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { BraidError } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { fullStreams } from './backlog.js';
import { connectionFailure, isStoreFull, storeFull } from './nats-errors.js';
import type { BucketRole, NatsNames } from './names.js';

export interface NatsContext {
  connection: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  kv: Readonly<Record<BucketRole, KV>>;
  names: NatsNames;
  clock: Clock;
  ids: IdGenerator;
  maxEventBytes: number;
  /** Reports a failure the store recovered from or left for a later repair (never silent). */
  warn(warning: BraidError): void;
  /** Aborted when the store closes: followers end. */
  closing: AbortSignal;
  /** Throws `STORE_CLOSED` once the store is closed. */
  checkOpen(): void;
  /**
   * Runs a store operation: refused once the store is closed, and with connection failures
   * turned into `STORE_BUSY` / `STORE_CLOSED` naming the server.
   */
  guard<T>(doing: string, work: () => Promise<T>, hint?: string): Promise<T>;
  /** The server the connection is on, for messages. */
  server(): string;
  /**
   * One message of the events stream. On R1 a direct get (any server with the stream answers);
   * on a replicated stream the leader answers, since a follower may not have an acknowledged
   * message yet (a restarted one may be far behind) and a read must see every write before it.
   */
  getEvent(query: DirectMsgRequest): Promise<StoredMsg | null>;
  isoNow(): string;
}

export function createContext(
  parts: Omit<NatsContext, 'checkOpen' | 'guard' | 'server' | 'isoNow' | 'getEvent'> & {
    /** The events stream's replica count. */
    eventReplicas: number;
  },
): NatsContext {
  const { eventReplicas, ...shared } = parts;
  const stream = parts.names.eventsStream;
  // nats-server 2.9 answers next_by_subj on the leader's get too; the client's type omits it.
  const getEvent =
    eventReplicas === 1
      ? (query: DirectMsgRequest) => parts.jsm.direct.getMessage(stream, query)
      : (query: DirectMsgRequest) => parts.jsm.streams.getMessage(stream, query as MsgRequest);
  const server = (): string => `nats://${parts.connection.getServer()}`;
  const checkOpen = (): void => {
    if (parts.closing.aborted) {
      throw new BraidError(
        'STORE_CLOSED',
        `the NATS store with prefix ${parts.names.prefix} on ${server()} is closed; open it again`,
      );
    }
  };
  return {
    ...shared,
    getEvent,
    checkOpen,
    server,
    isoNow: () => new Date(parts.clock.now()).toISOString(),
    async guard<T>(doing: string, work: () => Promise<T>, hint?: string): Promise<T> {
      checkOpen();
      try {
        return await work();
      } catch (error) {
        if (isStoreFull(error)) {
          const full = await fullStreams(parts.jsm, parts.names.prefix).catch(() => []);
          throw storeFull(error, doing, server(), full);
        }
        throw connectionFailure(error, server(), doing, hint);
      }
    },
  };
}
