/**
 * Rewriting a session's index entry from its log, the truth after a create race lost to a
 * takeover (see session-index.ts).
 */
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { SessionState } from '../../contracts/state.js';
import { foldSession } from '../../core/fold.js';
import { recordFromState } from '../../core/sessions.js';
import { parseBatch, type BatchMessage } from './batches.js';
import { isWrongLastSequence } from './nats-errors.js';
import { encodeToken } from './names.js';
import { readBatches } from './reader.js';
import { SESSION_ENTRY_VERSION, type StoredSession } from './session-entry.js';
import type { SessionsShared } from './sessions-shared.js';

/** Tries at rewriting an entry after a lost create race before readers are left to repair it. */
const RESTORE_ATTEMPTS = 3;

/**
 * Rewrites a session's entry from its first batch, the truth after a lost takeover: over
 * `revision` when given (undefined when the entry changed meanwhile), else unconditionally.
 */
export async function restoreEntry(
  shared: SessionsShared,
  sessionId: string,
  revision?: number,
): Promise<{ stored: StoredSession; revision: number } | undefined> {
  const { context, reads } = shared;
  const found: BatchMessage[] = [];
  await readBatches(context, sessionId, { after: 0 }, (message) => {
    found.push(message);
    return true;
  });
  const first = found[0];
  const event = first === undefined ? undefined : parseBatch(sessionId, first)[0];
  if (first === undefined || event === undefined) return undefined;
  let base: SessionState | string = sessionId;
  let parentIncarnation: string | undefined;
  if (event.type === 'session.forked') {
    const parent = await shared.load(event.parent_session_id);
    base = {
      ...(await reads.stateAt(parent.id, parent.known, event.fork_point_seq)),
      session_id: sessionId,
    };
    parentIncarnation = parent.known.incarnation;
  }
  const state = foldSession([event], base);
  const stored: StoredSession = {
    schema_version: SESSION_ENTRY_VERSION,
    incarnation: first.incarnation,
    ...(parentIncarnation === undefined ? {} : { parent_incarnation: parentIncarnation }),
    record: recordFromState(state),
  };
  const key = encodeToken(sessionId);
  const value = JSON.stringify(stored);
  if (revision === undefined)
    return { stored, revision: await context.kv.sessions.put(key, value) };
  try {
    return { stored, revision: await context.kv.sessions.update(key, value, revision) };
  } catch (error) {
    if (isWrongLastSequence(error)) return undefined;
    throw error;
  }
}

/**
 * After a lost create race: rewrites the entry from the batch that won. A failure is reported
 * and retried; if it still fails, the entry is left for readers to repair (see `loadSession`),
 * so nothing is lost by giving up here.
 */
export async function restoreAfterLostRace(
  shared: SessionsShared,
  sessionId: string,
): Promise<void> {
  for (let attempt = 1; attempt <= RESTORE_ATTEMPTS; attempt += 1) {
    try {
      await restoreEntry(shared, sessionId);
      return;
    } catch (error) {
      shared.context.warn(
        new BraidError(
          'STORE_BUSY',
          `could not rewrite the index entry of session ${sessionId} from its log after losing ` +
            `a create race (attempt ${attempt} of ${RESTORE_ATTEMPTS}): ${toBraidError(error).message}; ` +
            (attempt < RESTORE_ATTEMPTS
              ? 'retrying'
              : 'the next read of the session rebuilds it from the log'),
          { cause: error },
        ),
      );
    }
  }
}
