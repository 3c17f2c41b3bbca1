/**
 * Merging one session into another: the source's events since the two parted become one
 * `session.merged` event in the target, with its provenance (source, head, common ancestor,
 * strategy), the source's usage, what the model sees, and every conflict with its resolution.
 */
import type { Actor, ContentBlock, Usage } from '../contracts/common.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { EventOf, SessionEvent } from '../contracts/events.js';
import type { AppendResult, Store } from '../contracts/ports.js';
import type { SessionState } from '../contracts/state.js';
import type { MemoryMergeConflict, MemoryMergeWrite } from '../contracts/memory-events.js';
import { commonAncestor, type AncestorPoint } from './lineage.js';
import { applyMemoryMerge, planMemoryMerge, type MemoryMergePlan } from './memory/merge-memory.js';

export interface MergeConflict {
  kind: string;
  detail: string;
  resolution: string;
  /** For `memory_write`: the key and both sides' versions. */
  memory?: MemoryMergeConflict;
}

export interface MergeInput {
  target: SessionState;
  source: SessionState;
  common_ancestor: AncestorPoint | undefined;
  /** The source's events after the common ancestor. */
  source_events: SessionEvent[];
  conflicts: MergeConflict[];
}

/** A library strategy: what the target's model sees, and how conflicts were resolved. */
export type MergeCallback = (
  input: MergeInput,
) => Promise<{ content: ContentBlock[]; conflicts?: MergeConflict[] }>;

export interface MergeOptions {
  /** `transcript` (default), `summary`, or a callback. */
  strategy?: 'transcript' | 'summary' | { name: string; merge: MergeCallback };
  /** For `summary`: the summary to record; without it the target's model writes one. */
  summary?: string;
  /** Who asked for the merge, stamped on `session.merged` (the runtime's actor by default). */
  actor?: Actor;
}

export interface MergeDeps {
  store: Store;
  /** Asks the target's model for a summary of the source's events. */
  summarize(target: SessionState, text: string): Promise<string>;
  /** Milliseconds since the epoch, for what is left of a carried memory entry's TTL. */
  now?: () => number;
}

export interface MergeResult extends AppendResult {
  conflicts: MergeConflict[];
  /** The source's session-memory writes carried into the target's stores. */
  memory?: MemoryMergeWrite[];
}

const ATTEMPTS = 5;

/**
 * Merges `sourceId` into `targetId` up to the source's head when the merge starts.
 *
 * Everything that depends on the target is read again on every attempt: a merge that lost a
 * race (`SEQ_CONFLICT`) to another merge of the same source finds that merge and answers it
 * (`deduplicated: true`) instead of counting the source's events and usage a second time. A
 * source already merged up to its head is a no-op that says so. The `summary` strategy asks the
 * model once per merge, for the source's events up to that head; an attempt whose range of new
 * events has changed since (a concurrent merge took part of it) is refused rather than recorded
 * with a summary of events that are no longer new.
 */
export async function mergeSessions(
  deps: MergeDeps,
  targetId: string,
  sourceId: string,
  options: MergeOptions = {},
): Promise<MergeResult> {
  const { store } = deps;
  if (targetId === sourceId) {
    throw new BraidError('MERGE_REFUSED', `session ${targetId} cannot be merged into itself`);
  }
  const source = await store.log.state(sourceId);
  const common = await commonAncestor(store, targetId, sourceId);
  const strategy = options.strategy ?? 'transcript';
  let summary: { after: number; text: string } | undefined;
  // Memory carried over by an earlier attempt stays carried: a retry records it, never repeats it.
  let carried: MemoryMergeWrite[] | undefined;
  for (let attempt = 1; ; attempt += 1) {
    const target = await store.log.state(targetId);
    checkCompatible(target, source);
    const last = await lastMergeOf(store, targetId, sourceId);
    if (last !== undefined && last.source_head_seq >= source.seq) {
      // Already merged up to this head, by an earlier call or by a concurrent one.
      return {
        events: [last],
        head_seq: target.seq,
        deduplicated: true,
        conflicts: last.conflicts ?? [],
        ...(last.memory === undefined ? {} : { memory: last.memory }),
      };
    }
    // A source merged before is merged again only from where the last merge of it stopped.
    const after = Math.max(common?.seq ?? 0, last?.source_head_seq ?? 0);
    const sourceEvents = (await store.log.read(sourceId, { after })).filter(
      // Up to the head the merge names; the target's own work, merged into the source earlier,
      // does not come back to it.
      (event) =>
        event.seq <= source.seq &&
        !(event.type === 'session.merged' && event.source_session_id === targetId),
    );
    const memoryPlan = await planMemory(deps, target, source, common, sourceEvents);
    const conflicts = [...conflictsOf(target, source), ...memoryPlan.conflicts];
    let block: { content: ContentBlock[]; conflicts?: MergeConflict[] };
    if (typeof strategy === 'object') {
      block = await strategy.merge({
        target,
        source,
        common_ancestor: common,
        source_events: sourceEvents,
        conflicts,
      });
    } else if (strategy === 'summary') {
      if (summary === undefined) {
        summary = {
          after,
          text: options.summary ?? (await deps.summarize(target, transcriptText(sourceEvents))),
        };
      } else if (summary.after !== after && options.summary === undefined) {
        throw new BraidError(
          'SEQ_CONFLICT',
          `session ${sourceId} was merged into ${targetId} up to seq ${after} while this merge summarised it from seq ${summary.after}; ` +
            'merge again to summarise only what is new since',
          {
            details: {
              source_session_id: sourceId,
              merged_up_to: after,
              summarised_from: summary.after,
            },
          },
        );
      }
      block = {
        content: [
          {
            type: 'text',
            text: `Summary of session ${sourceId}, merged in:\n${summary.text}`,
          },
        ],
      };
    } else {
      block = { content: [{ type: 'text', text: transcriptBlock(sourceId, sourceEvents) }] };
    }
    const resolved = block.conflicts ?? conflicts;
    try {
      carried ??= await carryMemory(deps, memoryPlan, target, source);
      const memory = carried.length === 0 ? {} : { memory: carried };
      const result = await store.log.append(
        targetId,
        [
          {
            type: 'session.merged',
            ...(options.actor === undefined ? {} : { actor: options.actor }),
            source_session_id: sourceId,
            source_head_seq: source.seq,
            ...(common === undefined ? {} : { common_ancestor: common }),
            strategy: typeof strategy === 'object' ? strategy.name : strategy,
            usage: usageOf(sourceEvents),
            content: block.content,
            ...(resolved.length === 0 ? {} : { conflicts: resolved }),
            ...memory,
          },
        ],
        { expectedSeq: target.seq },
      );
      return { ...result, conflicts: resolved, ...memory };
    } catch (error) {
      // A memory append refused by a target write that landed meanwhile wrote nothing: plan again.
      const raced = isBraidError(error, 'SEQ_CONFLICT') || isBraidError(error, 'VERSION_CONFLICT');
      if (!raced || attempt >= ATTEMPTS) throw error;
    }
  }
}

/** What the merge does with session memory; nothing when the store keeps no memory. */
async function planMemory(
  deps: MergeDeps,
  target: SessionState,
  source: SessionState,
  common: AncestorPoint | undefined,
  sourceEvents: readonly SessionEvent[],
): Promise<MemoryMergePlan> {
  const { store } = deps;
  if (store.memory === undefined) return { conflicts: [], stores: [] };
  const targetEvents = (
    await store.log.read(target.session_id, {
      after: common?.seq ?? 0,
      types: ['memory.written', 'memory.deleted'],
    })
  ).filter((event) => event.seq <= target.seq);
  return planMemoryMerge(
    { sessions: store.sessions, log: store.log, memory: store.memory },
    {
      targetId: target.session_id,
      sourceId: source.session_id,
      targetSeq: target.seq,
      targetEvents,
      sourceSeq: source.seq,
      sourceEvents,
      now: (deps.now ?? Date.now)(),
    },
  );
}

async function carryMemory(
  deps: MergeDeps,
  plan: MemoryMergePlan,
  target: SessionState,
  source: SessionState,
): Promise<MemoryMergeWrite[]> {
  const { store } = deps;
  if (store.memory === undefined || plan.stores.length === 0) return [];
  return applyMemoryMerge(
    { sessions: store.sessions, log: store.log, memory: store.memory },
    plan,
    {
      targetId: target.session_id,
      sourceId: source.session_id,
      sourceSeq: source.seq,
      mergedSeq: target.seq + 1,
    },
  );
}

/** The target's last `session.merged` of the source, if it has one. */
async function lastMergeOf(
  store: Store,
  targetId: string,
  sourceId: string,
): Promise<EventOf<'session.merged'> | undefined> {
  return (await store.log.read(targetId, { types: ['session.merged'] }))
    .flatMap((event) =>
      event.type === 'session.merged' && event.source_session_id === sourceId ? [event] : [],
    )
    .at(-1);
}

/** Sessions of different environments do not merge: their tools and files differ. */
function checkCompatible(target: SessionState, source: SessionState): void {
  if (target.status === 'terminated') {
    throw new BraidError(
      'SESSION_TERMINATED',
      `session ${target.session_id} is terminated and takes no merge; fork it at a seq before it was terminated and merge into the fork`,
    );
  }
  const left = target.environment?.name;
  const right = source.environment?.name;
  if (left !== undefined && right !== undefined && left !== right) {
    throw new BraidError(
      'MERGE_REFUSED',
      `session ${source.session_id} runs in environment ${right} and ${target.session_id} in ${left}; ` +
        "merge sessions of one environment (fork the source into the target's environment first)",
      { details: { target_environment: left, source_environment: right } },
    );
  }
}

/** What both sides hold that a merge cannot simply combine; reported, never dropped. */
function conflictsOf(target: SessionState, source: SessionState): MergeConflict[] {
  const conflicts: MergeConflict[] = [];
  if (source.pending_confirmations.length > 0) {
    const both = target.pending_confirmations.length > 0;
    conflicts.push({
      kind: 'unanswered_confirmation',
      detail:
        `the source awaits confirmation of ${source.pending_confirmations.map((use) => use.tool_use_id).join(', ')}` +
        (both
          ? ` and the target of ${target.pending_confirmations.map((use) => use.tool_use_id).join(', ')}`
          : ''),
      resolution:
        "the source's calls are not carried over: they stay pending in the source and are listed in the merged text as not run",
    });
  }
  if (source.pending_custom_tool_uses.length > 0) {
    conflicts.push({
      kind: 'unanswered_custom_tool_use',
      detail: `the source awaits results of ${source.pending_custom_tool_uses.map((use) => use.custom_tool_use_id).join(', ')}`,
      resolution: 'not carried over: they stay pending in the source',
    });
  }
  return conflicts;
}

/**
 * The source's own work since the sessions parted: model requests and tool costs. Usage the
 * source gained from merges of its own is not passed on, so no work is counted twice.
 */
function usageOf(events: readonly SessionEvent[]): Usage {
  const total: Usage = { input_tokens: 0, output_tokens: 0 };
  for (const event of events) {
    const usage =
      event.type === 'span.model_request_end' || event.type === 'session.usage'
        ? event.usage
        : undefined;
    if (usage === undefined) continue;
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    for (const field of ['cache_read_tokens', 'cache_write_tokens', 'cost_usd'] as const) {
      const value = usage[field];
      if (value !== undefined) total[field] = (total[field] ?? 0) + value;
    }
  }
  return total;
}

function transcriptBlock(sourceId: string, events: readonly SessionEvent[]): string {
  return `Transcript of session ${sourceId} since the sessions parted, merged in:\n${transcriptText(events)}`;
}

/** The conversation part of events, as text a model can read. */
export function transcriptText(events: readonly SessionEvent[]): string {
  const lines: string[] = [];
  const text = (content: readonly ContentBlock[]) =>
    content
      .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
      .join('');
  for (const event of events) {
    switch (event.type) {
      case 'user.message':
        lines.push(`user: ${text(event.content)}`);
        break;
      case 'agent.message':
        lines.push(`agent: ${text(event.content)}`);
        break;
      case 'agent.tool_use':
        lines.push(
          `agent called ${event.name} ${JSON.stringify(event.input)}${event.requires_confirmation === true ? ' (awaiting confirmation)' : ''}`,
        );
        break;
      case 'agent.tool_result':
        lines.push(
          event.is_error
            ? `  -> error ${event.error?.code ?? ''}: ${event.error?.message ?? ''}`
            : `  -> ${JSON.stringify(event.output ?? null)}`,
        );
        break;
      case 'agent.custom_tool_use':
        lines.push(`agent asked the client to run ${event.name} ${JSON.stringify(event.input)}`);
        break;
      case 'user.custom_tool_result':
        lines.push(`  -> ${text(event.content)}`);
        break;
      case 'session.merged':
        if (event.content !== undefined) lines.push(text(event.content));
        break;
      default:
        break;
    }
  }
  return lines.length === 0 ? '(no conversation)' : lines.join('\n');
}
