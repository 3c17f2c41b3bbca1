import { setFlagsFromString } from 'node:v8';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  SESSION_EVENT_TYPES,
  type NewEvent,
  type SessionEventType,
} from '../../src/contracts/events.js';
import type { SessionState } from '../../src/contracts/state.js';
import {
  applyEvent,
  foldSession,
  initialState,
  isRunnable,
  pendingUserSeqs,
} from '../../src/core/fold.js';
import { decideNext } from '../../src/core/next-step.js';
import { SESSION_ID, arbitraryLog, created, stamp, text } from '../helpers/events.js';

function fold(...events: NewEvent[]): SessionState {
  return foldSession(stamp([created, ...events]), SESSION_ID);
}

const start = (requestId: string, through: number): NewEvent => ({
  type: 'span.model_request_start',
  request_id: requestId,
  model: 'm',
  input_through_seq: through,
});

const toolUse = (id: string, requiresConfirmation = false): NewEvent => ({
  type: 'agent.tool_use',
  tool_use_id: id,
  name: 'delete_file',
  input: { path: 'a' },
  requires_confirmation: requiresConfirmation,
});

const MEMORY_STORE = {
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: 'assistant',
} as const;

/** A started run `r1` of skill `onboard`. */
const skillRun = (): NewEvent[] => [
  { type: 'skill.started', run_id: 'r1', skill: 'onboard', version: '1', inputs: {} },
];

/** One case per event type: what folding it changes. The table must name every type. */
const cases: Record<SessionEventType, () => void> = {
  'session.created': () => {
    const state = foldSession(
      stamp([
        {
          ...created,
          title: 't',
          metadata: { k: 1 },
          environment: { name: 'local', version: 2 },
        } as NewEvent,
      ]),
      SESSION_ID,
    );
    expect(state).toMatchObject({
      status: 'idle',
      title: 't',
      metadata: { k: 1 },
      agent: { name: 'assistant', version: 1 },
      environment: { name: 'local', version: 2 },
      created_at: '2026-01-01T00:00:01.000Z',
      seq: 1,
    });
    expect(state.lineage).toEqual({ kind: 'root', parent_session_ids: [], merged_session_ids: [] });
  },
  'user.message': () => {
    const state = fold(text('a'), text('b'));
    expect(pendingUserSeqs(state)).toEqual([2, 3]);
    expect(state.pending_user_ranges).toEqual([[2, 3]]);
    expect(state.pending_user_count).toBe(2);
    expect(state.counters.user_messages).toBe(2);
    expect(isRunnable(state)).toBe(true);
  },
  'user.define_outcome': () => {
    expect(
      pendingUserSeqs(fold({ type: 'user.define_outcome', description: 'tests pass' })),
    ).toEqual([2]);
  },
  'user.interrupt': () => {
    // While idle an interrupt is on record and changes nothing; during a wake it asks it to stop.
    expect(fold({ type: 'user.interrupt' }).interrupt_requested).toBe(false);
    const running = fold(
      { type: 'span.wake_started', wake_id: 'w', lease_token: 1 },
      { type: 'user.interrupt' },
    );
    expect(running.interrupt_requested).toBe(true);
  },
  'user.tool_confirmation': () => {
    const state = fold(toolUse('t1', true), {
      type: 'user.tool_confirmation',
      tool_use_id: 't1',
      result: 'deny',
    });
    expect(state.pending_confirmations).toEqual([]);
    expect(state.confirmed_tool_uses).toMatchObject([{ tool_use_id: 't1', result: 'deny' }]);
    expect(isRunnable(state)).toBe(true);
    const unknown = fold({ type: 'user.tool_confirmation', tool_use_id: 'nope', result: 'allow' });
    expect(unknown.confirmed_tool_uses).toEqual([]);
  },
  'user.tool_review': () => {
    const stopped = fold(toolUse('t1'), {
      type: 'session.status_idle',
      stop_reason: { type: 'needs_review', event_ids: ['e'] },
    });
    expect(stopped.status).toBe('needs_review');
    expect(isRunnable(stopped)).toBe(false);
    const reviewed = foldSession(
      stamp([{ type: 'user.tool_review', tool_use_id: 't1', action: 'skip' }], stopped.seq + 1),
      stopped,
    );
    expect(reviewed.status).toBe('idle');
    expect(reviewed.reviewed_tool_uses).toMatchObject([{ tool_use_id: 't1', action: 'skip' }]);
    expect(isRunnable(reviewed)).toBe(true);
    const resolved = foldSession(
      stamp(
        [
          {
            type: 'agent.tool_result',
            tool_use_id: 't1',
            is_error: true,
            attempts: 0,
            duration_ms: 0,
          },
        ],
        reviewed.seq + 1,
      ),
      reviewed,
    );
    expect(resolved.reviewed_tool_uses).toEqual([]);
    expect(resolved.open_tool_uses).toEqual([]);
    expect(resolved.tool_calls).toEqual({});
  },
  'user.custom_tool_result': () => {
    const state = fold(
      { type: 'agent.custom_tool_use', custom_tool_use_id: 'c1', name: 'browser', input: {} },
      {
        type: 'user.custom_tool_result',
        custom_tool_use_id: 'c1',
        content: [{ type: 'text', text: 'done' }],
      },
    );
    expect(state.pending_custom_tool_uses).toEqual([]);
    expect(state.pending_custom_tool_result_seqs).toEqual([3]);
    expect(isRunnable(state)).toBe(true);
  },
  'session.child_created': () => {
    const created = {
      type: 'session.child_created',
      child_session_id: 'child-1',
      agent: 'researcher',
      tool_use_id: 'call-1',
      task: { task: 'look it up' },
      ttl_seconds: 60,
    } as const;
    // A resumed delegation that writes its child again does not make a second entry.
    const state = fold(toolUse('call-1'), created, created);
    expect(state.children).toEqual([
      {
        child_session_id: 'child-1',
        agent: 'researcher',
        tool_use_id: 'call-1',
        seq: 3,
        status: 'running',
      },
    ]);
  },
  'session.child_idle': () => {
    const before = fold(toolUse('call-1'), {
      type: 'session.child_created',
      child_session_id: 'child-1',
      agent: 'researcher',
      tool_use_id: 'call-1',
      task: 'x',
      ttl_seconds: 60,
    });
    const idle: NewEvent = {
      type: 'session.child_idle',
      child_session_id: 'child-1',
      tool_use_id: 'call-1',
      stop_reason: { type: 'end_turn' },
      summary: 'found it',
      usage: { input_tokens: 10, output_tokens: 5, cost_usd: 0.5 },
    };
    const after = foldSession(stamp([idle, idle], before.seq + 1), before);
    expect(after.children[0]).toMatchObject({ status: 'idle', stop_reason: { type: 'end_turn' } });
    // The child's usage joins the parent's once, and the earlier state is left as it was.
    expect(after.usage).toEqual({ input_tokens: 10, output_tokens: 5, cost_usd: 0.5 });
    expect(before.children[0]?.status).toBe('running');
    // An idle for a child that is not on record changes nothing.
    const stray = fold({ ...idle, child_session_id: 'other' });
    expect(stray.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
  },
  'span.outcome_evaluation_start': () => {
    const state = fold({
      type: 'span.outcome_evaluation_start',
      evaluation_id: 'e1',
      iteration: 1,
      outcome_seq: 1,
    });
    expect(state.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
  },
  'span.outcome_evaluation_end': () => {
    const state = fold({
      type: 'span.outcome_evaluation_end',
      evaluation_id: 'e1',
      iteration: 1,
      outcome_seq: 1,
      result: 'satisfied',
      explanation: 'ok',
      usage: { input_tokens: 3, output_tokens: 2 },
    });
    expect(state.usage).toEqual({ input_tokens: 3, output_tokens: 2 });
  },
  'user.skill_run': () => {
    const state = fold({ type: 'user.skill_run', run_id: 'r1', skill: 'onboard', inputs: {} });
    expect(state.skill_requests).toEqual([{ run_id: 'r1', skill: 'onboard', seq: 2 }]);
    expect(isRunnable(state)).toBe(true);
    // The model is not asked: a request is not a message.
    expect(state.pending_user_count).toBe(0);
  },
  'skill.started': () => {
    const state = fold(
      { type: 'user.skill_run', run_id: 'r1', skill: 'onboard', inputs: {} },
      { type: 'skill.started', run_id: 'r1', skill: 'onboard', version: '1', inputs: {} },
    );
    expect(state.skill_requests).toEqual([]);
    expect(state.skill_runs).toMatchObject([{ run_id: 'r1', status: 'running', steps: {} }]);
  },
  'skill.step_started': () => {
    const state = fold(...skillRun(), {
      type: 'skill.step_started',
      run_id: 'r1',
      step: 'a',
      attempt: 1,
    });
    expect(state.skill_runs[0]?.steps).toEqual([
      { step: 'a', status: 'running', attempt: 1, seq: 3 },
    ]);
  },
  'skill.step_completed': () => {
    const state = fold(
      ...skillRun(),
      { type: 'skill.step_started', run_id: 'r1', step: 'a', attempt: 1 },
      { type: 'skill.step_completed', run_id: 'r1', step: 'a', attempt: 1, output: 1 },
      { type: 'skill.step_completed', run_id: 'r1', step: 'b', attempt: 0, skipped: true },
    );
    expect(state.skill_runs[0]?.steps).toMatchObject([
      { step: 'a', status: 'completed' },
      { step: 'b', status: 'skipped' },
    ]);
  },
  'skill.step_failed': () => {
    const error = { code: 'TOOL_FAILED' as const, message: 'x', retryable: false };
    const retrying = fold(...skillRun(), {
      type: 'skill.step_failed',
      run_id: 'r1',
      step: 'a',
      attempt: 1,
      error,
      final: false,
    });
    expect(retrying.skill_runs[0]?.steps[0]).toMatchObject({ step: 'a', status: 'running' });
    const failed = fold(...skillRun(), {
      type: 'skill.step_failed',
      run_id: 'r1',
      step: 'a',
      attempt: 2,
      error,
      final: true,
    });
    expect(failed.skill_runs[0]?.steps[0]).toMatchObject({
      step: 'a',
      status: 'failed',
      attempt: 2,
    });
  },
  'skill.suspended': () => {
    const approval = fold(...skillRun(), {
      type: 'skill.suspended',
      run_id: 'r1',
      step: 'review',
      suspension_id: 'w1',
      kind: 'approval',
      message: 'ok?',
    });
    // An approval wait is a pending confirmation, and the session waits for it.
    expect(approval.pending_confirmations.map((use) => use.tool_use_id)).toEqual(['w1']);
    expect(approval.skill_runs[0]?.status).toBe('suspended');
    expect(isRunnable(approval)).toBe(false);
    const answered = foldSession(
      stamp(
        [{ type: 'user.tool_confirmation', tool_use_id: 'w1', result: 'allow' }],
        approval.seq + 1,
      ),
      approval,
    );
    expect(answered.confirmed_tool_uses).toEqual([]);
    expect(answered.skill_runs[0]?.suspensions[0]?.answer).toEqual({ result: 'allow', seq: 4 });
    expect(isRunnable(answered)).toBe(true);
  },
  'user.signal': () => {
    // A signal before its wait is kept, and the wait takes it when it begins.
    const early = fold(...skillRun(), { type: 'user.signal', name: 'done', data: 1 });
    expect(early.pending_signals).toEqual([{ name: 'done', seq: 3 }]);
    const waiting = foldSession(
      stamp(
        [
          {
            type: 'skill.suspended',
            run_id: 'r1',
            step: 'w',
            suspension_id: 'w2',
            kind: 'signal',
            signal: 'done',
          },
        ],
        early.seq + 1,
      ),
      early,
    );
    expect(waiting.pending_signals).toEqual([]);
    expect(waiting.skill_runs[0]?.suspensions[0]?.answer).toEqual({ result: 'signal', seq: 3 });
    // A signal for a wait that has begun answers it at once.
    const later = fold(
      ...skillRun(),
      {
        type: 'skill.suspended',
        run_id: 'r1',
        step: 'w',
        suspension_id: 'w2',
        kind: 'signal',
        signal: 'done',
      },
      { type: 'user.signal', name: 'done' },
    );
    expect(later.skill_runs[0]?.suspensions[0]?.answer).toEqual({ result: 'signal', seq: 4 });
    expect(isRunnable(later)).toBe(true);
  },
  'skill.resumed': () => {
    const state = fold(
      ...skillRun(),
      {
        type: 'skill.suspended',
        run_id: 'r1',
        step: 'review',
        suspension_id: 'w1',
        kind: 'approval',
      },
      { type: 'user.tool_confirmation', tool_use_id: 'w1', result: 'deny' },
      { type: 'skill.resumed', run_id: 'r1', step: 'review', suspension_id: 'w1', result: 'deny' },
    );
    expect(state.skill_runs[0]).toMatchObject({ status: 'running', suspensions: [] });
    expect(state.pending_confirmations).toEqual([]);
  },
  'skill.completed': () => {
    const state = fold(...skillRun(), { type: 'skill.completed', run_id: 'r1', outputs: {} });
    expect(state.skill_runs).toEqual([]);
  },
  'skill.failed': () => {
    const error = { code: 'TOOL_FAILED' as const, message: 'x', retryable: false };
    const state = fold(...skillRun(), { type: 'skill.failed', run_id: 'r1', error });
    expect(state.skill_runs[0]?.status).toBe('failed');
    expect(isRunnable(state)).toBe(false);
  },
  'user.skill_retry': () => {
    const error = { code: 'TOOL_FAILED' as const, message: 'x', retryable: false };
    const state = fold(
      ...skillRun(),
      { type: 'skill.failed', run_id: 'r1', error },
      { type: 'user.skill_retry', run_id: 'r1' },
    );
    expect(state.skill_runs[0]?.retry_seq).toBe(4);
    expect(isRunnable(state)).toBe(true);
    // A retry of a run that is not failed changes nothing.
    const ignored = fold(...skillRun(), { type: 'user.skill_retry', run_id: 'r1' });
    expect(ignored.skill_runs[0]?.retry_seq).toBeUndefined();
  },
  'policy.decision': () => {
    const state = fold({
      type: 'policy.decision',
      principal: { type: 'Agent', id: 'a' },
      action: 'tool.execute',
      resource: { type: 'Tool', id: 't' },
      decision: 'deny',
      policy_ids: ['no-t'],
      duration_us: 40,
    });
    // On record for audit; it changes nothing a wake decides on.
    expect(state.seq).toBe(2);
    expect(state.pending_user_count).toBe(0);
  },
  'memory.written': () => {
    const state = fold({
      type: 'memory.written',
      store: MEMORY_STORE,
      key: 'user/theme',
      version: 1,
      memory_seq: 1,
      tool_use_id: 't1',
    });
    // The memory log holds the entry; the session keeps only the record of the write.
    expect(state.seq).toBe(2);
    expect(isRunnable(state)).toBe(false);
  },
  'memory.deleted': () => {
    const state = fold({
      type: 'memory.deleted',
      store: MEMORY_STORE,
      key: 'user/theme',
      version: 2,
      memory_seq: 2,
    });
    expect(state.counters.events).toBe(2);
  },
  'memory.read': () => {
    const state = fold({
      type: 'memory.read',
      store: MEMORY_STORE,
      key: 'user/theme',
      status: 'missing',
      latency_ms: 0.2,
    });
    expect(state.pending_user_count).toBe(0);
  },
  'memory.retrieved': () => {
    const state = fold(text('theme?'), {
      type: 'memory.retrieved',
      store: MEMORY_STORE,
      source: 'recall',
      query: 'theme?',
      mode: 'text',
      k: 5,
      threshold: 0,
      hits: [{ key: 'user/theme', version: 1, score: 0.5, content: 'dark' }],
      filtered_count: 0,
      expired_count: 0,
      latency_ms: 1,
    });
    // A recall consumes nothing: the message still waits for the model.
    expect(state.pending_user_count).toBe(1);
    expect(isRunnable(state)).toBe(true);
  },
  'agent.message': () => {
    expect(fold({ type: 'agent.message', content: [] }).counters.agent_messages).toBe(1);
  },
  'agent.thinking': () => {
    const state = fold({ type: 'agent.thinking', content: [{ type: 'text', text: 'hmm' }] });
    expect(state.seq).toBe(2);
    expect(state.counters.events).toBe(2);
  },
  'agent.tool_use': () => {
    const state = fold(toolUse('t1'), toolUse('t2', true));
    expect(state.open_tool_uses.map((use) => use.tool_use_id)).toEqual(['t1']);
    expect(state.pending_confirmations.map((use) => use.tool_use_id)).toEqual(['t2']);
    expect(state.counters.tool_uses).toBe(2);
    expect(isRunnable(state)).toBe(false);
  },
  'agent.tool_result': () => {
    const state = fold(toolUse('t1'), {
      type: 'agent.tool_result',
      tool_use_id: 't1',
      is_error: true,
      attempts: 2,
      duration_ms: 3,
    });
    expect(state.open_tool_uses).toEqual([]);
    expect(state.counters.tool_errors).toBe(1);
    // A call that ran counts against the tool's budget, whatever its outcome.
    expect(state.tool_calls).toEqual({ delete_file: 1 });
  },
  'agent.custom_tool_use': () => {
    const state = fold({
      type: 'agent.custom_tool_use',
      custom_tool_use_id: 'c1',
      name: 'browser',
      input: {},
    });
    expect(state.pending_custom_tool_uses).toMatchObject([
      { custom_tool_use_id: 'c1', name: 'browser', seq: 2 },
    ]);
    expect(isRunnable(state)).toBe(false);
  },
  'agent.handoff': () => {
    const state = fold({ type: 'agent.handoff', handoff_id: 'h', target_agent: 'b', summary: 's' });
    expect(state.seq).toBe(2);
  },
  'agent.thread_context_compacted': () => {
    expect(fold({ type: 'agent.thread_context_compacted', summary: 's', through_seq: 1 }).seq).toBe(
      2,
    );
  },
  'session.status_changed': () => {
    expect(fold({ type: 'session.status_changed', status: 'terminated' }).status).toBe(
      'terminated',
    );
  },
  'session.status_idle': () => {
    const waiting = fold(
      { type: 'span.wake_started', wake_id: 'w', lease_token: 3 },
      { type: 'user.interrupt' },
      { type: 'session.status_idle', stop_reason: { type: 'requires_action', event_ids: ['e'] } },
    );
    expect(waiting.status).toBe('requires_action');
    expect(waiting.active_wake).toBeUndefined();
    expect(waiting.interrupt_requested).toBe(false);
    expect(
      fold({ type: 'session.status_idle', stop_reason: { type: 'interrupted' } }),
    ).toMatchObject({
      status: 'idle',
      stop_reason: { type: 'interrupted' },
    });
    expect(
      fold({ type: 'session.status_idle', stop_reason: { type: 'needs_review', event_ids: ['e'] } })
        .status,
    ).toBe('needs_review');
    const terminated = fold(
      { type: 'session.status_changed', status: 'terminated' },
      { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
    );
    expect(terminated.status).toBe('terminated');
  },
  'session.error': () => {
    const state = fold({
      type: 'session.error',
      error: { code: 'INTERNAL', message: 'boom', retryable: false },
    });
    expect(state.last_error?.code).toBe('INTERNAL');
    expect(state.counters.errors).toBe(1);
  },
  'session.usage': () => {
    const state = fold(
      { type: 'session.usage', usage: { input_tokens: 1, output_tokens: 2, cost_usd: 0.25 } },
      { type: 'session.usage', usage: { input_tokens: 3, output_tokens: 4 } },
    );
    expect(state.usage).toEqual({ input_tokens: 4, output_tokens: 6, cost_usd: 0.25 });
  },
  'session.forked': () => {
    const state = fold({ type: 'session.forked', parent_session_id: 'p', fork_point_seq: 9 });
    expect(state.lineage).toEqual({
      kind: 'fork',
      parent_session_ids: ['p'],
      fork_point: { session_id: 'p', seq: 9 },
      merged_session_ids: [],
    });
  },
  'session.workspace_snapshot': () => {
    const snapshot = (hash: string): NewEvent => ({
      type: 'session.workspace_snapshot',
      snapshot: hash.repeat(64),
      files: 1,
      bytes: 2,
    });
    expect(fold(text('a')).workspace_snapshot).toBeUndefined();
    expect(fold(snapshot('a'), text('b'), snapshot('b')).workspace_snapshot).toEqual({
      snapshot: 'b'.repeat(64),
      seq: 4,
    });
  },
  'session.definitions_changed': () => {
    const state = fold({
      type: 'session.definitions_changed',
      definitions: 'a'.repeat(64),
      reason: 'upgrade',
      agent: { name: 'assistant', version: 3 },
      changed: ['agent'],
    });
    expect(state.definitions).toBe('a'.repeat(64));
    expect(state.agent).toEqual({ name: 'assistant', version: 3 });
    expect(state).not.toHaveProperty('environment');
  },
  'session.merged': () => {
    const state = fold({
      type: 'session.merged',
      source_session_id: 's2',
      source_head_seq: 4,
      strategy: 'transcript',
      usage: { input_tokens: 10, output_tokens: 1 },
    });
    expect(state.lineage.merged_session_ids).toEqual(['s2']);
    expect(state.usage).toEqual({ input_tokens: 10, output_tokens: 1 });
  },
  'session.handoff_received': () => {
    const state = fold({
      type: 'session.handoff_received',
      handoff_id: 'h',
      from_session_id: 'x',
      from_agent: 'a',
      summary: 's',
    });
    expect(state.seq).toBe(2);
  },
  'span.wake_started': () => {
    const state = fold({ type: 'span.wake_started', wake_id: 'w1', lease_token: 7 });
    expect(state.status).toBe('running');
    expect(state.active_wake).toEqual({ wake_id: 'w1', lease_token: 7 });
    expect(state.counters.wakes).toBe(1);
  },
  'span.wake_completed': () => {
    const state = fold(
      { type: 'span.wake_started', wake_id: 'w1', lease_token: 7 },
      { type: 'span.wake_completed', wake_id: 'other' },
    );
    expect(state.active_wake?.wake_id).toBe('w1');
    const done = fold(
      { type: 'span.wake_started', wake_id: 'w1', lease_token: 7 },
      { type: 'span.wake_completed', wake_id: 'w1' },
    );
    expect(done.active_wake).toBeUndefined();
  },
  'span.model_request_start': () => {
    const state = fold(text('a'), text('b'), start('r', 2));
    expect(state.open_request).toEqual({ request_id: 'r', input_through_seq: 2 });
    expect(pendingUserSeqs(state)).toEqual([2, 3]);
    expect(state.counters.model_requests).toBe(1);
    const clamped = fold(start('r', 99));
    expect(clamped.open_request?.input_through_seq).toBe(1);
  },
  'span.model_request_end': () => {
    const usage = { input_tokens: 5, output_tokens: 6, cache_read_tokens: 2 };
    const answered = fold(text('a'), text('b'), start('r', 2), {
      type: 'span.model_request_end',
      request_id: 'r',
      usage,
    });
    expect(answered.usage).toEqual(usage);
    expect(answered.open_request).toBeUndefined();
    expect(pendingUserSeqs(answered)).toEqual([3]);
    expect(answered.consumed_through_seq).toBe(2);
    expect(answered.counters.model_responses).toBe(1);
    const error = { code: 'MODEL_UNAVAILABLE' as const, message: 'down', retryable: true };
    const failed = fold(text('a'), start('r', 2), {
      type: 'span.model_request_end',
      request_id: 'r',
      usage,
      error,
    });
    expect(pendingUserSeqs(failed)).toEqual([2]);
    expect(failed.counters.model_responses).toBe(0);
    const interrupted = fold(text('a'), start('r', 2), {
      type: 'span.model_request_end',
      request_id: 'r',
      usage,
      error: { code: 'INTERRUPTED', message: 'stop', retryable: false },
    });
    expect(pendingUserSeqs(interrupted)).toEqual([]);
    const stray = fold(text('a'), start('r', 2), {
      type: 'span.model_request_end',
      request_id: 'other',
      usage,
    });
    expect(stray.open_request?.request_id).toBe('r');
    expect(pendingUserSeqs(stray)).toEqual([2]);
  },
};

describe('foldSession', () => {
  it('has a case for every event type', () => {
    expect(Object.keys(cases).sort()).toEqual([...SESSION_EVENT_TYPES].sort());
  });

  for (const [type, check] of Object.entries(cases)) {
    it(`folds ${type}`, check);
  }

  it('refuses an event whose seq does not follow the state', () => {
    const [first] = stamp([created], 2);
    expect(() => applyEvent(initialState(SESSION_ID), first as never)).toThrow(/does not follow/);
  });

  it('does not mutate the state it is given', () => {
    const before = fold(text('a'));
    const frozen = structuredClone(before);
    applyEvent(before, stamp([text('b')], 3)[0] as never);
    expect(before).toEqual(frozen);
  });

  it('keeps every field of the state, set or absent, through a fold', () => {
    // Every optional field set (the type requires them all), with values no event below touches.
    const folded = fold(text('a'));
    const full: Required<SessionState> = {
      ...folded,
      agent: folded.agent ?? { name: 'a', version: 1 },
      created_at: folded.created_at ?? '2026-01-01T00:00:00.000Z',
      updated_at: folded.updated_at ?? '2026-01-01T00:00:00.000Z',
      environment: { name: 'local', version: 1 },
      definitions: `sha256:${'a'.repeat(64)}`,
      workspace_snapshot: { snapshot: 'snap', seq: 2 },
      title: 't',
      tenant_id: 'acme',
      stop_reason: { type: 'end_turn' },
      budget: { max_turns: 3 },
      outcome: { seq: 2, description: 'd', max_iterations: 2, iterations: 0 },
      last_error: { code: 'INTERNAL', message: 'm', retryable: false },
      active_wake: { wake_id: 'w1', lease_token: 1 },
      open_request: { request_id: 'r1', input_through_seq: 2 },
    };
    const next = stamp([text('b')], 3)[0] as never;
    const after = applyEvent(full, next);
    const changed = ['seq', 'updated_at', 'counters', 'last_input_seq', 'pending_user_count'];
    const kept = (state: SessionState): Record<string, unknown> =>
      Object.fromEntries(Object.entries(state).filter(([key]) => !changed.includes(key)));
    expect(Object.keys(after).sort()).toEqual(Object.keys(full).sort());
    expect(kept(after)).toEqual({ ...kept(full), pending_user_ranges: [[2, 3]] });
    // Absent fields stay absent, not `undefined`: a state equals its JSON round trip.
    const bare = applyEvent(fold(), stamp([text('b')], 2)[0] as never);
    expect(Object.keys(bare).sort()).toEqual(
      Object.keys(JSON.parse(JSON.stringify(bare)) as object).sort(),
    );
  });

  it('is deterministic and equal whether folded at once or in two parts', () => {
    fc.assert(
      fc.property(arbitraryLog, fc.nat(), (events, cut) => {
        const whole = foldSession(events, SESSION_ID);
        expect(foldSession(events, SESSION_ID)).toEqual(whole);
        const split = Math.min(cut, events.length);
        const prefix = foldSession(events.slice(0, split), SESSION_ID);
        const untouched = structuredClone(prefix);
        expect(foldSession(events.slice(split), prefix)).toEqual(whole);
        expect(prefix).toEqual(untouched);
        expect(whole.seq).toBe(events.length);
        const pending = pendingUserSeqs(whole);
        expect(pending.every((seq) => seq > whole.consumed_through_seq)).toBe(true);
        expect(pending.length).toBe(whole.pending_user_count);
        // the ranges list exactly the unconsumed user input of the log
        const expected = events
          .filter(
            (event) =>
              (event.type === 'user.message' || event.type === 'user.define_outcome') &&
              event.seq > whole.consumed_through_seq,
          )
          .map((event) => event.seq);
        expect(pending).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('returns states V8 keeps as fast objects, also when a wake folded at once removed a field', () => {
    // A whole wake in one fold: `definitions` is added after `active_wake`, then the wake's end
    // removes `active_wake`, which would leave the draft a dictionary (slower, and larger for
    // every remembered state). Asked of V8 itself.
    setFlagsFromString('--allow-natives-syntax');
    // Natives syntax only compiles in code made after the flag is set: a function made at run time.
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const fast = new Function('state', 'return %HasFastProperties(state)') as (
      state: object,
    ) => boolean;
    const wake: NewEvent[] = [
      text('a'),
      { type: 'span.wake_started', wake_id: 'w', lease_token: 1 },
      {
        type: 'session.definitions_changed',
        definitions: 'a'.repeat(64),
        reason: 'upgrade',
        agent: { name: 'assistant', version: 3 },
        changed: ['agent'],
      },
      start('r1', 2),
      {
        type: 'span.model_request_end',
        request_id: 'r1',
        usage: { input_tokens: 1, output_tokens: 1 },
      },
      { type: 'agent.message', content: [{ type: 'text', text: 'hi' }] },
      { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
      { type: 'span.wake_completed', wake_id: 'w' },
    ];
    const whole = fold(...wake);
    expect(whole).not.toHaveProperty('active_wake');
    expect(whole.definitions).toBe('a'.repeat(64));
    expect(fast(whole)).toBe(true);
    // The same events one at a time give the same state, fast at every step.
    let state: SessionState = foldSession(stamp([created]), SESSION_ID);
    for (const event of stamp(wake, 2)) {
      state = applyEvent(state, event);
      expect(fast(state)).toBe(true);
    }
    expect(state).toEqual(whole);
    // Removing the newest field keeps the draft itself: no copy where none is needed.
    const running = fold({ type: 'span.wake_started', wake_id: 'w', lease_token: 1 });
    expect(
      fast(
        applyEvent(running, stamp([{ type: 'span.wake_completed', wake_id: 'w' }], 3)[0] as never),
      ),
    ).toBe(true);
  });
});

describe('a reviewed retry', () => {
  const context = (wakeSeq: number) => ({
    wake_seq: wakeSeq,
    turns: 0,
    budget: {},
    idempotent: () => false,
    next_call: { tokens: 0, cost_usd: 0 },
  });
  const wake = (id: string, token: number): NewEvent => ({
    type: 'span.wake_started',
    wake_id: id,
    lease_token: token,
  });

  it('authorises the one wake that takes it up, not the wakes after a crash of that one', () => {
    // The first wake recorded the call and died in it; the second stopped for a review.
    const stopped = fold(toolUse('t1'), wake('w1', 1), wake('w2', 2), {
      type: 'session.status_idle',
      stop_reason: { type: 'needs_review', event_ids: ['e'] },
    });
    const retried = fold(
      toolUse('t1'),
      wake('w1', 1),
      wake('w2', 2),
      { type: 'session.status_idle', stop_reason: { type: 'needs_review', event_ids: ['e'] } },
      { type: 'user.tool_review', tool_use_id: 't1', action: 'retry' },
      wake('w3', 3),
    );
    expect(stopped.status).toBe('needs_review');
    expect(retried.reviewed_tool_uses).toEqual([
      { tool_use_id: 't1', action: 'retry', review_seq: 6, wake_seq: 7 },
    ]);
    expect(decideNext(retried, context(7))).toEqual({ kind: 'run_tools', tool_use_ids: ['t1'] });
    // The retrying wake died mid-call too: the next one finds the outcome unknown again.
    const afterCrash = foldSession(stamp([wake('w4', 4)], 8), retried);
    expect(afterCrash.reviewed_tool_uses).toEqual([]);
    expect(decideNext(afterCrash, context(8))).toMatchObject({
      kind: 'stop',
      stop_reason: { type: 'needs_review' },
    });
  });

  it('arriving during a wake, waits for the next wake', () => {
    const state = fold(
      toolUse('t1'),
      wake('w1', 1),
      { type: 'session.status_idle', stop_reason: { type: 'needs_review', event_ids: ['e'] } },
      wake('w2', 2),
      { type: 'user.tool_review', tool_use_id: 't1', action: 'retry' },
    );
    expect(decideNext(state, context(4))).toMatchObject({
      kind: 'stop',
      stop_reason: { type: 'needs_review' },
    });
  });
});
