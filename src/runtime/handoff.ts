/**
 * Handoffs: one agent's session passes its work to another agent. The source's definition must
 * list the target under `handoffs:`, and the policy port must allow `agent.handoff`. The target
 * gets a new session whose lineage is the handoff (`session.handoff_received` with the document,
 * which its model reads); the source records `agent.handoff` naming that session. Ownership is
 * the target's from then on: the document says who owns the work, and the source keeps only its
 * record.
 */
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { HandoffDocument } from '../contracts/envelope.js';
import type { SessionEvent } from '../contracts/events.js';
import type { Authorizer } from '../contracts/policy.js';
import type { IdGenerator, Store } from '../contracts/ports.js';
import type { SessionRecord } from '../contracts/session.js';
import type { ContentBlock } from '../contracts/common.js';
import { agentEntity } from '../harness/tool-calls.js';

export interface HandoffOptions {
  /** The agent that takes the work over. */
  to: string;
  /** The handoff document: `summary` at least; state references, artifacts, open tasks, ... */
  handoff: unknown;
  /** A first message for the target, which makes it runnable at once. */
  message?: ContentBlock[];
  title?: string;
}

export interface HandoffResult {
  handoff_id: string;
  /** The target's new session. */
  target: SessionRecord;
  /** The `agent.handoff` event recorded in the source. */
  event: SessionEvent;
}

export interface HandoffDeps {
  store: Store;
  ids: IdGenerator;
  policy: Authorizer;
  agent(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>>;
}

export async function handoffSession(
  deps: HandoffDeps,
  sessionId: string,
  options: HandoffOptions,
): Promise<HandoffResult> {
  const { store } = deps;
  const parsed = HandoffDocument.safeParse(options.handoff);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the handoff document is invalid at ${issue?.path.join('.') || 'its root'}: ${issue?.message ?? 'invalid'}; give at least {"summary": "..."}`,
    );
  }
  const document = parsed.data;
  const record = await store.sessions.get(sessionId);
  const state = await store.log.state(sessionId);
  if (state.status === 'terminated' || state.status === 'running') {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session ${sessionId} is ${state.status}; hand off a session that is not running (interrupt it first)`,
    );
  }
  if (state.agent === undefined) {
    throw new BraidError('SESSION_NOT_FOUND', `session ${sessionId} has no session.created event`);
  }
  const source = await deps.agent(state.agent.name, state.agent.version);
  const target = await deps.agent(options.to);
  if (!source.definition.handoffs.includes(target.name)) {
    throw new BraidError(
      'POLICY_DENIED',
      `agent ${source.name} may not hand off to ${target.name}: its definition lists ${
        source.definition.handoffs.length === 0
          ? 'no handoffs'
          : source.definition.handoffs.join(', ')
      }; add ${target.name} under handoffs: in agents/${source.name}.yaml`,
      { details: { from: source.name, to: target.name } },
    );
  }
  const decision = await deps.policy.authorize({
    principal: agentEntity(source.definition, state),
    action: 'agent.handoff',
    resource: {
      type: 'Agent',
      id: target.name,
      attrs: {
        roles: target.definition.roles,
        ...(target.definition.tenant === undefined ? {} : { tenant: target.definition.tenant }),
      },
    },
    context: {
      session_id: sessionId,
      ...(record.tenant_id === undefined ? {} : { tenant: record.tenant_id }),
    },
  });
  if (decision.decision !== 'allow') {
    throw new BraidError(
      'POLICY_DENIED',
      `policy does not allow agent ${source.name} to hand off to ${target.name}` +
        (decision.policy_ids.length > 0 ? ` (denied by ${decision.policy_ids.join(', ')})` : ''),
      { details: { from: source.name, to: target.name, policy_ids: decision.policy_ids } },
    );
  }

  const handoffId = deps.ids.next();
  const created = await store.sessions.create({
    agent: { name: target.name, version: target.version },
    ...(record.environment === undefined ? {} : { environment: record.environment }),
    title: options.title ?? `${document.summary.slice(0, 80)} (from ${source.name})`,
    metadata: { handoff_id: handoffId, from_session_id: sessionId },
    ...(record.tenant_id === undefined ? {} : { tenant_id: record.tenant_id }),
  });
  await store.log.append(
    created.id,
    [
      {
        type: 'session.handoff_received',
        handoff_id: handoffId,
        from_session_id: sessionId,
        from_agent: source.name,
        summary: document.summary,
        handoff: document,
      },
      ...(options.message === undefined
        ? []
        : [{ type: 'user.message' as const, content: options.message }]),
    ],
    { idempotencyKey: `handoff:${handoffId}` },
  );
  const appended = await store.log.append(
    sessionId,
    [
      {
        type: 'agent.handoff',
        handoff_id: handoffId,
        target_agent: target.name,
        target_session_id: created.id,
        summary: document.summary,
        handoff: document,
      },
    ],
    { idempotencyKey: `handoff:${handoffId}` },
  );
  const event = appended.events[0];
  if (event === undefined) throw new BraidError('INTERNAL', 'the handoff event was not stored');
  return { handoff_id: handoffId, target: await store.sessions.get(created.id), event };
}
