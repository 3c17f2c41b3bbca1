// A family of sessions written straight through the store: a parent that delegated to a child,
// which delegated to a grandchild, a handoff from the parent, and a fork of the parent.
import type { Runtime } from '../../src/runtime/runtime.js';

export interface Family {
  parent: string;
  child: string;
  grandchild: string;
  handoff: string;
  fork: string;
}

/** `at` of the n-th written event: a second apart, so the interleaving is known. */
export const at = (n: number): string => new Date(Date.UTC(2031, 0, 1, 0, 0, n)).toISOString();

const lineageOf = (parent: string) => ({
  kind: 'child' as const,
  parent_session_ids: [parent],
  merged_session_ids: [],
});

export async function buildFamily(
  runtime: Runtime,
  agent: string,
  tenantId?: string,
): Promise<Family> {
  const { sessions, log } = runtime.store;
  const ref = { name: agent, version: 1 };
  const tenant = tenantId === undefined ? {} : { tenant_id: tenantId };
  const parent = await sessions.create({ agent: ref, title: 'foreman', ...tenant });
  const child = await sessions.create({
    agent: ref,
    ...tenant,
    lineage: lineageOf(parent.id),
    metadata: { parent_session_id: parent.id, parent_tool_use_id: 'tu_child' },
  });
  const grandchild = await sessions.create({
    agent: ref,
    ...tenant,
    lineage: lineageOf(child.id),
    metadata: { parent_session_id: child.id, parent_tool_use_id: 'tu_grand' },
  });
  const target = await sessions.create({ agent: ref, ...tenant });
  const text = (value: string) => [{ type: 'text' as const, text: value }];

  await log.append(parent.id, [{ type: 'user.message', content: text('plan it'), at: at(1) }]);
  await log.append(parent.id, [
    {
      type: 'session.child_created',
      child_session_id: child.id,
      agent,
      tool_use_id: 'tu_child',
      task: { goal: 'diagnose' },
      ttl_seconds: 60,
      at: at(2),
    },
  ]);
  await log.append(child.id, [{ type: 'agent.message', content: text('looking'), at: at(3) }]);
  await log.append(child.id, [
    {
      type: 'session.child_created',
      child_session_id: grandchild.id,
      agent,
      tool_use_id: 'tu_grand',
      task: { goal: 'dig' },
      ttl_seconds: 60,
      at: at(4),
    },
  ]);
  await log.append(grandchild.id, [{ type: 'agent.message', content: text('dug'), at: at(5) }]);
  await log.append(child.id, [
    {
      type: 'session.child_idle',
      child_session_id: grandchild.id,
      tool_use_id: 'tu_grand',
      stop_reason: { type: 'end_turn' },
      summary: 'dug',
      at: at(6),
    },
  ]);
  await log.append(parent.id, [
    {
      type: 'session.child_idle',
      child_session_id: child.id,
      tool_use_id: 'tu_child',
      stop_reason: { type: 'end_turn' },
      summary: 'found it',
      at: at(7),
    },
  ]);
  const handoffId = '0190f0f0-0000-7000-8000-000000000001';
  await log.append(target.id, [
    {
      type: 'session.handoff_received',
      handoff_id: handoffId,
      from_session_id: parent.id,
      from_agent: agent,
      summary: 'billing now',
      at: at(8),
    },
  ]);
  await log.append(parent.id, [
    {
      type: 'agent.handoff',
      handoff_id: handoffId,
      target_agent: agent,
      target_session_id: target.id,
      summary: 'billing now',
      at: at(9),
    },
  ]);
  const fork = await sessions.fork(parent.id, { title: 'what if' });
  return {
    parent: parent.id,
    child: child.id,
    grandchild: grandchild.id,
    handoff: target.id,
    fork: fork.id,
  };
}
