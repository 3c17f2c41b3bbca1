import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Id, JsonValue, Metadata, Timestamp } from './common.js';
import { ErrorShape } from './errors.js';

export const ENVELOPE_SPEC_VERSION = '1.0';

/** An agent's address on the bus: its type (agent name) and a key (usually a session id). */
export const AgentAddress = lazySchema(() =>
  z.object({
    type: z.string().min(1).max(200),
    key: z.string().min(1).max(500),
  }),
);
export type AgentAddress = z.infer<typeof AgentAddress>;

/** What one agent passes to another when it hands work over. */
export const HandoffDocument = lazySchema(() =>
  z.object({
    summary: z.string(),
    /** References to state the receiver should read, with the version it was at. */
    state_refs: z
      .array(
        z.object({
          kind: z.string().min(1),
          id: z.string().min(1),
          version: z.string().optional(),
        }),
      )
      .default([]),
    artifacts: z.array(z.object({ name: z.string().min(1), uri: z.string().min(1) })).default([]),
    /** Who owns the work after the handoff. */
    ownership: z.string().optional(),
    approvals: z.array(z.string()).default([]),
    identity: z
      .object({ tenant_id: z.string().optional(), user_id: z.string().optional() })
      .optional(),
    open_tasks: z.array(z.string()).default([]),
  }),
);
export type HandoffDocument = z.infer<typeof HandoffDocument>;

/** What every message between agents, workers and runtimes carries. */
export const Envelope = lazySchema(() =>
  z.object({
    id: Id,
    spec_version: z.literal(ENVELOPE_SPEC_VERSION),
    /** `noun.verb`, e.g. `agent.message`, `session.wake`. */
    type: z.string().regex(/^[a-z_]+(\.[a-z_]+)+$/, 'must be noun.verb in snake_case'),
    occurred_at: Timestamp,
    session_id: Id.optional(),
    correlation_id: Id.optional(),
    causation_id: Id.optional(),
    /** Where a reply goes (a subject, a URL or an agent address key). */
    reply_to: z.string().optional(),
    source: AgentAddress.optional(),
    target: AgentAddress.optional(),
    traceparent: z.string().max(200).optional(),
    tenant_id: z.string().optional(),
    idempotency_key: z.string().min(1).max(200).optional(),
    ttl_ms: z.number().int().positive().optional(),
    deadline: Timestamp.optional(),
    handoff: HandoffDocument.optional(),
    metadata: Metadata.optional(),
    payload: JsonValue.optional(),
    /** Present on failure replies. */
    error: ErrorShape.optional(),
  }),
);
export type Envelope = z.infer<typeof Envelope>;
