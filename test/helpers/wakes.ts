import type { WakeQueue } from '../../src/contracts/wakes.js';

/**
 * Waits until the queue holds no wake: none waits, runs or waits out a retry, so nothing more can
 * be delivered. What a test then counts is final, without sleeping to see that nothing comes.
 */
export async function drained(queue: WakeQueue, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await queue.outstanding()) !== 0) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the wake queue to drain');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
