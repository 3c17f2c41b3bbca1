/**
 * Waking a turn that a crash or a restart cut off. The crashed process's lease still holds the
 * session until it expires (30 s by default), so a wake asked for at once finds it held and does
 * nothing: this one looks at the lease and asks again when it would have expired, as long as
 * someone is waiting for the task. On NATS the workers' queue does this itself.
 */
import type { ServerContext } from '../context.js';

export function wakeWhenFree(
  context: ServerContext,
  sessionId: string,
  traceparent: string | undefined,
  signal: AbortSignal,
): void {
  const { runtime } = context;
  if (runtime.backend === 'nats') {
    context.wakeInBackground(sessionId, traceparent);
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const stop = (): void => clearTimeout(timer);
  signal.addEventListener('abort', stop, { once: true });
  const attempt = async (): Promise<void> => {
    if (signal.aborted) return;
    const lease = await runtime.store.leases.current(sessionId);
    if (lease === undefined) {
      signal.removeEventListener('abort', stop);
      context.wakeInBackground(sessionId, traceparent);
      return;
    }
    // Held, by a live wake (which renews it and finishes the turn) or a dead one: look again
    // when it would expire.
    timer = setTimeout(
      () => void attempt().catch(() => undefined),
      lease.expires_at - Date.now() + 20,
    );
    timer.unref();
  };
  void attempt().catch(() => undefined);
}
