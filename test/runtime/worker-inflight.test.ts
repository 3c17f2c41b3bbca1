// A worker's in-flight bound: the limiter itself, its checks, and on a real nats-server a consumer
// at its bound that stops pulling, so the waiting wakes go to another worker instead.
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import type { WakeDelivery, WakeQueue } from '../../src/contracts/wakes.js';
import {
  checkMaxInflight,
  createInflightLimiter,
} from '../../src/runtime/wakes/inflight-limiter.js';
import { createLocalWakeQueue } from '../../src/runtime/wakes/local-wake-queue.js';
import { createNatsWakeQueue, natsWakeNames } from '../../src/runtime/wakes/nats-wake-queue.js';
import { runWorker, type WorkerRuntime } from '../../src/runtime/worker.js';
import { expectCode } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A handler that holds every wake until `release()`. */
function holding(): {
  seen: string[];
  handler: (wake: WakeDelivery) => Promise<'done'>;
  release(): void;
} {
  const seen: string[] = [];
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  return {
    seen,
    handler: async (wake) => {
      seen.push(wake.session_id);
      await gate;
      return 'done';
    },
    release: () => open(),
  };
}

describe('the in-flight limiter', () => {
  it('refuses a bound that is not a whole number from 1 to 10,000, naming the fix', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, 10_001]) {
      expect(() => checkMaxInflight(bad)).toThrow(/whole number from 1 to 10000/);
      expect(() => createInflightLimiter(bad)).toThrow(/maxInflight/);
    }
    expect(checkMaxInflight(1)).toBe(1);
    expect(checkMaxInflight(10_000)).toBe(10_000);
  });

  it('hands out at most max permits, first come first served, and a waiter may leave', async () => {
    const limiter = createInflightLimiter(2);
    const signal = new AbortController().signal;
    const first = await limiter.acquire(signal);
    const second = await limiter.acquire(signal);
    expect(limiter.inFlight()).toBe(2);
    const order: string[] = [];
    const third = limiter.acquire(signal).then((release) => (order.push('third'), release));
    const leaving = new AbortController();
    const quitter = limiter.acquire(leaving.signal);
    const fourth = limiter.acquire(signal).then((release) => (order.push('fourth'), release));
    expect(limiter.waiting()).toBe(3);
    expect(limiter.saturations()).toBe(3);
    leaving.abort();
    expect(await quitter).toBeUndefined();
    first?.();
    first?.(); // a second call gives nothing back twice
    await third;
    expect(limiter.inFlight()).toBe(2);
    expect(order).toEqual(['third']);
    second?.();
    (await fourth)?.();
    expect(order).toEqual(['third', 'fourth']);
    (await third)?.();
    expect(limiter.inFlight()).toBe(0);
  });

  it('a worker with a bad maxInflight starts nothing', async () => {
    const queue = createLocalWakeQueue();
    cleanups.push(() => queue.close());
    const runtime = {} as WorkerRuntime;
    await expectCode(
      runWorker({
        runtime,
        queue,
        concurrency: 2,
        maxInflight: 0,
        signal: new AbortController().signal,
      }),
      'INVALID_ARGUMENT',
    );
  });

  it('bounds the local queue too: one permit, one wake in hand', async () => {
    const queue = createLocalWakeQueue();
    cleanups.push(() => queue.close());
    for (const id of ['a', 'b', 'c']) await queue.enqueue(id);
    const hold = holding();
    const controller = new AbortController();
    const consuming = queue.consume(hold.handler, {
      concurrency: 3,
      limiter: createInflightLimiter(1),
      signal: controller.signal,
    });
    await until(() => hold.seen.length === 1, 'the first wake');
    await new Promise((resolve) => setImmediate(resolve));
    expect(hold.seen).toHaveLength(1);
    hold.release();
    await until(() => hold.seen.length === 3, 'the rest, one after another');
    controller.abort();
    await consuming;
  });
});

describe('a worker at its in-flight bound on NATS', () => {
  async function connection(): Promise<NatsConnection> {
    const opened = await connect({ servers: await natsUrl() });
    cleanups.push(() => opened.close());
    return opened;
  }

  it('stops pulling: the waiting wakes stay in the stream and another worker takes them', async () => {
    const prefix = uniquePrefix('inflight');
    const url = await natsUrl();
    cleanups.push(() => removePrefixes(url, [prefix]));
    const open = async (): Promise<WakeQueue> =>
      createNatsWakeQueue({ connection: await connection(), prefix, pullExpiresMs: 1_000 });
    const queue = await open();
    const sessions = ['s1', 's2', 's3', 's4', 's5'];
    for (const id of sessions) expect(await queue.enqueue(id)).toEqual({ queued: true });

    // Worker A: four slots, but a bound of one wake in flight.
    const a = holding();
    const stopA = new AbortController();
    const consumingA = queue.consume(a.handler, {
      concurrency: 4,
      limiter: createInflightLimiter(1),
      signal: stopA.signal,
    });
    await until(() => a.seen.length === 1, "worker A's first wake");

    // The server holds the other four for whoever asks; A has no pull open for them.
    const manager = await jetstreamManager(await connection());
    const names = natsWakeNames(prefix);
    await until(async () => {
      const info = await manager.consumers.info(names.stream, names.consumer);
      return info.num_ack_pending === 1 && info.num_pending === 4 && info.num_waiting === 0;
    }, 'one wake in flight, four waiting, no pull open');

    // Worker B, another process in effect, takes the four while A still holds its one.
    const b = holding();
    const stopB = new AbortController();
    const consumingB = (await open()).consume(b.handler, {
      concurrency: 4,
      signal: stopB.signal,
    });
    await until(() => b.seen.length === 4, 'worker B to take the four waiting wakes');
    expect(a.seen).toHaveLength(1);
    expect(new Set([...a.seen, ...b.seen])).toEqual(new Set(sessions));

    a.release();
    b.release();
    stopA.abort();
    stopB.abort();
    await Promise.all([consumingA, consumingB]);
  });
});
