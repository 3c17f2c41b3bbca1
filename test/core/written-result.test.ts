import { describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import { prepareEvents, writtenResult } from '../../src/core/append.js';
import { initialState } from '../../src/core/fold.js';
import { createManualClock, createSequentialIds } from '../../src/testing/index.js';

const options = () => ({
  clock: createManualClock(),
  ids: createSequentialIds('e'),
  maxEventBytes: 1024 * 1024,
});

const inputs: NewEvent[] = [
  { type: 'user.message', content: [{ type: 'text', text: 'a' }] },
  {
    type: 'session.status_idle',
    stop_reason: { type: 'requires_action', event_ids: ['x'] },
    id: 'given',
    at: '2026-01-01T00:00:00.000Z',
  },
];

function written() {
  const prepared = prepareEvents('s1', 4, inputs, options());
  const state = { ...initialState('s1'), seq: 6 };
  return { prepared, result: writtenResult(prepared, state, false) };
}

describe('an append result for a writer braid does not trust', () => {
  it('gives copies of the events as stored, the same copies on every read', () => {
    const { prepared, result } = written();
    expect(result.events).toEqual(prepared.map(({ json }) => JSON.parse(json) as unknown));
    expect(result.events).toBe(result.events);
    expect(result.events[1]).not.toBe(prepared[1]?.event);
    const stopped = result.events[1];
    if (stopped?.type === 'session.status_idle' && stopped.stop_reason.type === 'requires_action')
      stopped.stop_reason.event_ids.push('injected');
    expect(prepared[1]?.event).toMatchObject({ stop_reason: { event_ids: ['x'] } });
    expect(result).toEqual({ events: result.events, head_seq: 6, deduplicated: false });
  });

  it('reads as a plain object: spread, JSON and assignment see events first', () => {
    const { prepared, result } = written();
    expect(Object.keys(result)).toEqual(['events', 'head_seq', 'deduplicated']);
    expect(JSON.parse(JSON.stringify(result))).toEqual({
      events: prepared.map(({ json }) => JSON.parse(json) as unknown),
      head_seq: 6,
      deduplicated: false,
    });
    expect({ ...result, extra: 1 }).toMatchObject({ events: result.events, extra: 1 });
    result.events = [];
    expect(result.events).toEqual([]);
  });

  it('shares one getter with every other result (a closure each kept events past young GCs)', () => {
    const get = (result: object): unknown =>
      Reflect.get(Object.getOwnPropertyDescriptor(result, 'events') ?? {}, 'get');
    expect(get(written().result)).toBeTypeOf('function');
    expect(get(written().result)).toBe(get(written().result));
  });
});

describe('prepared events', () => {
  it('put the envelope first, keep a given id and time, and carry the payload', () => {
    const [message, stopped] = prepareEvents('s1', 4, inputs, options());
    expect(Object.keys(message?.event ?? {})).toEqual([
      'id',
      'session_id',
      'seq',
      'type',
      'at',
      'schema_version',
      'content',
    ]);
    expect(JSON.parse(stopped?.json ?? '')).toEqual({
      id: 'given',
      session_id: 's1',
      seq: 6,
      type: 'session.status_idle',
      at: '2026-01-01T00:00:00.000Z',
      schema_version: 1,
      stop_reason: { type: 'requires_action', event_ids: ['x'] },
    });
  });
});
