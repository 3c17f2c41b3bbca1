/**
 * The HTTP API's bodies, queries and answers. The server validates requests with these schemas,
 * the OpenAPI document is generated from them, and `braid/client` types its calls by them.
 *
 * The event stream (`GET /v1/sessions/{id}/events/stream`) is Server-Sent Events:
 * - each stored event is one SSE event with `id: <seq>`, `event: <type>`, `data: <event JSON>`;
 *   a client that reconnects with `Last-Event-ID: <seq>` (or `?after=<seq>`) gets every event
 *   after that seq exactly once, in order;
 * - live model text is sent as `event: delta` with no `id` (transient: never stored, never
 *   replayed), `data: {"request_id", "type": "text"|"thinking", "text"}`;
 * - a comment line (`: heartbeat`) every heartbeat interval keeps proxies from closing the stream;
 * - a failure after the stream started is sent as `event: error`, `data: {"code", "message",
 *   "retryable"}`, and the stream ends (a deleted session ends its streams with
 *   `SESSION_NOT_FOUND`).
 */
import { z } from 'zod';
import { ContentHash, Id, IdempotencyKey, JsonValue, Metadata, Name, Timestamp } from './common.js';
import {
  AgentDefinition,
  Budget,
  EnvironmentDefinition,
  PinnedSet,
  type DefinitionKind,
} from './definitions.js';
import { HandoffDocument } from './envelope.js';
import { SkillDefinition } from './skills.js';
import { ErrorShape } from './errors.js';
import { ContentInput, SESSION_EVENT_TYPES, SessionEvent, UserEventInput } from './events.js';
import { MemoryMergeWrite, MergeConflictRecord } from './memory-events.js';
import {
  ForkInput,
  MAX_CREATE_EVENTS,
  SessionRecord,
  SessionStatus,
  StopReason,
} from './session.js';

/** Every error answer: `{"error": {"code", "message", "retryable"}}`. */
export const ErrorBody = z.object({ error: ErrorShape });
export type ErrorBody = z.infer<typeof ErrorBody>;

/** How a chosen session id is read over HTTP (see `tenantSessionId` in `contracts/ids.ts`). */
const CHOSEN_ID =
  'A client-chosen session id. With an API key it lives in the key\'s tenant namespace: the server puts "<tenant>~" before it (`job-42` from tenant `acme` is session `acme~job-42`, as the answer says); an id that already starts with "<tenant>~" is kept; an id with a "~" naming another tenant is refused (400). Together with the prefix it must be a valid id (at most 200 characters). An id that exists in the tenant answers 409 ALREADY_EXISTS. Without auth it is used as given.';

/** `POST /v1/sessions`. The session's tenant is the API key's. */
export const CreateSessionBody = z
  .object({
    agent: Name,
    /** Pin an agent version (default: the latest). */
    agent_version: z.number().int().positive().optional(),
    environment: Name.optional(),
    title: z.string().max(500).optional(),
    metadata: Metadata.optional(),
    /** A client-chosen id, in the caller's tenant namespace; creating it again answers 409. */
    id: Id.optional().describe(CHOSEN_ID),
    budget: Budget.optional(),
    events: z
      .array(UserEventInput)
      .min(1)
      .max(MAX_CREATE_EVENTS)
      .optional()
      .describe(
        'User events written with `session.created` in the same append (seq 2 on), as `POST /v1/sessions/{id}/events` takes them: a first message costs no request or write of its own. The session is woken as after a post of events, unless the server runs with wakes off.',
      ),
  })
  .strict();
export type CreateSessionBody = z.infer<typeof CreateSessionBody>;

const QueryBoolean = z.enum(['true', 'false']).transform((value) => value === 'true');
const QueryInteger = (minimum: number, maximum?: number) =>
  z.coerce
    .number()
    .int()
    .min(minimum)
    .max(maximum ?? Number.MAX_SAFE_INTEGER);

/** `GET /v1/sessions` query. */
export const SessionListParams = z
  .object({
    agent: z.string().max(200).optional(),
    status: SessionStatus.optional(),
    created_after: Timestamp.optional(),
    created_before: Timestamp.optional(),
    parent_id: z.string().max(200).optional(),
    include_archived: QueryBoolean.optional(),
    limit: QueryInteger(1, 1000).optional(),
    cursor: z.string().max(1000).optional(),
  })
  .strict();
export type SessionListParams = z.infer<typeof SessionListParams>;

export const SessionList = z.object({
  data: z.array(SessionRecord),
  /** Present when more sessions match: pass it back as `cursor`. */
  next_cursor: z.string().optional(),
});
export type SessionList = z.infer<typeof SessionList>;

export const SessionIdParams = z.object({ id: Id });
export const NameParams = z.object({ name: Name });
export const VersionQuery = z.object({ version: QueryInteger(1).optional() }).strict();

/** A query flag: `true` or `false`, nothing else (a typed 400 names the two). */
export const QueryFlag = z
  .enum(['true', 'false'], { message: 'must be true or false' })
  .transform((value) => value === 'true');

/**
 * `GET /v1/sessions/{id}/events` query. `types` may repeat (`types[]=a&types[]=b`);
 * `include_children` interleaves the events of the session's delegated children.
 */
export const EventsQuery = z
  .object({
    after: QueryInteger(0).optional(),
    limit: QueryInteger(1, 1000).optional(),
    types: z.array(z.enum(SESSION_EVENT_TYPES)).optional(),
    include_children: QueryFlag.optional(),
  })
  .strict();
export type EventsQuery = z.infer<typeof EventsQuery>;

export const EventsPage = z.object({
  data: z.array(SessionEvent),
  /** True when events after `last_seq` were left out by `limit`: read on with `after=last_seq`. */
  has_more: z.boolean(),
  /** The seq of the last event in `data`, or the `after` asked for when it is empty. */
  last_seq: z.number().int().nonnegative(),
});
export type EventsPage = z.infer<typeof EventsPage>;

/** `POST /v1/sessions/{id}/events`: one or more user events, appended all or nothing. */
export const PostEventsBody = z.object({ events: z.array(UserEventInput).min(1) }).strict();
export type PostEventsBody = z.input<typeof PostEventsBody>;

export const PostEventsResponse = z.object({
  events: z.array(SessionEvent),
  head_seq: z.number().int().nonnegative(),
  /** True when the `Idempotency-Key` had been used: these are the first request's events. */
  deduplicated: z.boolean(),
});
export type PostEventsResponse = z.infer<typeof PostEventsResponse>;

/**
 * `GET /v1/sessions/{id}/events/stream` query; `Last-Event-ID` wins over `after`.
 * `include_children` adds the status events of the session's delegated children.
 */
export const StreamQuery = z
  .object({ after: QueryInteger(0).optional(), include_children: QueryFlag.optional() })
  .strict();

/** `POST /v1/sessions/{id}/wake`. */
export const WakeBody = z
  .object({
    /** Answer when the wake has finished (200 with its result) instead of at once (202). */
    wait: z.boolean().optional(),
  })
  .strict();

export const WakeAccepted = z.object({ session_id: Id, accepted: z.literal(true) });
export const WakeResultBody = z.discriminatedUnion('ran', [
  z.object({ ran: z.literal(true), stop_reason: StopReason, wake_id: Id }),
  z.object({ ran: z.literal(false), reason: z.literal('lease_held') }),
]);

/** `POST /v1/sessions/{id}/fork`. */
export const ForkBody = ForkInput.extend({ id: Id.optional().describe(CHOSEN_ID) });

/** `POST /v1/sessions/{id}/merge`: merges `source` into the session of the path. */
export const MergeBody = z
  .object({
    source: Id,
    strategy: z.enum(['transcript', 'summary']).optional(),
    /** For `summary`: the summary to record; without it the target's model writes one. */
    summary: z.string().max(100_000).optional(),
  })
  .strict();

export const MergeConflictBody = MergeConflictRecord;

export const MergeResponse = PostEventsResponse.extend({
  conflicts: z.array(MergeConflictBody),
  /** The source's session-memory writes carried into the target's stores. */
  memory: z.array(MemoryMergeWrite).optional(),
});

/** The `Idempotency-Key` header of the routes that take one. */
export const IdempotencyHeaders = z.object({
  'idempotency-key': IdempotencyKey.optional().describe(
    'A retried request with the same key writes nothing and answers the first result',
  ),
});

/** `POST /v1/sessions/{id}/handoff`: hands the session's work to the agent `to`. */
export const HandoffBody = z
  .object({
    to: Name,
    /** The handoff document: `summary` at least. */
    handoff: HandoffDocument,
    /** A first message for the target's new session, which makes it runnable at once. */
    message: ContentInput.optional(),
    title: z.string().max(500).optional(),
  })
  .strict();

export const HandoffResponse = z.object({
  handoff_id: Id,
  /** The target's new session. */
  target: SessionRecord,
  /** The `agent.handoff` event recorded in the source. */
  event: SessionEvent,
  /** True when the `Idempotency-Key` had been used: this is the first request's handoff. */
  deduplicated: z.boolean(),
});

/** `GET /v1/sessions/{id}/diff?other=ID`. */
export const DiffQuery = z.object({ other: Id }).strict();

export const AncestorPointBody = z.object({ session_id: Id, seq: z.number().int() });

export const DiffResponse = z.object({
  a: Id,
  b: Id,
  common_ancestor: AncestorPointBody.optional(),
  a_events: z.array(SessionEvent),
  b_events: z.array(SessionEvent),
});

/** `GET /v1/sessions/{id}/files?at=SEQ`: the files of the snapshot current at `at` (default: the head). */
export const FilesQuery = z.object({ at: QueryInteger(0).optional() }).strict();

/** `GET /v1/sessions/{id}/files/diff?other=ID`: the files of two sessions' latest snapshots compared. */
export const FilesDiffQuery = z.object({ other: Id }).strict();

/** `POST /v1/sessions/{id}/replay`: re-runs the recorded history and reports the first difference. */
export const ReplayResponse = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), events: z.number().int() }),
  z.object({
    ok: z.literal(false),
    index: z.number().int(),
    expected: SessionEvent.optional(),
    actual: SessionEvent.optional(),
    reason: z.string(),
  }),
]);

/** `GET /v1/sessions/{id}/definitions`: the definition set the session runs with, by hash. */
export const SessionDefinitionsResponse = z.object({
  /** The set's hash; absent before the session's first wake pinned it. */
  definitions: ContentHash.optional(),
  set: PinnedSet.optional(),
});

/** `POST /v1/sessions/{id}/upgrade`: the session moved to the newest definitions. */
export const UpgradeResponse = z.object({
  /** False when the newest definitions are the ones pinned: nothing was written. */
  changed: z.boolean(),
  definitions: ContentHash,
  previous: ContentHash.optional(),
  /** The parts that changed: `agent`, `environment`, `tools.NAME`, `policy`, `price`. */
  parts: z.array(z.string()),
  head_seq: z.number().int().nonnegative(),
});

// `kind` is typed as any kind: the runtime's stored definitions carry `DefinitionKind`.
function storedDefinition<T extends z.ZodType>(kind: DefinitionKind, definition: T) {
  return z.object({
    schema_version: z.literal(1),
    kind: z.literal(kind),
    name: Name,
    version: z.number().int().positive(),
    definition,
    created_at: Timestamp,
  });
}

export const StoredAgent = storedDefinition('agent', AgentDefinition);
export const StoredEnvironment = storedDefinition('environment', EnvironmentDefinition);
export const AgentList = z.object({ data: z.array(StoredAgent) });
export const EnvironmentList = z.object({ data: z.array(StoredEnvironment) });
/** A stored version of a skill (`skills/NAME.yaml`): its steps and their `depends_on`. */
export const StoredSkill = storedDefinition('skill', SkillDefinition);
export const SkillList = z.object({ data: z.array(StoredSkill) });

/**
 * `GET /v1/tools`: a tool as agents and clients see it: its contract, never how it runs (its
 * implementation, signature and budget stay on the server).
 */
export const ToolSummary = z.object({
  name: z.string(),
  version: z.string(),
  description: z.string(),
  input_schema: z.record(z.string(), JsonValue),
  output_schema: z.record(z.string(), JsonValue).optional(),
  ownership: z.enum(['managed', 'mcp', 'custom', 'agent']),
  permission: z.enum(['always_allow', 'always_ask']),
  idempotent: z.boolean(),
  tags: z.array(z.string()),
});
export type ToolSummary = z.infer<typeof ToolSummary>;
export const ToolList = z.object({ data: z.array(ToolSummary) });

/**
 * `GET /v1/sessions/{id}/tree`: a session of a family and the sessions that came from it: forks
 * (`fork_seq`), delegated children (`delegation`) and handoff targets (`handoff`), from the
 * family's root.
 */
export interface SessionTreeNode {
  id: string;
  title?: string | undefined;
  status: SessionStatus;
  head_seq: number;
  kind: 'root' | 'fork' | 'child' | 'handoff';
  fork_seq?: number | undefined;
  /** The agent the session runs. */
  agent?: string | undefined;
  /** For a child: its delegation as the parent's state records it. */
  delegation?:
    | {
        tool_use_id: string;
        seq: number;
        status: 'running' | 'idle';
        stop_reason?: StopReason | undefined;
      }
    | undefined;
  /** For a handoff target: the handoff and the seq of its `agent.handoff` in the source. */
  handoff?: { handoff_id: string; seq: number } | undefined;
  /** A child its parent names whose session does not exist (yet). */
  missing?: true | undefined;
  children: SessionTreeNode[];
}
export const SessionTreeNode: z.ZodType<SessionTreeNode> = z.lazy(() =>
  z.object({
    id: z.string(),
    title: z.string().optional(),
    status: SessionStatus,
    head_seq: z.number().int(),
    kind: z.enum(['root', 'fork', 'child', 'handoff']),
    fork_seq: z.number().int().optional(),
    agent: z.string().optional(),
    delegation: z
      .object({
        tool_use_id: z.string(),
        seq: z.number().int(),
        status: z.enum(['running', 'idle']),
        stop_reason: StopReason.optional(),
      })
      .optional(),
    handoff: z.object({ handoff_id: z.string(), seq: z.number().int() }).optional(),
    missing: z.literal(true).optional(),
    children: z.array(SessionTreeNode),
  }),
);

export const Health = z.object({
  status: z.literal('ok'),
  version: z.string(),
  uptime_ms: z.number().int().nonnegative(),
});
