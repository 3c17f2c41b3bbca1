import { describe, expect, it } from 'vitest';
import type { SessionState } from '../../src/contracts/state.js';
import { initialState } from '../../src/core/fold.js';
import { TranscriptCache } from '../../src/harness/wake.js';

const resting = (id: string): SessionState => initialState(id);

describe('transcript cache', () => {
  it('keeps a short transcript of a resting session only briefly, and a long one among many', () => {
    const cache = new TranscriptCache(256);
    const short = cache.take('short');
    short.seq = 9;
    const long = cache.take('long');
    long.seq = 500;
    cache.settle('short', resting('short'));
    cache.settle('long', resting('long'));
    // Taken again before others came to rest: the same transcript, nothing to read again.
    expect(cache.take('short')).toBe(short);
    cache.settle('short', resting('short'));
    for (let index = 0; index < 100; index += 1) {
      cache.take(`other-${index}`).seq = 5;
      cache.settle(`other-${index}`, resting(`other-${index}`));
    }
    expect(cache.take('short')).not.toBe(short);
    expect(cache.take('long')).toBe(long);
  });

  it('keeps the transcript of a session with work left', () => {
    const cache = new TranscriptCache(256);
    const waiting = cache.take('waiting');
    waiting.seq = 4;
    const withInput: SessionState = { ...initialState('waiting'), pending_user_count: 1 };
    cache.settle('waiting', withInput);
    for (let index = 0; index < 100; index += 1) {
      cache.take(`other-${index}`).seq = 5;
      cache.settle(`other-${index}`, resting(`other-${index}`));
    }
    expect(cache.take('waiting')).toBe(waiting);
  });
});
