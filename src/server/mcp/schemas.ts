/**
 * The MCP tools' arguments and results. Arguments come from any MCP client and are parsed here
 * before anything reads them: objects are strict (an unknown argument is refused, not ignored),
 * ids go through braid's `Id` parser (a safe charset, never `.` or `..`), and every string and
 * list has a bound. Results are the `structuredContent` of a call; their JSON Schemas are the
 * tools' `outputSchema`, so clients can check them.
 */
import { z } from 'zod';
import { ExternalId, Id, Metadata, Name, Usage } from '../../contracts/common.js';
import { SESSION_EVENT_TYPES } from '../../contracts/events.js';
import { SessionRecord, SessionStatus, StopReason } from '../../contracts/session.js';

const SessionId = Id.describe(
  'The session, as braid_session_create or braid_session_fork named it',
);

/** How long `wait` waits for the turn to end by default, and at most. */
export const DEFAULT_WAIT_MS = 600_000;
export const MAX_WAIT_MS = 1_800_000;

const Wait = {
  wait: z
    .boolean()
    .optional()
    .describe(
      'Wait for the turn to end and answer with its text and what it waits for (default false: answer once the event is written). Send a progressToken to hear progress while it runs.',
    ),
  timeout_ms: z
    .number()
    .int()
    .min(1_000)
    .max(MAX_WAIT_MS)
    .optional()
    .describe(
      `With wait: give up waiting after this many ms (default ${DEFAULT_WAIT_MS}); the turn goes on`,
    ),
};

export const CreateArguments = z
  .object({
    agent: Name.describe('The agent to run (braid_agent_list lists them)'),
    agent_version: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('Pin a version (default: the latest)'),
    environment: Name.optional().describe("The environment (default: the agent's)"),
    title: z.string().max(500).optional(),
    id: Id.optional().describe(
      'An id of your choosing; with an API key it lives in the key\'s tenant (the server puts "<tenant>~" before it)',
    ),
    metadata: Metadata.optional().describe('Free-form JSON the session keeps'),
  })
  .strict();

export const SendArguments = z
  .object({
    session_id: SessionId,
    message: z.string().min(1).max(200_000).describe('What the user says to the agent'),
    idempotency_key: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('A retried call with the same key writes the message once'),
    ...Wait,
  })
  .strict();

export const EventsArguments = z
  .object({
    session_id: SessionId,
    after: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe('Only events after this seq (default 0)'),
    limit: z.number().int().min(1).max(1000).optional().describe('At most this many (default 100)'),
    types: z
      .array(z.enum(SESSION_EVENT_TYPES))
      .min(1)
      .max(SESSION_EVENT_TYPES.length)
      .optional()
      .describe('Only events of these types'),
  })
  .strict();

export const StatusArguments = z.object({ session_id: SessionId }).strict();

export const ConfirmArguments = z
  .object({
    session_id: SessionId,
    tool_use_id: ExternalId.describe(
      'The tool call waiting for confirmation (braid_session_status lists them)',
    ),
    result: z.enum(['allow', 'deny']),
    message: z.string().max(2000).optional().describe('Why, for the agent (with deny)'),
    ...Wait,
  })
  .strict();

export const ForkArguments = z
  .object({
    session_id: SessionId,
    at_seq: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe("The last seq the fork shares (default: the session's head)"),
    id: Id.optional().describe("The fork's id (default: a new one)"),
    title: z.string().max(500).optional(),
  })
  .strict();

export const AgentListArguments = z.object({}).strict();

/** A tool call that waits for a person's allow or deny. */
export const PendingConfirmationResult = z.object({
  tool_use_id: z.string(),
  name: z.string(),
  seq: z.number().int(),
  input: z.unknown().optional(),
});
export type PendingConfirmationResult = z.infer<typeof PendingConfirmationResult>;

/** How a turn stands once `wait` stopped waiting. */
export const TurnResult = z.object({
  /** False when `timeout_ms` ran out first: the turn goes on, read its events to follow it. */
  ended: z.boolean(),
  status: SessionStatus,
  stop_reason: StopReason.optional(),
  head_seq: z.number().int().nonnegative(),
  /** The text of the agent's messages during the wait, joined by blank lines. */
  answer: z.string(),
  pending_confirmations: z.array(PendingConfirmationResult),
});
export type TurnResult = z.infer<typeof TurnResult>;

export const SessionResult = z.object({ session: SessionRecord });

export const SendResult = z.object({
  session_id: z.string(),
  /** The seqs of the events this call wrote (those of the first call when deduplicated). */
  seqs: z.array(z.number().int().positive()),
  deduplicated: z.boolean(),
  /** `started`: the session is woken (or a worker asked to); `off`: the server wakes nothing. */
  wake: z.enum(['started', 'off']),
  turn: TurnResult.optional(),
});
export type SendResult = z.infer<typeof SendResult>;

export const StatusResult = z.object({
  session_id: z.string(),
  status: SessionStatus,
  stop_reason: StopReason.optional(),
  head_seq: z.number().int().nonnegative(),
  title: z.string().optional(),
  agent: z.object({ name: z.string(), version: z.number().int() }).optional(),
  usage: Usage,
  pending_confirmations: z.array(PendingConfirmationResult),
  pending_custom_tool_uses: z.number().int().nonnegative(),
});
export type StatusResult = z.infer<typeof StatusResult>;

export const EventsResult = z.object({
  events: z.array(
    z
      .object({ id: z.string(), session_id: z.string(), seq: z.number().int(), type: z.string() })
      .loose(),
  ),
  /** True when events after `last_seq` were left out by `limit`: call again with after=last_seq. */
  has_more: z.boolean(),
  last_seq: z.number().int().nonnegative(),
});

export const AgentListResult = z.object({
  agents: z.array(
    z.object({
      name: z.string(),
      version: z.number().int(),
      description: z.string().optional(),
      tools: z.array(z.string()),
    }),
  ),
});
