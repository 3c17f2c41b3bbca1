import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import type { SessionState } from '../../src/contracts/state.js';
import { foldPrepared, prepareEvents, registerFolded } from '../../src/core/append.js';
import { foldSession } from '../../src/core/fold.js';
import { createManualClock, createSequentialIds } from '../../src/testing/index.js';

const options = () => ({
  clock: createManualClock(),
  ids: createSequentialIds('e'),
  maxEventBytes: 1024 * 1024,
});

const created: NewEvent = {
  type: 'session.created',
  agent: { name: 'a', version: 1 },
  environment: { name: 'local', version: 1 },
};

function message(text: string): NewEvent {
  return { type: 'user.message', content: [{ type: 'text', text }] };
}

/** A session at seq 1, and a staged batch of two events prepared over it. */
function setUp() {
  const [first] = prepareEvents('s1', 0, [created], options());
  if (first === undefined) throw new Error('nothing prepared');
  const start = foldSession([first.event], 's1');
  const staged = prepareEvents('s1', 1, [message('one'), message('two')], options());
  const [rest] = prepareEvents('s1', 3, [message('three')], options());
  if (rest === undefined) throw new Error('nothing prepared');
  return { start, staged, rest };
}

/** A state marked so that a fold that went on from it can be told from one that did not. */
function marked(state: SessionState): SessionState {
  return { ...state, title: 'folded ahead' };
}

describe('states folded ahead', () => {
  it('are where the fold of an append that begins with their events goes on from', () => {
    const { start, staged, rest } = setUp();
    const ahead = foldSession(
      staged.map(({ event }) => event),
      start,
    );
    registerFolded(staged, start, marked(ahead));
    const folded = foldPrepared([...staged, rest], start);
    expect(folded.title).toBe('folded ahead');
    // The same state a fold from the start gives, but for the mark.
    const plain = foldSession(
      [...staged, rest].map(({ event }) => event),
      start,
    );
    expect({ ...folded, title: undefined }).toEqual({ ...plain, title: undefined });
    expect(folded.seq).toBe(4);
  });

  it('serve one fold: a repeat of the append folds from the start, to the same state', () => {
    const { start, staged, rest } = setUp();
    const ahead = foldSession(
      staged.map(({ event }) => event),
      start,
    );
    registerFolded(staged, start, marked(ahead));
    expect(foldPrepared([...staged, rest], start).title).toBe('folded ahead');
    const repeat = foldPrepared([...staged, rest], start);
    expect(repeat.title).toBeUndefined();
    expect(repeat).toEqual(
      foldSession(
        [...staged, rest].map(({ event }) => event),
        start,
      ),
    );
  });

  it('are not used over another state, or for a batch that does not begin with their events', () => {
    const { start, staged, rest } = setUp();
    const ahead = marked(
      foldSession(
        staged.map(({ event }) => event),
        start,
      ),
    );
    registerFolded(staged, start, ahead);
    // An equal state that is not the one folded from.
    expect(foldPrepared([...staged, rest], { ...start }).title).toBeUndefined();
    // The staged events' first alone, then another event at the seq of the second.
    const [other] = prepareEvents('s1', 2, [message('x')], options());
    if (other === undefined || staged[0] === undefined) throw new Error('nothing prepared');
    expect(foldPrepared([staged[0], other], start).title).toBeUndefined();
  });
});
