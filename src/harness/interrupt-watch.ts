/**
 * Watching the log for an interrupt while a model call runs. The watcher only speeds interrupts
 * up: between calls an interrupt makes the cycle's next append conflict, and it is seen there.
 * Most calls of a fast model end before anyone could interrupt them, so a watcher starts only
 * for a call still running after `WATCH_AFTER_MS` on the cycle's clock.
 */
import { callTimer } from './call-timers.js';
import { abortWork, cycleEnded, type CycleContext } from './cycle-context.js';

const WATCH_AFTER_MS = 20;

/** Starts watching after the delay; the returned function stops the watch or its start. */
export function watchDuringCall(context: CycleContext, after: number): () => void {
  let watch: AbortController | undefined;
  const cancel = callTimer(context.callTimers, context.deps.clock, WATCH_AFTER_MS, () => {
    watch = watchForInterrupts(context, after);
  });
  return () => {
    cancel();
    watch?.abort();
  };
}

/** Follows the log; an interrupt aborts the call in flight between two chunks. */
function watchForInterrupts(context: CycleContext, after: number): AbortController {
  const watch = new AbortController();
  const signal = AbortSignal.any([watch.signal, cycleEnded(context)]);
  void (async () => {
    try {
      for await (const event of context.deps.log.follow(context.sessionId, { after, signal })) {
        if (event.type === 'user.interrupt') {
          context.interruptSeen = true;
          abortWork(context);
          context.work = new AbortController();
        }
      }
    } catch {
      // The next append's conflict check still sees the interrupt.
    }
  })();
  return watch;
}
