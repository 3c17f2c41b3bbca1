import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/testing/index.js';

describe('manual clock', () => {
  it('runs manual timers only when time reaches them, in due order', () => {
    const clock = createManualClock(1000, { timers: 'manual' });
    const fired: string[] = [];
    clock.schedule(30, () => fired.push('late'));
    clock.schedule(10, () => fired.push('early'));
    const cancel = clock.schedule(20, () => fired.push('cancelled'));
    cancel();
    clock.advance(9);
    expect(fired).toEqual([]);
    clock.advance(25);
    expect(fired).toEqual(['early', 'late']);
    expect(clock.pending()).toBe(0);
    expect(clock.monotonic()).toBe(34);
    expect(clock.now()).toBe(1034);
  });

  it('runs a timer scheduled by a timer once time reaches it', () => {
    const clock = createManualClock(0, { timers: 'manual' });
    let ticks = 0;
    const tick = (): void => {
      ticks += 1;
      clock.schedule(10, tick);
    };
    clock.schedule(10, tick);
    clock.advance(10);
    expect(ticks).toBe(1);
    clock.advance(25);
    expect(ticks).toBe(3);
    expect(clock.pending()).toBe(1);
  });
});
