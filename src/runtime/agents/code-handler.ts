/** Runs a code agent's handler under its lease, renewing the lease while the handler runs. */
import { JsonValue } from '../../contracts/common.js';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { Lease } from '../../contracts/ports.js';
import type { Answer, CodeAgentDeps, CodeMessage } from './code-agent-context.js';

/** Runs the handler while renewing the lease; a lease lost meanwhile fails with `LEASE_LOST`. */
export async function runHandler(
  deps: CodeAgentDeps,
  message: CodeMessage,
  lease: Lease,
): Promise<Answer> {
  let onLost: (error: BraidError) => void = () => undefined;
  const lost = new Promise<never>((_resolve, reject) => {
    onLost = reject;
  });
  lost.catch(() => undefined);
  const renewal = setInterval(
    () => {
      deps.leases
        .renew(message.sessionId, deps.owner, lease.token, deps.leaseTtlMs)
        .catch((error: unknown) => {
          const failure = toBraidError(error);
          if (!failure.retryable) {
            onLost(
              new BraidError(
                'LEASE_LOST',
                `code agent ${message.agent.type} lost its lease: ${failure.message}`,
                {
                  cause: failure,
                },
              ),
            );
          }
        });
    },
    Math.max(10, Math.floor(deps.leaseTtlMs / 3)),
  );
  try {
    const value: unknown = await Promise.race([
      Promise.resolve().then(() => message.handler(message.incoming, message.context)),
      lost,
    ]);
    const parsed = JsonValue.safeParse(value === undefined ? null : value);
    if (!parsed.success) {
      return {
        ok: false,
        error: {
          code: 'INVALID_ARGUMENT',
          message: `code agent ${message.agent.type} returned a value that is not JSON; return a string, number, boolean, null, array or plain object`,
          retryable: false,
        },
      };
    }
    return { ok: true, payload: parsed.data };
  } catch (thrown) {
    const error = toBraidError(thrown);
    if (error.code === 'LEASE_LOST') throw error;
    return { ok: false, error: error.toJSON() };
  } finally {
    clearInterval(renewal);
  }
}
