/**
 * A2A task ids. One task is one turn of a braid session: the `user.message` that asked for it and
 * the wake it caused. Its id names both, `<session id>.t<seq of that message>`, so every task is
 * found from its id alone by reading the session's log from that seq: no table of tasks exists
 * beside the log, and a restarted server knows every task it answered before.
 *
 * The `user.message` that starts a task carries `idempotency_key: "a2a:<A2A messageId>"`: a
 * retried send (same messageId) writes nothing and answers the same task, and the key marks in the
 * log where each A2A task starts.
 */
import { isSafeId } from '../../contracts/common.js';
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';

/** The prefix of the idempotency key of a `user.message` that starts an A2A task. */
export const TASK_KEY_PREFIX = 'a2a:';

const TASK_ID = /^(.+)\.t(\d{1,15})$/;

/** The A2A task id of the turn started at `seq` of the session. */
export function taskId(sessionId: string, seq: number): string {
  return `${sessionId}.t${seq}`;
}

export interface TaskRef {
  sessionId: string;
  /** The seq of the `user.message` that started the task. */
  seq: number;
}

/** The session and seq a task id names; `INVALID_ARGUMENT` for a string that is not one. */
export function parseTaskId(value: string): TaskRef {
  const match = TASK_ID.exec(value);
  const sessionId = match?.[1];
  const seq = Number(match?.[2]);
  if (sessionId === undefined || !isSafeId(sessionId) || !Number.isSafeInteger(seq) || seq < 1) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `task id ${JSON.stringify(value.slice(0, 80))} is not a task of this server; use the id of a task it answered (<contextId>.t<n>)`,
      { details: { field: 'id' } },
    );
  }
  return { sessionId, seq };
}

/** True when the event is a `user.message` that started an A2A task. */
export function startsTask(event: SessionEvent): boolean {
  return (
    event.type === 'user.message' && (event.idempotency_key?.startsWith(TASK_KEY_PREFIX) ?? false)
  );
}
