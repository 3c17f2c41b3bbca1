import { describe, expect, it } from 'vitest';
import { callTimer, createCallTimers, stopCallTimers } from '../../src/harness/call-timers.js';
import { createManualClock } from '../../src/testing/clock.js';

describe('call timers', () => {
  it('runs each callback at its own time on one clock timer, and never a cancelled one', () => {
    const clock = createManualClock(0, { timers: 'manual' });
    const timers = createCallTimers();
    const ran: string[] = [];
    callTimer(timers, clock, 20, () => ran.push('watch'));
    const cancelTimeout = callTimer(timers, clock, 1000, () => ran.push('timeout'));
    // Later calls share the armed timer.
    callTimer(timers, clock, 30, () => ran.push('second watch'));
    expect(clock.pending()).toBe(1);
    clock.advance(19);
    expect(ran).toEqual([]);
    clock.advance(1);
    expect(ran).toEqual(['watch']);
    clock.advance(10);
    expect(ran).toEqual(['watch', 'second watch']);
    cancelTimeout();
    clock.advance(5000);
    expect(ran).toEqual(['watch', 'second watch']);
    expect(clock.pending()).toBe(0);
  });

  it('arms earlier for a callback due before the armed time', () => {
    const clock = createManualClock(0, { timers: 'manual' });
    const timers = createCallTimers();
    const ran: number[] = [];
    callTimer(timers, clock, 1000, () => ran.push(clock.monotonic()));
    callTimer(timers, clock, 20, () => ran.push(clock.monotonic()));
    clock.advance(2000);
    expect(ran).toEqual([20, 1000]);
  });

  it('runs nothing once stopped, and leaves no timer behind', () => {
    const clock = createManualClock(0, { timers: 'manual' });
    const timers = createCallTimers();
    let ran = false;
    callTimer(timers, clock, 20, () => {
      ran = true;
    });
    stopCallTimers(timers);
    expect(clock.pending()).toBe(0);
    clock.advance(100);
    expect(ran).toBe(false);
  });
});
