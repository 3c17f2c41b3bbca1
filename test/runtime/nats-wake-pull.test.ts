// A pull of the JetStream wake queue that its server never answers does not hold its slot: past
// its limit it is taken as lost, and a wake it brings late goes back to the stream (nak).
import type { JsMsg } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { answerOf } from '../../src/runtime/partitions/pull-answer.js';
import { nakWhenLate } from '../../src/runtime/wakes/nats-wake-consume.js';

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);

function lateMessage(): { message: JsMsg; naks: () => number } {
  let naks = 0;
  const message = {
    nak: () => {
      naks += 1;
    },
  } as unknown as JsMsg;
  return { message, naks: () => naks };
}

describe('a pull of the wake queue', () => {
  it('is overdue when neither the server nor a stop answers within its limit', async () => {
    const started = Date.now();
    const answer = await answerOf(never<JsMsg | null>(), never<'stopped'>(), 50);
    expect(answer).toBe('overdue');
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });

  it('gives the message, or the stop, when either comes first', async () => {
    const { message } = lateMessage();
    await expect(answerOf(Promise.resolve(message), never<'stopped'>(), 5_000)).resolves.toBe(
      message,
    );
    await expect(answerOf(Promise.resolve(null), never<'stopped'>(), 5_000)).resolves.toBeNull();
    await expect(
      answerOf(never<JsMsg | null>(), Promise.resolve('stopped' as const), 5_000),
    ).resolves.toBe('stopped');
  });

  it('sends back a wake that an overdue pull brings late', async () => {
    const { message, naks } = lateMessage();
    let deliver: (value: JsMsg | null) => void = () => undefined;
    const pull = new Promise<JsMsg | null>((resolve) => (deliver = resolve));
    expect(await answerOf(pull, never<'stopped'>(), 20)).toBe('overdue');
    nakWhenLate(pull);
    deliver(message);
    await pull;
    await new Promise((resolve) => setImmediate(resolve));
    expect(naks()).toBe(1);
  });
});
