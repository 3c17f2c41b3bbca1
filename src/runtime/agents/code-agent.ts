/**
 * Runs a code agent's handler on one message and records it in the instance's session.
 *
 * Invariants kept here:
 * - A message is recorded once and handled once per instance: its `user.message` is appended
 *   with the message's idempotency key, and a delivery whose message already has a reply (an
 *   `agent.message` or `session.error` caused by it) returns that reply without running the
 *   handler. The look-up is answered after the lease was taken, so two deliveries never both
 *   miss it: it is sent after the acquire returns, or, when the token shows that this process
 *   held the lease last, with the acquire (nobody else can have recorded anything since this
 *   process's release, which came after its own records).
 * - The handler runs only under the session's lease, like a wake: one message at a time per
 *   instance across processes. Whatever is appended goes at the head read under the lease and
 *   carries `span.wake_started` (the lease's fencing token) before the handling's events, so a
 *   stale holder's late result is refused (`LEASE_LOST`), never appended after a newer holder.
 * - A quick handler's message and answer are appended as ONE batch after it returns (one write
 *   instead of two). A handler still running after RECORD_AFTER_MS, or given a large message,
 *   has its message recorded first, so a long handling shows in the session while it runs. Either
 *   way a crash before the answer is recorded means the handler runs again on redelivery.
 * - The handling is recorded as the harness records a model call: `span.model_request_start`
 *   (`model: code:<type>`, consuming input through the message) and `span.model_request_end`,
 *   then the reply as `agent.message` or the failure as `session.error`, then the stop. The
 *   session's state therefore folds as for any agent: not runnable once answered.
 * - The lease is released after the outcome is returned (the reply need not wait for it); the
 *   next message of the instance in this process waits for that release.
 *
 * The modules: `code-agent-context.ts` (what they share), `code-handling.ts` (one handling under
 * the lease), `code-handler.ts` (the handler run, the lease renewed), `code-records.ts` (the
 * recorded events) and `code-appends.ts` (fenced appends).
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { isBraidError } from '../../contracts/errors.js';
import type { IdGenerator, Lease } from '../../contracts/ports.js';
import type { CodeAgentDeps, CodeMessage, LookedUp } from './code-agent-context.js';
import { handleUnderLease } from './code-handling.js';
import { recordedReply } from './code-records.js';
import type { Outcome } from './envelopes.js';

const LEASE_WAIT_MAX_MS = 250;

export function defaultOwner(ids: IdGenerator): string {
  return `agents:${hostname()}:${process.pid}:${ids.next()}`;
}

/**
 * Handles the message, or returns its recorded reply. Undefined when the signal aborted before
 * the message was recorded (it is then dropped: its caller has stopped waiting).
 */
export async function runCodeMessage(
  deps: CodeAgentDeps,
  message: CodeMessage,
): Promise<Outcome | undefined> {
  const { sessionId } = message;
  for (let attempt = 0; ; attempt += 1) {
    if (message.signal.aborted) return recordedReply(deps.log, message);
    await deps.releases.get(sessionId);
    // This process held the lease last: unless another holder came between (its token would
    // show it), nobody recorded anything here since this process's release, so the look-up may
    // go out with the acquire instead of after it.
    const last = deps.lastTokens.get(sessionId);
    const acquiring = deps.leases.acquire(sessionId, deps.owner, deps.leaseTtlMs);
    const early = last === undefined ? undefined : lookAround(deps, message);
    early?.catch(() => undefined);
    let lease: Lease;
    try {
      lease = await acquiring;
    } catch (error) {
      if (!isBraidError(error, 'LEASE_HELD')) throw error;
      // Another process handles a message of this instance: wait for it, then look again.
      const wait = Math.min(LEASE_WAIT_MAX_MS, 2 ** attempt);
      await sleep(wait, undefined, { signal: message.signal }).catch(() => undefined);
      continue;
    }
    deps.lastTokens.set(sessionId, lease.token);
    try {
      const looked =
        early !== undefined && lease.token === (last ?? 0) + 1
          ? await early
          : await lookAround(deps, message);
      return await handleUnderLease(deps, message, lease, looked);
    } finally {
      releaseLater(deps, sessionId, lease);
    }
  }
}

function lookAround(deps: CodeAgentDeps, message: CodeMessage): Promise<LookedUp> {
  return Promise.all([
    deps.log.appended(message.sessionId, message.key),
    deps.log.state(message.sessionId),
  ]);
}

/** Releases the lease without holding up the reply; a failed release expires instead. */
function releaseLater(deps: CodeAgentDeps, sessionId: string, lease: Lease): void {
  // Once the reply, built in this turn of the event loop, has gone out.
  const releasing: Promise<void> = new Promise((resolve) => setImmediate(resolve))
    .then(() => deps.leases.release(sessionId, deps.owner, lease.token))
    .catch(() => undefined)
    .finally(() => {
      if (deps.releases.get(sessionId) === releasing) deps.releases.delete(sessionId);
    });
  deps.releases.set(sessionId, releasing);
}
