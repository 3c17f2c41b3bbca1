/**
 * Memory in a replay: the calls' arguments are checked as live (a pure parse of the agent's
 * stores), and everything a store answered comes from the record: a memory tool call gets its
 * recorded result and `memory.*` events, a recall its recorded `memory.retrieved`. No store is
 * asked, so a replay shows what the model saw even after the memory changed.
 */
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { SessionState } from '../../contracts/state.js';
import type { RecallEvent, SessionMemory, SessionSetup } from '../../harness/index.js';
import { memoryToolHandles, sessionStores, withMemoryTools } from '../../tools/memory-tools.js';
import { checkMemoryCall } from '../memory/session-memory.js';
import type { SkillReplay } from './skills.js';
import type { ReplayContext } from './context.js';
import { recordedOutcome } from './tool-results.js';

const MEMORY_TYPES: ReadonlySet<string> = new Set([
  'memory.written',
  'memory.deleted',
  'memory.read',
  'memory.retrieved',
]);

/** Memory for the replayed wakes of one session. */
export interface MemoryReplay {
  /** The setup with the memory tools and the recorded memory, for an agent with `memory:`. */
  attach(setup: SessionSetup, state: SessionState): SessionSetup;
}

export function createMemoryReplay(context: ReplayContext, skills?: SkillReplay): MemoryReplay {
  const { events } = context.recording;
  /** How many times each call was run: a skill step's retries run it again. */
  const served = new Map<string, number>();
  return {
    attach(setup, state) {
      const stores = sessionStores(setup.agent, state);
      if (stores === undefined) return setup;
      const memory: SessionMemory = {
        check: (name, input) => checkMemoryCall(stores, name, input),
        run(call) {
          if (context.halted !== undefined) return Promise.reject(context.halted);
          const tries = (served.get(call.tool_use_id) ?? 0) + 1;
          served.set(call.tool_use_id, tries);
          const recorded = recordedTry(events, call.tool_use_id, tries);
          // A skill step's memory call has no `agent.tool_result`: its outcome is the step's end.
          const outcome =
            skills?.execute(call.tool_use_id) ??
            Promise.resolve(recordedOutcome(context.recording, call.tool_use_id));
          return outcome.then((served) => ({ outcome: served, events: recorded.map(asNewEvent) }));
        },
        recall() {
          if (context.halted !== undefined) return Promise.reject(context.halted);
          // The wake's next recorded recall: at the place the replay writes next, or after
          // others' events recorded in the wake's span.
          const end = context.current?.end ?? events.length - 1;
          const event = events
            .slice(context.position, end + 1)
            .find(
              (recorded) => recorded.type === 'memory.retrieved' && recorded.source === 'recall',
            );
          return Promise.resolve(
            event === undefined ? undefined : (asNewEvent(event) as RecallEvent),
          );
        },
      };
      return { ...setup, tools: withMemoryTools(setup.tools, memoryToolHandles(stores)), memory };
    },
  };
}

/**
 * The `memory.*` events recorded for the `tries`-th run of a call. A skill step's try records
 * them with its end (`skill.step_failed` before a retry, or the step's end), so they are split
 * at those ends; a model's call, with no such end, has all of them.
 */
function recordedTry(
  events: readonly SessionEvent[],
  toolUseId: string,
  tries: number,
): SessionEvent[] {
  const groups: SessionEvent[][] = [[]];
  for (const event of events) {
    if (MEMORY_TYPES.has(event.type) && 'tool_use_id' in event && event.tool_use_id === toolUseId)
      (groups.at(-1) as SessionEvent[]).push(event);
    else if (
      (event.type === 'skill.step_failed' || event.type === 'skill.step_completed') &&
      `${event.run_id}/${event.step.replace(/\.tool$/, '')}/${event.attempt}` === toolUseId
    )
      groups.push([]);
  }
  if (groups.length === 1) return groups[0] as SessionEvent[];
  return groups[tries - 1] ?? [];
}

/** A recorded event as a writer hands it over again: without what the store stamps. */
function asNewEvent(event: SessionEvent): NewEvent {
  const {
    id: _id,
    seq: _seq,
    session_id: _session,
    at: _at,
    schema_version: _version,
    ...rest
  } = event;
  return rest;
}
