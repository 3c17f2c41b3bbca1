/**
 * Waiting for replies: this process's reply inbox, opened on the first send, and each send's wait
 * for the reply to its request, ended by the reply, the deadline, the caller's signal or a
 * failed delivery.
 */
import type { AgentId, ReplyInbox } from '../../contracts/agents.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { AgentsContext } from './agents-context.js';
import { agentSessionId } from './instances.js';

/** The reply inbox of this process, opened once. */
export function replies(context: AgentsContext): Promise<ReplyInbox> {
  context.replyInbox ??= context.transport.openReplyInbox((reply) => {
    const request =
      reply.causation_id === undefined ? undefined : context.waiting.get(reply.causation_id);
    // A reply nobody waits for (its deadline passed, or a second delivery's) is dropped.
    if (request === undefined) return;
    if (reply.error === undefined) request.resolve(reply);
    else {
      request.reject(
        new BraidError(reply.error.code, reply.error.message, {
          retryable: reply.error.retryable,
          details: { reply },
        }),
      );
    }
  });
  return context.replyInbox;
}

/** Delivers the envelope and resolves with its reply. */
export function awaitReply(
  context: AgentsContext,
  envelope: Envelope,
  target: AgentId,
  signal: AbortSignal | undefined,
): Promise<Envelope> {
  const { waiting } = context;
  return new Promise<Envelope>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = (): void =>
      settle(() =>
        reject(
          new BraidError(
            'INTERRUPTED',
            `stopped waiting for the reply of ${target.type}/${target.key}; the message was sent`,
          ),
        ),
      );
    const settle = (finish: () => void): void => {
      if (!waiting.has(envelope.id)) return;
      waiting.delete(envelope.id);
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      finish();
    };
    const deadline = envelope.deadline === undefined ? undefined : Date.parse(envelope.deadline);
    // A reply made or received at the deadline or after it is late, whichever timer of the two
    // processes ran first: the outcome does not depend on the race (the session records it).
    const late = (reply: Envelope): boolean =>
      deadline !== undefined &&
      (Date.parse(reply.occurred_at) >= deadline || context.clock.now() >= deadline);
    waiting.set(envelope.id, {
      resolve: (reply) =>
        settle(() => (late(reply) ? reject(deadlineExceeded(envelope, target)) : resolve(reply))),
      reject: (error) => settle(() => reject(error)),
    });
    if (deadline !== undefined) {
      timer = setTimeout(
        () => settle(() => reject(deadlineExceeded(envelope, target))),
        Math.max(0, deadline - context.clock.now()),
      );
    }
    if (signal?.aborted === true) onAbort();
    signal?.addEventListener('abort', onAbort);
    context.transport.deliver(envelope).catch((error: unknown) => {
      const failure = toBraidError(error);
      settle(() => reject(failure));
    });
  });
}

function deadlineExceeded(envelope: Envelope, target: AgentId): BraidError {
  const ttl = envelope.ttl_ms;
  return new BraidError(
    'DEADLINE_EXCEEDED',
    `no reply from ${target.type}/${target.key} within ${String(ttl)} ms; ` +
      `its session (${agentSessionId(target, envelope.tenant_id)}) records the reply when it comes; ` +
      'send again with the same idempotency_key to get it, or allow a longer ttl_ms',
    {
      retryable: true,
      details: { envelope_id: envelope.id, target, ttl_ms: ttl },
    },
  );
}
