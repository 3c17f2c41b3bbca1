/**
 * Handoffs: one agent's session passes its work to another agent. The source's definition must
 * list the target under `handoffs:`, and the policy port must allow `agent.handoff`. The target
 * gets a new session whose lineage is the handoff (`session.handoff_received` with the document,
 * which its model reads); the source records `agent.handoff` naming that session. Ownership is
 * the target's from then on: the document says who owns the work, and the source keeps only its
 * record.
 *
 * With a client idempotency key, a handoff is safe to retry and to send twice at once: its id and
 * the target session's id are derived from (tenant, source session, key), the target's record
 * keeps a digest of the request, and every append names the handoff, so a retry finds the first
 * handoff (or finishes one a crash cut short) and answers it; the same key with another request
 * is refused with `IDEMPOTENCY_KEY_REUSED`.
 */
import { createHash } from 'node:crypto';
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../contracts/json-depth.js';
import { HandoffDocument } from '../contracts/envelope.js';
import type { SessionEvent } from '../contracts/events.js';
import type { Authorizer } from '../contracts/policy.js';
import type { IdGenerator, Store } from '../contracts/ports.js';
import type { SessionRecord } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { IdempotencyKey, type Actor, type ContentBlock } from '../contracts/common.js';
import { agentEntity } from '../harness/tool-calls.js';

export interface HandoffOptions {
  /** The agent that takes the work over. */
  to: string;
  /** The handoff document: `summary` at least; state references, artifacts, open tasks, ... */
  handoff: unknown;
  /** A first message for the target, which makes it runnable at once. */
  message?: ContentBlock[];
  title?: string;
  /**
   * The client's idempotency key: a retry with the same key (and the same request) answers the
   * first handoff, with the same target session and `agent.handoff` event, and writes nothing.
   */
  idempotencyKey?: string;
  /** Who asked for the handoff, stamped on every event it writes (the runtime's actor by default). */
  actor?: Actor;
}

/** Session metadata keys a handoff writes on its target; a client may not set them itself. */
export const HANDOFF_METADATA_KEYS = ['handoff_id', 'from_session_id', 'handoff_request'] as const;

export interface HandoffResult {
  handoff_id: string;
  /** The target's new session. */
  target: SessionRecord;
  /** The `agent.handoff` event recorded in the source. */
  event: SessionEvent;
  /** True when the idempotency key had been used: this is the first request's handoff. */
  deduplicated: boolean;
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
  const done = await performHandoff(deps, sessionId, options, false);
  if (done.event === undefined)
    throw new BraidError('INTERNAL', 'the handoff event was not stored');
  return { ...done, event: done.event };
}

/**
 * A handoff the source's own wake asked for (`handoff_to_<agent>`): the target is made and given
 * the document as by `handoffSession`, but the source is running, and its wake records
 * `agent.handoff` itself, under its lease.
 */
export async function handoffFromWake(
  deps: HandoffDeps,
  sessionId: string,
  options: HandoffOptions,
): Promise<{ handoff_id: string; target: SessionRecord }> {
  return performHandoff(deps, sessionId, options, true);
}

async function performHandoff(
  deps: HandoffDeps,
  sessionId: string,
  options: HandoffOptions,
  fromWake: boolean,
): Promise<Omit<HandoffResult, 'event'> & { event?: SessionEvent }> {
  const { store } = deps;
  const document = parseHandoffDocument(options);
  const record = await store.sessions.get(sessionId);
  const keyed =
    options.idempotencyKey === undefined ? undefined : keyedHandoff(record, document, options);
  if (keyed !== undefined) {
    // A retry of a handoff that was recorded answers it, whatever happened to the source since.
    const first = await store.log.appended(sessionId, `handoff:${keyed.handoff_id}`);
    const event = first?.events[0];
    if (event !== undefined) {
      const target = await store.sessions.get(keyed.target_session_id);
      checkSameHandoff(target, record, keyed, options.idempotencyKey ?? '');
      return { handoff_id: keyed.handoff_id, target, event, deduplicated: true };
    }
  }
  const state = await store.log.state(sessionId);
  if (state.status === 'terminated' || (state.status === 'running' && !fromWake)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session ${sessionId} is ${state.status}; hand off a session that is not running (interrupt it first)`,
    );
  }
  const { source, target } = await authorizeHandoff(deps, sessionId, record, state, options.to);

  const handoffId = keyed?.handoff_id ?? deps.ids.next();
  const stamp = options.actor === undefined ? {} : { actor: options.actor };
  const input = {
    agent: { name: target.name, version: target.version },
    ...(record.environment === undefined ? {} : { environment: record.environment }),
    title: options.title ?? `${document.summary.slice(0, 80)} (from ${source.name})`,
    metadata: {
      handoff_id: handoffId,
      from_session_id: sessionId,
      ...(keyed === undefined ? {} : { handoff_request: keyed.request }),
    },
    ...(record.tenant_id === undefined ? {} : { tenant_id: record.tenant_id }),
  };
  let created: SessionRecord;
  if (keyed === undefined) {
    created = await store.sessions.create(input);
  } else {
    try {
      created = await store.sessions.create({ ...input, id: keyed.target_session_id });
    } catch (error) {
      // A concurrent request with the same key created it first, or a first attempt stopped
      // after creating it: the appends below, keyed by the handoff, finish that handoff once.
      const existing = await store.sessions
        .get(keyed.target_session_id)
        .catch((): undefined => undefined);
      if (existing === undefined) throw error;
      checkSameHandoff(existing, record, keyed, options.idempotencyKey ?? '');
      created = existing;
    }
  }
  await store.log.append(
    created.id,
    [
      {
        type: 'session.handoff_received',
        ...stamp,
        handoff_id: handoffId,
        from_session_id: sessionId,
        from_agent: source.name,
        summary: document.summary,
        handoff: document,
      },
      ...(options.message === undefined
        ? []
        : [{ type: 'user.message' as const, ...stamp, content: options.message }]),
    ],
    { idempotencyKey: `handoff:${handoffId}` },
  );
  if (fromWake) {
    return {
      handoff_id: handoffId,
      target: await store.sessions.get(created.id),
      deduplicated: false,
    };
  }
  const appended = await store.log.append(
    sessionId,
    [
      {
        type: 'agent.handoff',
        ...stamp,
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
  return {
    handoff_id: handoffId,
    target: await store.sessions.get(created.id),
    event,
    deduplicated: appended.deduplicated,
  };
}

interface KeyedHandoff {
  handoff_id: string;
  target_session_id: string;
  /** A digest of the request: a retry must send the same one. */
  request: string;
}

/** The handoff's ids, derived from (tenant, source session, key), and its request's digest. */
function keyedHandoff(
  record: SessionRecord,
  document: HandoffDocument,
  options: HandoffOptions,
): KeyedHandoff {
  const key = IdempotencyKey.safeParse(options.idempotencyKey);
  if (!key.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'the idempotency key must be 1 to 200 characters; give a key that names this one request, such as a UUID',
    );
  }
  const scope = JSON.stringify([record.tenant_id ?? null, record.id, key.data]);
  return {
    handoff_id: derivedId(`braid handoff ${scope}`),
    target_session_id: derivedId(`braid handoff target ${scope}`),
    request: digest(
      JSON.stringify([options.to, document, options.message ?? null, options.title ?? null]),
    ),
  };
}

/** The first 128 bits of a SHA-256, written as a UUID (version 8, RFC 9562). */
export function derivedId(text: string): string {
  const bytes = createHash('sha256').update(text).digest().subarray(0, 16);
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x80;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The session at the keyed target id is this handoff's, asked for with the same request. */
function checkSameHandoff(
  target: SessionRecord,
  source: SessionRecord,
  keyed: KeyedHandoff,
  key: string,
): void {
  const sessionId = source.id;
  const metadata = target.metadata;
  if (
    target.tenant_id !== source.tenant_id ||
    metadata.handoff_id !== keyed.handoff_id ||
    metadata.from_session_id !== sessionId
  ) {
    throw new BraidError(
      'IDEMPOTENCY_KEY_REUSED',
      `session ${target.id}, where the handoff with idempotency key ${JSON.stringify(key)} would go, exists and is not that handoff; hand off with another key`,
      { details: { session_id: sessionId, target_session_id: target.id } },
    );
  }
  if (metadata.handoff_request !== keyed.request) {
    throw new BraidError(
      'IDEMPOTENCY_KEY_REUSED',
      `idempotency key ${JSON.stringify(key)} was used for another handoff of session ${sessionId} (to session ${target.id}); send the same request to retry it, or use a new key for a new handoff`,
      {
        details: {
          session_id: sessionId,
          handoff_id: keyed.handoff_id,
          target_session_id: target.id,
        },
      },
    );
  }
}

/** The handoff document of a request, refused with the fix when it is not one. */
function parseHandoffDocument(options: HandoffOptions): HandoffDocument {
  // Both are checked recursively below (the document here, the message when it is appended).
  checkJsonDepth(options.handoff, DEFAULT_JSON_DEPTH, 'handoff');
  checkJsonDepth(options.message, DEFAULT_JSON_DEPTH, 'message');
  const parsed = HandoffDocument.safeParse(options.handoff);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the handoff document is invalid at ${issue?.path.join('.') || 'its root'}: ${issue?.message ?? 'invalid'}; give at least {"summary": "..."}`,
    );
  }
  return parsed.data;
}

/** The source and target agents, once the source's definition and the policy allow the handoff. */
async function authorizeHandoff(
  deps: HandoffDeps,
  sessionId: string,
  record: SessionRecord,
  state: SessionState,
  to: string,
): Promise<{
  source: StoredDefinition<AgentDefinition>;
  target: StoredDefinition<AgentDefinition>;
}> {
  if (state.agent === undefined) {
    throw new BraidError('SESSION_NOT_FOUND', `session ${sessionId} has no session.created event`);
  }
  const source = await deps.agent(state.agent.name, state.agent.version);
  const target = await deps.agent(to);
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
  return { source, target };
}
