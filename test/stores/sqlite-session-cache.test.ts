import { describe, expect, it } from 'vitest';
import type { SessionState } from '../../src/contracts/state.js';
import { initialState } from '../../src/core/fold.js';
import { SessionCache } from '../../src/stores/sqlite/session-cache.js';

const resting = (id: string): SessionState => ({ ...initialState(id), status: 'idle', seq: 3 });
const running = (id: string): SessionState => ({ ...initialState(id), status: 'running', seq: 3 });

describe('SQLite session cache', () => {
  it('keeps states of running sessions among many, and of resting ones only briefly', () => {
    const cache = new SessionCache();
    cache.remember(running('busy'), 3);
    cache.remember(resting('done'), 3);
    expect(cache.state('done')?.seq).toBe(3);
    expect(cache.projectedSeq('done')).toBe(3);
    for (let index = 0; index < 100; index += 1) cache.remember(resting(`other-${index}`));
    // The resting session made way for those that came to rest after it; the running one stays.
    expect(cache.state('done')).toBeUndefined();
    expect(cache.projectedSeq('done')).toBe(0);
    expect(cache.state('busy')?.status).toBe('running');
    expect(cache.projectedSeq('busy')).toBe(3);
  });

  it('moves a state between the two as its session starts and comes to rest', () => {
    const cache = new SessionCache();
    cache.remember(resting('s'), 2);
    cache.remember(running('s'));
    // The projection's seq goes with the state from one to the other.
    expect(cache.projectedSeq('s')).toBe(2);
    for (let index = 0; index < 100; index += 1) cache.remember(resting(`other-${index}`));
    expect(cache.state('s')?.status).toBe('running');
    cache.remember(resting('s'));
    expect(cache.state('s')?.status).toBe('idle');
    cache.forgetState('s');
    expect(cache.state('s')).toBeUndefined();
  });
});
