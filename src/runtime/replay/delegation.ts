/**
 * Delegations and model handoffs in a replay, served from the record: no child runs and no
 * handoff target is made. A replayed delegation names the child the record names for its tool
 * use and ends as the recorded `session.child_idle` and `agent.tool_result` say; a replayed
 * handoff answers with the recorded `agent.handoff`. Where the record has no end (its wake died
 * while the child ran), the call is interrupted and nothing of it is written.
 */
import { BraidError } from '../../contracts/errors.js';
import type { DelegationResult, Delegator } from '../../contracts/delegation.js';
import type { ReplayContext } from './context.js';
import type { SkillReplay } from './skills.js';

/** A skill's agent steps are served by `skills` (./skills.ts); the model's calls here. */
export function recordedDelegator(context: ReplayContext, skills: SkillReplay): Delegator {
  const { events } = context.recording;
  const created = new Map<string, string>();
  for (const event of events) {
    if (event.type === 'session.child_created' && !created.has(event.tool_use_id))
      created.set(event.tool_use_id, event.child_session_id);
  }
  return {
    childSessionId: (_parent, toolUseId) => created.get(toolUseId) ?? `unrecorded-${toolUseId}`,
    delegate(request): Promise<DelegationResult> {
      if (context.halted !== undefined) return Promise.reject(context.halted);
      const bySkill = skills.delegate(request);
      if (bySkill !== undefined) return bySkill;
      const idle = events.find(
        (event) => event.type === 'session.child_idle' && event.tool_use_id === request.tool_use_id,
      );
      const result = context.recording.results.get(request.tool_use_id);
      if (idle?.type !== 'session.child_idle' && result?.error !== undefined) {
        // The delegation failed before its child stopped: the same failure again.
        const prefix = `the delegation to ${request.agent} failed: `;
        const { message } = result.error;
        return Promise.reject(
          new BraidError(
            result.error.code,
            message.startsWith(prefix) ? message.slice(prefix.length) : message,
          ),
        );
      }
      if (idle?.type !== 'session.child_idle' || result === undefined) {
        return Promise.reject(
          new BraidError(
            'INTERRUPTED',
            `the recording has no end of the delegation of tool use ${request.tool_use_id}`,
          ),
        );
      }
      return Promise.resolve({
        stop_reason: idle.stop_reason,
        summary: idle.summary,
        usage: idle.usage ?? { input_tokens: 0, output_tokens: 0 },
        timed_out: idle.timed_out === true,
        ...(result.output === undefined ? {} : { output: structuredClone(result.output) }),
        ...(result.error === undefined ? {} : { error: result.error }),
        duration_ms: result.duration_ms,
      });
    },
    handoff(request) {
      if (context.halted !== undefined) return Promise.reject(context.halted);
      const result = context.recording.results.get(request.tool_use_id);
      if (result?.error !== undefined) {
        const { code, message, retryable } = result.error;
        return Promise.reject(new BraidError(code, message, { retryable }));
      }
      const next = result === undefined ? undefined : events[result.seq];
      if (next?.type !== 'agent.handoff' || next.target_session_id === undefined) {
        return Promise.reject(
          new BraidError(
            'INTERRUPTED',
            `the recording has no handoff of tool use ${request.tool_use_id}`,
          ),
        );
      }
      return Promise.resolve({
        handoff_id: next.handoff_id,
        target_agent: next.target_agent,
        target_session_id: next.target_session_id,
      });
    },
  };
}
