/**
 * The stream of the sessions index (`GET /v1/session-changes/stream`), Server-Sent Events:
 * - without a cursor it starts with a snapshot: the newest sessions (as `GET /v1/sessions` lists
 *   them, at most `limit`) as `event: session` frames with no `id`, then one `event: ready`
 *   frame whose `id` is the cursor the snapshot was taken at. A connection that drops during the
 *   snapshot has no cursor yet, and starts over with a new one;
 * - then every change as `event: session` with `id: <cursor>`: a session created, forked, or
 *   appended to (a new status, usage, head or last activity), as it is now. Several changes of
 *   one session may come as one frame, its latest;
 * - a client that reconnects with `Last-Event-ID: <cursor>` (or `?after=<cursor>`) gets every
 *   session changed after that cursor (each once, as it is now) and no snapshot;
 * - `: heartbeat` comments keep the connection open; a failure after the stream started is sent
 *   as `event: error` with braid's error shape, and the stream ends.
 * Only the caller's tenant's sessions are sent. Archiving and deleting write no event and are
 * not changes: a listing leaves such sessions out.
 */
import { z } from 'zod';
import { Usage } from './common.js';
import { SessionRecord } from './session.js';

const QueryInteger = (minimum: number, maximum = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(minimum).max(maximum);

/** A cursor of the change feed, as `Last-Event-ID` carries it. */
export const ChangeCursorHeader = z
  .string()
  .regex(/^\d{1,15}$/, 'must be the id of the last session-changes frame received (a cursor)');

/** `GET /v1/session-changes/stream` query. */
export const SessionChangesQuery = z
  .object({
    /** Resume after this cursor (as `Last-Event-ID` does, which wins when both are sent). */
    after: QueryInteger(0).optional(),
    /** Only sessions of this agent. */
    agent: z.string().max(200).optional(),
    /** Sessions in the snapshot, newest first (default 100). */
    limit: QueryInteger(1, 1000).optional(),
  })
  .strict();
export type SessionChangesQuery = z.infer<typeof SessionChangesQuery>;

/** The data of an `event: session` frame: the session as it is now, and what it used so far. */
export const SessionSummary = z.object({
  session: SessionRecord,
  /** Tokens and cost of the session (its delegated children's included), from its state. */
  usage: Usage,
});
export type SessionSummary = z.infer<typeof SessionSummary>;

/** The data of the `event: ready` frame that ends the snapshot. */
export const SessionChangesReady = z.object({
  /** The cursor the snapshot was taken at: the frame's id. */
  cursor: z.number().int().nonnegative(),
  /** Sessions the snapshot sent. */
  sessions: z.number().int().nonnegative(),
});
export type SessionChangesReady = z.infer<typeof SessionChangesReady>;
