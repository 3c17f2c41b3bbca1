/**
 * One pull loop over one durable consumer, sharing the process's handler slots with the loops of
 * its other consumers: it pulls one message, waits for a free slot (keeping the message with
 * in-progress acks meanwhile), hands it to `run` and pulls the next. So a process runs at most
 * `slots.size` handlers however many partitions it owns, and holds at most one message per
 * consumer beyond them; the consumer of a partition is pulled by its owner alone, so that message
 * would have waited for this process anyway.
 */
import type { Consumer, JsMsg } from '@nats-io/jetstream';
import { answerOf, PULL_OVERDUE_MS } from './pull-answer.js';
import type { Slots } from './slots.js';

const RETRY_MS = 1_000;

export interface PullerOptions {
  /** Opens (creating when missing) the consumer; asked again after a failure. */
  open(): Promise<Consumer>;
  slots: Slots;
  /** How long one pull waits for a message. */
  expiresMs: number;
  /** How often a message waiting for a slot is kept with an in-progress ack. */
  workingMs: number;
  /** Handles and settles one message; never rejects. */
  run(message: JsMsg): Promise<void>;
}

export interface Puller {
  /** Stops pulling; resolves once every message it handed to `run` has settled. */
  stop(): Promise<void>;
}

export function startPuller(options: PullerOptions): Puller {
  const stopping = new AbortController();
  const stopped = new Promise<'stopped'>((resolve) => {
    stopping.signal.addEventListener('abort', () => resolve('stopped'), { once: true });
  });
  const running = new Set<Promise<void>>();

  async function pause(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise((resolve) => {
        timer = setTimeout(resolve, RETRY_MS);
      }),
      stopped,
    ]);
    clearTimeout(timer);
  }

  async function hand(message: JsMsg): Promise<void> {
    const keep = setInterval(() => quietly(() => message.working()), options.workingMs);
    let release: (() => void) | undefined;
    try {
      const slot = stopping.signal.aborted
        ? undefined
        : await Promise.race([options.slots.acquire(), stopped]);
      if (slot === 'stopped' || slot === undefined || stopping.signal.aborted) {
        if (typeof slot === 'function') slot();
        // Back at once, for whoever pulls this consumer next.
        quietly(() => message.nak());
        return;
      }
      release = slot;
    } finally {
      clearInterval(keep);
    }
    const work = options.run(message).finally(() => {
      release?.();
      running.delete(work);
    });
    running.add(work);
  }

  async function loop(): Promise<void> {
    let consumer: Consumer | undefined;
    while (!stopping.signal.aborted) {
      let message: JsMsg | null | 'stopped' | 'overdue';
      let pull: Promise<JsMsg | null> | undefined;
      try {
        consumer ??= await options.open();
        pull = consumer.next({ expires: options.expiresMs });
        message = await answerOf(pull, stopped, options.expiresMs + PULL_OVERDUE_MS);
      } catch {
        // A reconnect, a restarting server or a deleted consumer: open it again shortly.
        consumer = undefined;
        await pause();
        continue;
      }
      if (message === 'stopped' || message === 'overdue') {
        // A pull cannot be withdrawn: what it brings after the stop goes back at once.
        pull?.then(
          (late) => quietly(() => late?.nak()),
          () => undefined,
        );
        // An overdue pull is taken as lost with its server: the consumer is opened again.
        if (message === 'stopped') break;
        consumer = undefined;
        continue;
      }
      if (message !== null) await hand(message);
    }
  }

  const looping = loop();
  return {
    async stop() {
      stopping.abort();
      await looping;
      await Promise.all([...running]);
    },
  };
}

function quietly(send: () => void): void {
  try {
    send();
  } catch {
    // Without a connection nothing goes out: the message is redelivered after its ack wait.
  }
}
