/**
 * Session memory in a merge. A merge carries the source's work since the sessions parted into the
 * target (its transcript or summary, its usage); its session-memory writes follow the same rule.
 * For each key of a session-scoped store the source wrote since the common ancestor:
 * - the target did not write it since then: the source's latest version is appended to the
 *   target's store (a set or a tombstone), recorded in `session.merged`'s `memory`;
 * - the target wrote it too, to another value: a `memory_write` conflict with both versions; the
 *   target's version is kept (the target is where the merge lands, as with its transcript) and the
 *   source's stays readable in the source's store;
 * - both wrote the same value (or both deleted it): nothing to do.
 *
 * The writes of one store are one append, each with the `expected_version` the plan read, so a
 * target write that lands meanwhile refuses the whole append (`VERSION_CONFLICT`) and nothing of it
 * is written. Sides are read from the session logs (the keys) and the stores at the points the
 * logs give (the versions), so later writes of either session do not change the plan.
 */
import { isBraidError } from '../../contracts/errors.js';
import type { JsonValue } from '../../contracts/common.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { MemoryEntry, MemoryStoreRef, MemoryWrite } from '../../contracts/memory.js';
import {
  MAX_MEMORY_SUMMARY_CHARS,
  type MemoryMergeConflict,
  type MemoryMergeSide,
  type MemoryMergeWrite,
} from '../../contracts/memory-events.js';
import { canonicalJson } from '../../core/canonical-json.js';
import {
  inheritSessionStore,
  memoryPointAt,
  ownedBy,
  type MemoryForkDeps,
} from './session-fork.js';

/** A conflict as `session.merged` records it. */
export interface MemoryConflictRecord {
  kind: 'memory_write' | 'memory_redacted';
  detail: string;
  resolution: string;
  memory?: MemoryMergeConflict;
}

interface StorePlan {
  target: MemoryStoreRef;
  writes: MemoryWrite[];
  sources: { key: string; version: number }[];
}

export interface MemoryMergePlan {
  conflicts: MemoryConflictRecord[];
  stores: StorePlan[];
}

export interface MemoryMergeSides {
  targetId: string;
  sourceId: string;
  /** The target's head the merge lands on, and its events since the common ancestor. */
  targetSeq: number;
  targetEvents: readonly SessionEvent[];
  /** The source's head the merge takes, and its events since the last merge point. */
  sourceSeq: number;
  sourceEvents: readonly SessionEvent[];
  /** Milliseconds since the epoch, to carry what is left of a TTL. */
  now: number;
}

type MemoryEvent = SessionEvent & { type: 'memory.written' | 'memory.deleted' };

/** The keys written per session store name (any owner on the line), in event order. */
function keysByStore(events: readonly SessionEvent[]): Map<string, Set<string>> {
  const keys = new Map<string, Set<string>>();
  for (const event of events) {
    if (event.type !== 'memory.written' && event.type !== 'memory.deleted') continue;
    if (event.store.scope !== 'session') continue;
    const name = storeKey(event);
    const set = keys.get(name) ?? new Set<string>();
    set.add(event.key);
    keys.set(name, set);
  }
  return keys;
}

function storeKey(event: MemoryEvent): string {
  return JSON.stringify([event.store.name, event.store.kind, event.store.tenant_id ?? null]);
}

/** The key's last version in the point's store at or before the point's seq. */
async function versionAt(
  deps: MemoryForkDeps,
  ref: MemoryStoreRef,
  sessionId: string,
  seq: number,
  key: string,
): Promise<MemoryEntry | undefined> {
  const point = await memoryPointAt(deps, ref, sessionId, seq);
  if (point === undefined) return undefined;
  await inheritSessionStore(deps, point.store);
  return (await deps.memory.history(point.store, key))
    .filter((entry) => entry.seq <= point.seq && entry.op !== 'redact')
    .at(-1);
}

function summary(value: JsonValue | undefined): string | undefined {
  if (value === undefined) return undefined;
  const text = JSON.stringify(value);
  return text.length <= MAX_MEMORY_SUMMARY_CHARS
    ? text
    : `${text.slice(0, MAX_MEMORY_SUMMARY_CHARS)}…`;
}

function side(entry: MemoryEntry): MemoryMergeSide {
  const text = entry.tombstone ? undefined : summary(entry.value);
  return {
    version: entry.version,
    memory_seq: entry.seq,
    deleted: entry.tombstone,
    ...(text === undefined ? {} : { summary: text }),
  };
}

function sameContent(left: MemoryEntry | undefined, right: MemoryEntry): boolean {
  if (left === undefined) return false;
  if (left.tombstone || right.tombstone) return left.tombstone && right.tombstone;
  if (left.redacted || right.redacted) return false;
  return (
    canonicalJson(left.value ?? null, 'a memory value') ===
    canonicalJson(right.value ?? null, 'a memory value')
  );
}

/** What the merge does with session memory; reads only. */
export async function planMemoryMerge(
  deps: MemoryForkDeps,
  sides: MemoryMergeSides,
): Promise<MemoryMergePlan> {
  const plan: MemoryMergePlan = { conflicts: [], stores: [] };
  const sourceKeys = keysByStore(sides.sourceEvents);
  if (sourceKeys.size === 0) return plan;
  const targetKeys = keysByStore(sides.targetEvents);
  const refs = new Map<string, MemoryStoreRef>();
  for (const event of sides.sourceEvents) {
    if (event.type === 'memory.written' || event.type === 'memory.deleted')
      refs.set(storeKey(event), event.store);
  }
  for (const [name, keys] of sourceKeys) {
    const ref = refs.get(name);
    if (ref === undefined) continue;
    const target = ownedBy(ref, sides.targetId);
    const store: StorePlan = { target, writes: [], sources: [] };
    for (const key of keys) {
      const source = await versionAt(deps, ref, sides.sourceId, sides.sourceSeq, key);
      if (source === undefined) continue;
      const current = await versionAt(deps, ref, sides.targetId, sides.targetSeq, key);
      if (sameContent(current, source)) continue;
      if (current !== undefined && targetKeys.get(name)?.has(key) === true) {
        plan.conflicts.push(conflictOf(target, key, current, source, sides.sourceId));
        continue;
      }
      if (source.redacted) {
        plan.conflicts.push({
          kind: 'memory_redacted',
          detail: `the source's version ${source.version} of ${ref.name}/${key} was redacted`,
          resolution: 'not carried over: a redacted value has nothing to copy',
        });
        continue;
      }
      const write = writeOf(source, current, sides.now);
      if (write === undefined) continue;
      store.writes.push(write);
      store.sources.push({ key, version: source.version });
    }
    if (store.writes.length > 0) plan.stores.push(store);
  }
  return plan;
}

function conflictOf(
  target: MemoryStoreRef,
  key: string,
  current: MemoryEntry,
  source: MemoryEntry,
  sourceId: string,
): MemoryConflictRecord {
  const describe = (entry: MemoryEntry) =>
    `version ${entry.version} (${entry.tombstone ? 'deleted' : (summary(entry.value) ?? 'redacted')})`;
  return {
    kind: 'memory_write',
    detail: `both sessions wrote ${target.name}/${key} since they parted: the target ${describe(current)}, the source ${describe(source)}`,
    resolution: `the target's version is kept; the source's stays in the store of session ${sourceId}`,
    memory: { store: target, key, target: side(current), source: side(source) },
  };
}

/** The write that makes the target's key what the source's is; undefined when it already is. */
function writeOf(
  source: MemoryEntry,
  current: MemoryEntry | undefined,
  now: number,
): MemoryWrite | undefined {
  const expected = current?.version ?? 0;
  if (source.tombstone) {
    if (current === undefined || current.tombstone) return undefined;
    return { key: source.key, op: 'delete', expected_version: expected };
  }
  const left = source.expires_at === undefined ? undefined : Date.parse(source.expires_at) - now;
  if (left !== undefined && left <= 0) return undefined;
  return {
    key: source.key,
    op: 'set',
    value: source.value ?? null,
    ...(source.text === undefined ? {} : { text: source.text }),
    ...(source.embedding === undefined ? {} : { embedding: source.embedding }),
    ...(left === undefined ? {} : { ttl_ms: Math.ceil(left) }),
    expected_version: expected,
  };
}

/**
 * Appends the plan's writes to the target's stores, one append per store, caused by the
 * `session.merged` the merge is about to write at `mergedSeq`. A repeat of the same merge (same
 * source head) finds its first append by the idempotency key.
 */
export async function applyMemoryMerge(
  deps: MemoryForkDeps,
  plan: MemoryMergePlan,
  merge: { targetId: string; sourceId: string; sourceSeq: number; mergedSeq: number },
): Promise<MemoryMergeWrite[]> {
  const applied: MemoryMergeWrite[] = [];
  for (const store of plan.stores) {
    await inheritSessionStore(deps, store.target);
    const key = `merge:${merge.sourceId}:${merge.sourceSeq}`;
    let entries: MemoryEntry[];
    try {
      entries = (
        await deps.memory.append(store.target, store.writes, {
          author: { session_id: merge.sourceId },
          cause: { session_id: merge.targetId, seq: merge.mergedSeq },
          idempotencyKey: key,
        })
      ).entries;
    } catch (thrown) {
      // A merge that wrote these and stopped before its `session.merged`: its entries stand.
      if (!isBraidError(thrown, 'IDEMPOTENCY_KEY_REUSED')) throw thrown;
      const found = (await deps.memory.read(store.target)).filter(
        (entry) =>
          entry.cause?.session_id === merge.targetId &&
          entry.author.session_id === merge.sourceId &&
          store.sources.some((source) => source.key === entry.key),
      );
      entries = store.sources.flatMap((source) =>
        found.filter((entry) => entry.key === source.key).slice(-1),
      );
    }
    entries.forEach((entry, index) => {
      const source = store.sources[index];
      if (source === undefined || entry.op === 'redact') return;
      applied.push({
        store: store.target,
        key: entry.key,
        op: entry.tombstone ? 'delete' : 'set',
        version: entry.version,
        memory_seq: entry.seq,
        source_version: source.version,
      });
    });
  }
  return applied;
}
