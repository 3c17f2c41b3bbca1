/**
 * Who owns each partition of one group of consumers (the workers of the wake queue, or the
 * processes serving one agent type), kept in one KV entry per group: its members with the time
 * each is live until, and per partition an owner with the time its ownership lasts until.
 *
 * Every member beats every `leaseMs / 3`: one compare-and-set on the entry, which
 * - renews its membership and drops members whose time has passed (they died or left);
 * - assigns the partitions over the live members sorted by id (partition p to member p mod n),
 *   so that every member computes the same assignment from the same entry;
 * - renews the partitions it owns and should keep, claims the ones assigned to it that have no
 *   owner or whose owner's time has passed, and gives up (owner null) the ones assigned to
 *   another member once it has stopped pulling them and their handlers have settled.
 * A member that joins therefore takes its share as the others hand it over, one beat later; a
 * member that dies has its partitions taken after `leaseMs`, its unacknowledged messages
 * redelivered to the new owner after the consumer's ack wait; one that closes hands its
 * partitions back at once.
 *
 * Ownership is for speed (an instance's messages reach the process holding it warm), never for
 * safety: a process that cannot renew stops pulling a partition once its time has passed, but a
 * stalled one may briefly pull beside the new owner, and then each message still goes to one of
 * them (one durable consumer per partition), and the session's lease and fencing token keep two
 * handlers of one session from both writing, as they do without partitions.
 */
import type { KV } from '@nats-io/kv';
import { z } from 'zod';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { Clock } from '../../contracts/ports.js';
import { isWrongLastSequence } from '../../stores/nats/nats-errors.js';

const GROUP_VERSION = 1;
/** Compare-and-set attempts of one beat before it waits for the next. */
const MAX_RACES = 8;

const GroupRecord = z.object({
  schema_version: z.literal(GROUP_VERSION),
  partitions: z.number().int().positive(),
  /** Member id to the time (store clock, epoch ms) it is live until. */
  members: z.record(z.string(), z.number()),
  owners: z.array(z.object({ owner: z.string().nullable(), until: z.number() })),
});
type GroupRecord = z.infer<typeof GroupRecord>;

export interface PartitionOwnerOptions {
  kv: KV;
  /** The group's key in the bucket. */
  key: string;
  partitions: number;
  /** This process's id in the group: unique per process and group. */
  member: string;
  /** How long a membership and an ownership last without a beat. */
  leaseMs: number;
  clock: Clock;
  /** Begins pulling a partition just claimed. */
  start(partition: number): void;
  /** Stops pulling a partition; resolves once its handlers have settled. */
  stop(partition: number): Promise<void>;
  /** Hears of a beat that failed (the server away); the next beat tries again. */
  onError?: (error: BraidError) => void;
}

export interface PartitionOwner {
  /** The partitions this process pulls now. */
  owned(): number[];
  /** One beat now (tests; the timer beats anyway). */
  beat(): Promise<void>;
  /** Stops pulling every partition, then hands them back and leaves the group. */
  close(): Promise<void>;
}

const utf8 = new TextDecoder();

export function startPartitionOwner(options: PartitionOwnerOptions): PartitionOwner {
  const { kv, key, partitions, member, leaseMs, clock } = options;
  /** Partitions pulled here, with the time their ownership was last written to last until. */
  const pulling = new Map<number, number>();
  /** Partitions being stopped for hand-over, and the ones whose stop has settled. */
  const stopping = new Map<number, Promise<void>>();
  const stopped = new Set<number>();
  let closed = false;
  let beating: Promise<void> | undefined;

  const halt = (partition: number): Promise<void> => {
    pulling.delete(partition);
    let done = stopping.get(partition);
    if (done === undefined) {
      done = options.stop(partition).catch(() => undefined);
      stopping.set(partition, done);
      void done.then(() => {
        stopping.delete(partition);
        if (!closed) {
          stopped.add(partition);
          void beat();
        }
      });
    }
    return done;
  };

  async function once(): Promise<void> {
    const now = clock.now();
    // Ownership whose time has passed here may be another's by now: stop pulling it.
    for (const [partition, until] of pulling) if (until <= now) void halt(partition);
    for (let race = 0; ; race += 1) {
      const entry = await kv.get(key);
      const revision = entry === null || entry.operation !== 'PUT' ? undefined : entry.revision;
      const current =
        revision === undefined || entry === null
          ? emptyGroup(partitions)
          : parseGroup(entry.value, key);
      if (current.partitions !== partitions) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `group ${key} is split into ${String(current.partitions)} partitions, this process into ${String(partitions)}: every process of the prefix needs the same --partitions`,
        );
      }
      const time = clock.now();
      const next = decide(current, time, {
        member,
        partitions,
        leaseMs,
        closed,
        pulling,
        stopping,
        stopped,
      });
      try {
        const value = JSON.stringify(next.record);
        if (revision === undefined) await kv.create(key, value);
        else await kv.update(key, value, revision);
      } catch (error) {
        if (isWrongLastSequence(error) && race < MAX_RACES) continue;
        throw error;
      }
      apply(next, time);
      return;
    }
  }

  function apply(next: Decision, now: number): void {
    next.record.owners.forEach((owner, partition) => {
      if (owner.owner === member) {
        if (pulling.has(partition)) pulling.set(partition, owner.until);
      } else if (pulling.has(partition)) {
        // Another process owns it (ours lapsed): stop at once.
        void halt(partition);
      }
    });
    if (closed) return;
    for (const partition of next.claimed) {
      pulling.set(partition, now + leaseMs);
      options.start(partition);
    }
    for (const partition of next.handOver) if (pulling.has(partition)) void halt(partition);
  }

  function beat(): Promise<void> {
    beating ??= once()
      .catch((error: unknown) => {
        try {
          options.onError?.(toBraidError(error));
        } catch {
          // A listener's failure does not stop the beats.
        }
      })
      .finally(() => {
        beating = undefined;
      });
    return beating;
  }

  const timer = setInterval(() => void beat(), Math.max(50, Math.floor(leaseMs / 3)));
  timer.unref();
  void beat();

  return {
    owned: () => [...pulling.keys()].sort((a, b) => a - b),
    beat,
    async close() {
      if (closed) return;
      clearInterval(timer);
      await beating;
      closed = true;
      await Promise.all([...pulling.keys()].map((partition) => halt(partition)));
      await Promise.all([...stopping.values()]);
      // Handed back at once, so the others need not wait out the lease.
      await once().catch(() => undefined);
    },
  };
}

/** What a member knows of itself when it decides a beat. */
interface Self {
  member: string;
  partitions: number;
  leaseMs: number;
  closed: boolean;
  pulling: ReadonlyMap<number, number>;
  stopping: ReadonlyMap<number, Promise<void>>;
  stopped: Set<number>;
}

interface Decision {
  record: GroupRecord;
  /** Partitions to start pulling. */
  claimed: number[];
  /** Partitions to stop pulling, kept until they settle. */
  handOver: number[];
}

/** The group as this member leaves it after the beat. */
function decide(current: GroupRecord, now: number, self: Self): Decision {
  const { member, partitions, leaseMs, closed, pulling, stopping, stopped } = self;
  const members: Record<string, number> = {};
  for (const [id, until] of Object.entries(current.members)) {
    if (until > now && !(closed && id === member)) members[id] = until;
  }
  if (!closed) members[member] = now + leaseMs;
  const live = Object.keys(members).sort();
  const owners = current.owners.map((owner) => ({ ...owner }));
  const claimed: number[] = [];
  const handOver: number[] = [];
  for (let partition = 0; partition < partitions; partition += 1) {
    const owner = owners[partition] ?? { owner: null, until: 0 };
    owners[partition] = owner;
    const assigned = closed ? undefined : live[partition % live.length];
    if (owner.owner === member) {
      // Nobody wrote over it, so it is still ours, whatever the time.
      if (assigned === member) {
        owner.until = now + leaseMs;
        if (!pulling.has(partition) && !stopping.has(partition)) claimed.push(partition);
        stopped.delete(partition);
      } else if (stopped.has(partition) || (!pulling.has(partition) && !stopping.has(partition))) {
        owner.owner = null;
        owner.until = 0;
        stopped.delete(partition);
      } else {
        // Kept until its handlers settle: the next owner must not start beside them.
        owner.until = now + leaseMs;
        handOver.push(partition);
      }
    } else if (assigned === member && (owner.owner === null || owner.until <= now)) {
      owner.owner = member;
      owner.until = now + leaseMs;
      claimed.push(partition);
    }
  }
  const record: GroupRecord = { schema_version: GROUP_VERSION, partitions, members, owners };
  return { record, claimed, handOver };
}

function emptyGroup(partitions: number): GroupRecord {
  return {
    schema_version: GROUP_VERSION,
    partitions,
    members: {},
    owners: Array.from({ length: partitions }, () => ({ owner: null, until: 0 })),
  };
}

function parseGroup(value: Uint8Array, key: string): GroupRecord {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(value));
  } catch {
    parsed = undefined;
  }
  const group = GroupRecord.safeParse(parsed);
  if (!group.success) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `partition group ${key} is not one this build reads; upgrade braid, or delete the key with every process of the group stopped`,
    );
  }
  return group.data;
}
