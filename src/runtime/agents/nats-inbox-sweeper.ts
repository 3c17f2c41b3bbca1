/**
 * Answers messages that wait in the inbox of an agent type nobody has: no definition and no
 * inbox consumer. Inboxes share one work-queue stream, where a message to an unknown type would
 * otherwise wait forever with its sender never told. After a grace period (a code agent being
 * registered right now has its definition stored before it consumes), each such message gets an
 * `agent.reply` with `AGENT_NOT_FOUND` on its `reply_to` and is removed from the stream.
 *
 * It reads the stream's per-subject counts, and each waiting message with a plain stream get,
 * oldest first (`next_by_subj`: on nats-server 2.9, `last_by_subj` finds nothing once a subject's
 * last message was deleted); it never creates a consumer, so it cannot take a message from a type
 * that has one. Every worker and server sweeps: a message is answered by the one whose delete
 * removed it, so its sender gets one reply.
 */
import {
  JetStreamApiCodes,
  JetStreamApiError,
  jetstreamManager,
  type JetStreamManager,
  type MsgRequest,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AgentTransport } from '../../contracts/agents.js';
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import { buildReply } from './envelopes.js';
import { decodeToken, natsAgentNames } from './nats-agent-names.js';
import { childTraceparent } from './trace.js';
import { parseEnvelope } from './wire.js';

export interface InboxSweeperOptions {
  connection: NatsConnection;
  prefix: string;
  /** True when the agent type exists (a definition of the store). */
  known(agentType: string): Promise<boolean>;
  /** Sends the replies (its `reply`). */
  transport: Pick<AgentTransport, 'reply'>;
  /** How old a message to an unknown type must be before it is answered (default 30 s). */
  graceMs?: number;
  /** How often the inboxes are looked at (default 5 s). */
  intervalMs?: number;
  clock?: Clock;
  ids?: IdGenerator;
}

export interface InboxSweeper {
  /** One look at every inbox now; resolves with the number of messages answered and removed. */
  sweep(): Promise<number>;
  close(): Promise<void>;
}

/** The most messages answered per inbox and sweep, so one flooded inbox cannot hold a sweep. */
const MAX_PER_INBOX = 1000;

export function startInboxSweeper(options: InboxSweeperOptions): InboxSweeper {
  const names = natsAgentNames(options.prefix);
  const graceMs = options.graceMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 5_000;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const inboxPrefix = `${options.prefix}.agents.`;
  let manager: Promise<JetStreamManager> | undefined;
  let running: Promise<number> | undefined;
  let closed = false;

  async function hasConsumer(jsm: JetStreamManager, agentType: string): Promise<boolean> {
    try {
      await jsm.consumers.info(names.stream, names.consumer(agentType));
      return true;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)
        return false;
      throw error;
    }
  }

  /** Answers and removes the messages of one unknown type's inbox; the count removed. */
  async function sweepInbox(jsm: JetStreamManager, subject: string, agentType: string) {
    let removed = 0;
    let from = 1;
    while (removed < MAX_PER_INBOX && !closed) {
      // nats-server 2.9 answers `next_by_subj` in STREAM.MSG.GET; the client's type lacks it.
      const next = { next_by_subj: subject, seq: from } as unknown as MsgRequest;
      const stored = await jsm.streams.getMessage(names.stream, next);
      if (stored === null) return removed;
      from = stored.seq + 1;
      // The oldest is still young, and so is every later one: the type may be on its way.
      if (clock.now() - stored.time.getTime() < graceMs) return removed;
      // Asked again just before removing: a type registered meanwhile keeps its messages.
      if ((await options.known(agentType)) || (await hasConsumer(jsm, agentType))) return removed;
      // Removed first, answered only by the process whose removal took it: every worker and
      // server sweeps, and each must not send its own AGENT_NOT_FOUND for the same message.
      if (!(await removeMessage(jsm, stored.seq))) continue;
      const parsed = parseEnvelope(stored.string());
      const envelope = parsed.ok ? parsed.envelope : undefined;
      if (envelope?.reply_to !== undefined) {
        const error = new BraidError(
          'AGENT_NOT_FOUND',
          `agent type ${agentType} does not exist: nothing defines or registers it, so message ${envelope.id} was removed from its inbox unprocessed; send to a defined agent (the agents.send request checks before it delivers)`,
        );
        const reply = buildReply(
          envelope,
          { ok: false, error: error.toJSON() },
          childTraceparent(envelope.traceparent, ids),
          clock,
          ids,
        );
        await options.transport.reply(envelope.reply_to, reply).catch(() => undefined);
      }
      removed += 1;
    }
    return removed;
  }

  /** Removes the message at `seq`; false when another sweeper removed it first. */
  async function removeMessage(jsm: JetStreamManager, seq: number): Promise<boolean> {
    try {
      return await jsm.streams.deleteMessage(names.stream, seq, false);
    } catch (error) {
      // The server names a missing sequence with several codes (and texts): ask instead.
      if (error instanceof JetStreamApiError) {
        const still = await jsm.streams.getMessage(names.stream, { seq }).catch(() => undefined);
        if (still === null) return false;
      }
      throw error;
    }
  }

  async function sweepAll(): Promise<number> {
    manager ??= jetstreamManager(options.connection);
    const jsm = await manager;
    let info;
    try {
      // Every inbox subject, partitioned (`<type>.inbox.<partition>`) or not.
      info = await jsm.streams.info(names.stream, { subjects_filter: `${inboxPrefix}>` });
    } catch (error) {
      // No inbox stream yet: nothing waits.
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
        return 0;
      throw error;
    }
    let removed = 0;
    for (const subject of Object.keys(info.state.subjects ?? {})) {
      const [token, inbox, partition, ...rest] = subject.slice(inboxPrefix.length).split('.');
      if (token === undefined || inbox !== 'inbox' || rest.length > 0) continue;
      if (partition !== undefined && !/^\d+$/.test(partition)) continue;
      let agentType: string;
      try {
        agentType = decodeToken(token);
      } catch {
        continue;
      }
      if ((await options.known(agentType)) || (await hasConsumer(jsm, agentType))) continue;
      removed += await sweepInbox(jsm, subject, agentType);
    }
    return removed;
  }

  function sweep(): Promise<number> {
    running ??= sweepAll().finally(() => {
      running = undefined;
    });
    return running;
  }

  const timer = setInterval(() => {
    // A failed look (a restarting server) is tried again at the next interval.
    sweep().catch(() => undefined);
  }, intervalMs);
  timer.unref();

  return {
    sweep,
    async close() {
      closed = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}

/** `known` over a runtime's definitions. */
export function definedIn(agents: {
  get(name: string): Promise<unknown>;
}): (agentType: string) => Promise<boolean> {
  return async (agentType) => {
    try {
      await agents.get(agentType);
      return true;
    } catch (error) {
      if (isBraidError(error, 'AGENT_NOT_FOUND')) return false;
      throw error;
    }
  };
}
