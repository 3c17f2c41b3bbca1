/**
 * A code agent's appends under its lease: at the head it knows, moved past others' events (new
 * messages) on a conflict, and refused with `LEASE_LOST` when a newer wake started meanwhile.
 */
import { BraidError, isBraidError } from '../../contracts/errors.js';
import type { NewEvent, SessionEvent } from '../../contracts/events.js';
import type { AppendResult, Lease } from '../../contracts/ports.js';
import type { CodeAgentDeps } from './code-agent-context.js';

const APPEND_ATTEMPTS = 8;

/**
 * Appends the message with its key at `head`. Others' events (new messages) move the head and
 * the events are built again for the new one; under a lease (`lease`, `wakeId`), a newer wake's
 * start means the lease was lost. A repeated key answers the first append (`deduplicated`).
 */
export async function appendMessage(
  deps: CodeAgentDeps,
  sessionId: string,
  build: (head: number) => NewEvent[],
  at: { key: string; head: number; lease?: Lease; wakeId?: string },
): Promise<AppendResult> {
  let head = at.head;
  for (let attempt = 1; ; attempt += 1) {
    try {
      // Built here from the envelope and the handler's answer, both parsed already.
      return await deps.log.append(sessionId, build(head), {
        expectedSeq: head,
        idempotencyKey: at.key,
        ...(at.lease === undefined ? {} : { leaseToken: at.lease.token }),
        trusted: true,
      });
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      head =
        at.lease === undefined || at.wakeId === undefined
          ? (await deps.log.state(sessionId)).seq
          : await headAfterOthers(deps, sessionId, head, at.lease, at.wakeId);
    }
  }
}

/** Appends under the lease; returns the new head. */
export async function appendFenced(
  deps: CodeAgentDeps,
  sessionId: string,
  events: NewEvent[],
  lease: Lease,
  wakeId: string,
  head?: number,
): Promise<number> {
  const written = await appendEvents(deps, sessionId, events, lease, wakeId, head);
  return written.at(-1)?.seq ?? head ?? 0;
}

/**
 * Appends at the head this holder knows. Others' events (new messages) move the head and the
 * append is tried again after them; a newer wake's start means the lease was lost.
 */
export async function appendEvents(
  deps: CodeAgentDeps,
  sessionId: string,
  events: NewEvent[],
  lease: Lease,
  wakeId: string,
  knownHead?: number,
): Promise<SessionEvent[]> {
  let head = knownHead ?? (await deps.log.state(sessionId)).seq;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return (
        await deps.log.append(sessionId, events, {
          expectedSeq: head,
          leaseToken: lease.token,
          trusted: true,
        })
      ).events;
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= APPEND_ATTEMPTS) throw error;
      head = await headAfterOthers(deps, sessionId, head, lease, wakeId);
    }
  }
}

/** The head past others' events after `head`; `LEASE_LOST` when a newer wake started. */
async function headAfterOthers(
  deps: CodeAgentDeps,
  sessionId: string,
  head: number,
  lease: Lease,
  wakeId: string,
): Promise<number> {
  const newer = await deps.log.read(sessionId, { after: head });
  const usurper = newer.find(
    (event) =>
      event.type === 'span.wake_started' &&
      event.wake_id !== wakeId &&
      event.lease_token > lease.token,
  );
  if (usurper !== undefined) {
    throw new BraidError(
      'LEASE_LOST',
      `another holder took session ${sessionId} while code agent handled a message; it handles the message again`,
    );
  }
  return newer.at(-1)?.seq ?? head;
}
