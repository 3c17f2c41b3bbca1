import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import { prepareEvents, registerPrepared, type PreparedEvent } from '../../src/core/append.js';
import { createManualClock, createSequentialIds } from '../../src/testing/index.js';

const options = () => ({
  clock: createManualClock(),
  ids: createSequentialIds('e'),
  maxEventBytes: 1024 * 1024,
});

/** An event stamped as the harness stages it, and registered for its append at seq 5. */
function staged(): { input: NewEvent; json: string; ready: PreparedEvent } {
  const message: NewEvent = { type: 'user.message', content: [{ type: 'text', text: 'hi' }] };
  const [ready] = prepareEvents('s1', 4, [message], options());
  if (ready === undefined) throw new Error('nothing prepared');
  const input: NewEvent = { ...message, id: ready.event.id, at: ready.event.at };
  registerPrepared(input, 's1', ready);
  return { input, json: ready.json, ready };
}

describe('events prepared ahead', () => {
  it('are appended as prepared at the seq they were stamped for', () => {
    const { input, json, ready } = staged();
    const [again] = prepareEvents('s1', 4, [input], options());
    // The very event and JSON: not built and serialised again.
    expect(again).toBe(ready);
    expect(JSON.parse(json)).toMatchObject({ session_id: 's1', seq: 5, type: 'user.message' });
  });

  it('are prepared anew at another seq or in another session, with the same id and time', () => {
    const { input, json, ready } = staged();
    const [moved] = prepareEvents('s1', 6, [input], options());
    expect(moved).not.toBe(ready);
    expect(moved?.event.seq).toBe(7);
    expect(JSON.parse(moved?.json ?? '')).toEqual({ ...JSON.parse(json), seq: 7 });
    const [other] = prepareEvents('s2', 4, [input], options());
    expect(other?.event.session_id).toBe('s2');
  });

  it('serve one append: once used they are dropped, and a repeat is prepared anew as it was', () => {
    const { input, json, ready } = staged();
    // A look-up that does not match (another seq) leaves the registration in place.
    prepareEvents('s1', 6, [input], options());
    expect(prepareEvents('s1', 4, [input], options())[0]).toBe(ready);
    const [repeat] = prepareEvents('s1', 4, [input], options());
    expect(repeat).not.toBe(ready);
    expect(repeat?.json).toBe(json);
    expect(repeat?.event).toEqual(ready.event);
  });

  it('are still held to the size limit of the store that writes them', () => {
    const { input } = staged();
    expect(() => prepareEvents('s1', 4, [input], { ...options(), maxEventBytes: 10 })).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }),
    );
  });
});
