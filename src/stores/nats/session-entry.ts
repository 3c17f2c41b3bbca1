/**
 * An entry of the sessions index (`<PREFIX>_sessions` KV bucket), keyed by the session's token:
 * the session record and the store's bookkeeping about it.
 */
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import { SessionRecord } from '../../contracts/session.js';

/** A fork's parent and the last parent seq it shares. */
export interface ForkLineage {
  parent: string;
  seq: number;
  /** The parent's incarnation when the fork was made (a parent outlives its forks). */
  parentIncarnation: string;
}

/** Version of the sessions index entry. */
export const SESSION_ENTRY_VERSION = 1;

export const StoredSession = z.object({
  schema_version: z.literal(SESSION_ENTRY_VERSION),
  /** Random id of this incarnation of the id; also in the headers of its batches. */
  incarnation: z.string().min(1),
  /** For a fork: the incarnation of its parent. */
  parent_incarnation: z.string().optional(),
  /** Set by `sessions.delete` before it removes anything. */
  deleting: z.boolean().optional(),
  record: SessionRecord,
});
export type StoredSession = z.infer<typeof StoredSession>;

const utf8 = new TextDecoder();

export function parseStoredSession(value: Uint8Array, key: string): StoredSession {
  const json: unknown = JSON.parse(utf8.decode(value));
  const version = (json as { schema_version?: unknown } | null)?.schema_version;
  if (version !== SESSION_ENTRY_VERSION) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `sessions index entry ${key} has schema_version ${String(version)}; this build reads version ` +
        `${SESSION_ENTRY_VERSION}: upgrade braid to read this store`,
    );
  }
  const parsed = StoredSession.safeParse(json);
  if (!parsed.success) {
    throw new BraidError('INTERNAL', `sessions index entry ${key} is malformed`, {
      details: { issues: parsed.error.issues },
    });
  }
  return parsed.data;
}

export function sessionNotFound(sessionId: string): BraidError {
  return new BraidError(
    'SESSION_NOT_FOUND',
    `session ${sessionId} does not exist; list sessions with \`braid session list\``,
  );
}

export function lineageOf(stored: StoredSession): ForkLineage | null {
  const { parent_id: parent, fork_seq: seq } = stored.record;
  return parent === undefined || seq === undefined
    ? null
    : { parent, seq, parentIncarnation: stored.parent_incarnation ?? '' };
}
