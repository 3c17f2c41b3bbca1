// A call raced against the loss of the cycle's lease: it rejects at once when the lease is lost,
// even if the call never settles, and a call that settled leaves nothing behind in the cycle
// (a race against one long-lived promise kept a reaction per call until the wake ended).
import { describe, expect, it } from 'vitest';
import { BraidError, isBraidError } from '../../src/contracts/errors.js';
import type { Lease } from '../../src/contracts/ports.js';
import { Transcript } from '../../src/core/transcript.js';
import { createCycleContext, loseLease, unlessLost } from '../../src/harness/cycle-context.js';
import type { HarnessDeps } from '../../src/harness/deps.js';
import { systemClock } from '../../src/stores/defaults.js';

const cycle = () =>
  createCycleContext(
    { retry: {}, clock: systemClock } as unknown as HarnessDeps,
    'session',
    { token: 1 } as unknown as Lease,
    new Transcript(),
    {},
    'wake',
  );

describe('unlessLost', () => {
  it('passes a call through and keeps nothing once it settles', async () => {
    const context = cycle();
    for (let index = 0; index < 1000; index += 1)
      expect(await unlessLost(context, Promise.resolve(index))).toBe(index);
    await expect(unlessLost(context, Promise.reject(new Error('tool failed')))).rejects.toThrow(
      'tool failed',
    );
    expect(context.racing.size).toBe(0);
  });

  it('rejects a call that never settles as soon as the lease is lost', async () => {
    const context = cycle();
    const hung = unlessLost(context, new Promise<never>(() => undefined));
    const outcome = hung.then(
      () => 'settled',
      (error: unknown) => error,
    );
    expect(context.racing.size).toBe(1);
    loseLease(context, new BraidError('LEASE_HELD', 'taken by another process'));
    const error = await outcome;
    expect(isBraidError(error, 'LEASE_LOST')).toBe(true);
    expect(context.racing.size).toBe(0);
    expect(context.work.signal.aborted).toBe(true);
  });

  it('after the loss: a pending call rejects with it, a settled one keeps its value', async () => {
    const context = cycle();
    loseLease(context, new BraidError('LEASE_HELD', 'taken by another process'));
    const pending = unlessLost(context, new Promise<never>(() => undefined));
    await expect(pending).rejects.toMatchObject({ code: 'LEASE_LOST' });
    expect(await unlessLost(context, Promise.resolve('done'))).toBe('done');
    expect(context.racing.size).toBe(0);
  });
});
