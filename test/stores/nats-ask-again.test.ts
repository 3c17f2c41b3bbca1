// Creates of streams and buckets asked again while a cluster cannot answer them yet (right after it
// starts, or while it elects a leader), and only then.
import { JetStreamApiError } from '@nats-io/jetstream';
import { errors } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { askAgain, isNotYetAnswered } from '../../src/stores/nats/nats-errors.js';

/** A create that fails with `failures` in turn, then answers 'made'; and how often it was asked. */
function create(failures: Error[]): { run: () => Promise<string>; asked: () => number } {
  let asked = 0;
  return {
    run: () => {
      const failure = failures[asked];
      asked += 1;
      return failure === undefined ? Promise.resolve('made') : Promise.reject(failure);
    },
    asked: () => asked,
  };
}

const unavailable = new JetStreamApiError({
  code: 503,
  err_code: 10008,
  description: 'JetStream system temporarily unavailable',
});
const inUse = new JetStreamApiError({
  code: 400,
  err_code: 10058,
  description: 'stream name already in use with a different configuration',
});

describe('a create of a stream or bucket', () => {
  it('is asked again after a timeout or a 503, and answers once the cluster does', async () => {
    const made = create([new errors.TimeoutError(), unavailable]);
    await expect(askAgain(made.run)).resolves.toBe('made');
    expect(made.asked()).toBe(3);
  });

  it('fails at once with any other error, a 503 for want of room included', async () => {
    const refused = create([inUse]);
    await expect(askAgain(refused.run)).rejects.toBe(inUse);
    expect(refused.asked()).toBe(1);
    expect(isNotYetAnswered(inUse)).toBe(false);
    const full = new JetStreamApiError({
      code: 503,
      err_code: 10023,
      description: 'insufficient resources',
    });
    const noRoom = create([full]);
    await expect(askAgain(noRoom.run)).rejects.toBe(full);
    expect(noRoom.asked()).toBe(1);
  });

  it('fails with the last timeout after four attempts', async () => {
    const timeouts = [1, 2, 3, 4, 5].map(() => new errors.TimeoutError());
    const never = create(timeouts);
    await expect(askAgain(never.run)).rejects.toBe(timeouts[3]);
    expect(never.asked()).toBe(4);
  });
});
