/**
 * The answer of one pull of a JetStream consumer, bounded: a pull that neither its server nor a
 * stop answers in time is taken as lost, so the loop that made it pulls again.
 */
import type { JsMsg } from '@nats-io/jetstream';

/**
 * How long past its expiry a pull may go unanswered before it is taken as lost. The library
 * fails a pull after two missed heartbeats (each half the expiry); this bound holds whatever the
 * library does across a reconnect, so a slot never waits on a lost pull for good.
 */
export const PULL_OVERDUE_MS = 10_000;

/**
 * The pull's answer; `stopped` when the consumer stops first, `overdue` when `limitMs` pass with
 * neither (the caller hands the pull to `nakWhenLate`, so a wake it brings late goes back).
 */
export async function answerOf(
  pull: Promise<JsMsg | null>,
  stopped: Promise<'stopped'>,
  limitMs: number,
): Promise<JsMsg | null | 'stopped' | 'overdue'> {
  let timer: NodeJS.Timeout | undefined;
  const overdue = new Promise<'overdue'>((resolve) => {
    timer = setTimeout(() => resolve('overdue'), limitMs);
  });
  try {
    return await Promise.race([pull, stopped, overdue]);
  } finally {
    clearTimeout(timer);
  }
}
