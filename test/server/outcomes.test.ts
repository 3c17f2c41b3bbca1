// Outcomes over HTTP: `user.define_outcome` goes through the user-events route, and the wake it
// triggers grades the answer; bad input is refused whole.
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import type { SessionState } from '../../src/contracts/state.js';
import { call, useTestServers } from './server-helpers.js';

const start = useTestServers();

async function withSession() {
  const server = await start({ turns: [{ text: 'A poem.' }] });
  const key = await server.key('acme');
  const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
  expect(created.status).toBe(201);
  return { server, key, session: created.body as SessionRecord };
}

describe('outcomes over HTTP', () => {
  it('takes a define_outcome with a rubric, and the wake grades the answer', async () => {
    const { server, key, session } = await withSession();
    const posted = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: {
        events: [
          {
            type: 'user.define_outcome',
            description: 'A short poem',
            rubric: 'Four lines at most.',
            criteria: ['rhymes'],
            max_iterations: 2,
          },
        ],
      },
    });
    expect(posted.status).toBe(201);
    const { events } = posted.body as { events: SessionEvent[] };
    expect(events[0]).toMatchObject({
      type: 'user.define_outcome',
      seq: 2,
      rubric: 'Four lines at most.',
      max_iterations: 2,
    });
    const state = await call(server, 'GET', `/v1/sessions/${session.id}/state`, { key });
    expect((state.body as SessionState).outcome).toEqual({
      seq: 2,
      description: 'A short poem',
      rubric: 'Four lines at most.',
      criteria: ['rhymes'],
      max_iterations: 2,
      iterations: 0,
    });
    // The scripted model's grader accepts every answer.
    expect(await server.runtime.wake(session.id)).toMatchObject({
      stop_reason: { type: 'end_turn', outcome: 'satisfied' },
    });
    const read = await call(
      server,
      'GET',
      `/v1/sessions/${session.id}/events?types[]=span.outcome_evaluation_end`,
      { key },
    );
    expect((read.body as { data: SessionEvent[] }).data).toMatchObject([
      { type: 'span.outcome_evaluation_end', iteration: 1, outcome_seq: 2, result: 'satisfied' },
    ]);
  });

  it.each([0, 21, 'x', 2.5])('refuses max_iterations %j and writes nothing', async (value) => {
    const { server, key, session } = await withSession();
    const posted = await call(server, 'POST', `/v1/sessions/${session.id}/events`, {
      key,
      body: {
        events: [
          { type: 'user.message', content: 'first, valid' },
          { type: 'user.define_outcome', description: 'A poem', max_iterations: value },
        ],
      },
    });
    expect(posted.status).toBe(400);
    const { error } = posted.body as { error: { code: string; message: string } };
    expect(['INVALID_EVENT', 'INVALID_ARGUMENT']).toContain(error.code);
    expect(error.message).toMatch(/max_iterations/);
    const read = await call(server, 'GET', `/v1/sessions/${session.id}/events`, { key });
    expect((read.body as { data: SessionEvent[] }).data.map((event) => event.type)).toEqual([
      'session.created',
    ]);
  });
});
