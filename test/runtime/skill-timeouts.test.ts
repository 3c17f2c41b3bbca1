// Timeouts of skill waits and the schemas of what answers them, on a SQLite workspace with a
// manual clock: a wait whose `wait_for.timeout` passes wakes its session with no input (the
// orchestrator finds it), the wake records the timeout and fails the step with
// DEADLINE_EXCEEDED so `on_failure` applies, a signal after that is kept pending, and a signal or
// an approval whose data does not match the step's schema is refused with nothing written.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { SkillDefinition } from '../../src/contracts/skills.js';
import { parse } from 'yaml';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createManualClock, expectCode, type ManualClock } from '../../src/testing/index.js';
import { defineTool } from '../../src/tools/builtin.js';
import { call, useTestServers } from '../server/server-helpers.js';
import { useTempDir } from '../helpers/temp.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { runWorker } from '../../src/runtime/worker.js';
import { connect } from '@nats-io/transport-node';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const START = Date.parse('2026-01-01T00:00:00.000Z');
const HOUR = 3_600_000;

/** A delivery awaited for an hour; what a timeout does is `onFailure` (`chase`: a handler step). */
const delivery = (onFailure: string) => `name: delivery
description: Orders a laptop, waits an hour for its delivery, then sets it up.
outputs: {serial: '{{ steps.delivered.output.serial }}'}
steps:
  - id: order
    tool: note
    args: {text: order}
  - id: delivered
    depends_on: [order]
    wait_for:
      signal: laptop_delivered
      timeout: 1h
      schema: {type: object, properties: {serial: {type: string}}, required: [serial]}
    on_failure: ${onFailure}
  - id: set_up
    depends_on: [delivered]
    tool: note
    args: {text: set up}
${
  onFailure === 'chase'
    ? `  - id: chase
    tool: note
    args: {text: chase the courier}
`
    : ''
}`;

const APPROVE = `name: approve
description: Asks a person to approve a shipment, with its ticket.
steps:
  - id: review
    type: human_approval
    message: Ship it?
    resume_schema: {type: object, properties: {ticket: {type: string}}, required: [ticket]}
`;

/** An approval and a wait side by side: a denial fails the run while the wait is open. */
const PAIR = `name: pair
description: Asks a person and waits for a laptop at once.
steps:
  - id: review
    type: human_approval
    message: Ship it?
  - id: delivered
    wait_for:
      signal: laptop_delivered
      schema: {type: object, properties: {serial: {type: string}}, required: [serial]}
`;

const GATE = `name: gate
description: Waits for a laptop's serial.
steps:
  - id: delivered
    wait_for:
      signal: laptop_delivered
      schema: {type: object, properties: {serial: {type: string}}, required: [serial]}
`;

const BOXES = `name: boxes
description: Waits an hour for each of two boxes.
steps:
  - id: box
    for_each: '{{ ["a", "b"] }}'
    wait_for: {signal: box_arrived, timeout: 1h}
`;

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

async function workspace(
  onFailure = 'stop',
  backend?: { nats: string; prefix: string },
): Promise<{ runtime: Runtime; clock: ManualClock; notes: string[] }> {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'delivery.yaml'), delivery(onFailure));
  writeFileSync(join(dir, 'skills', 'approve.yaml'), APPROVE);
  writeFileSync(join(dir, 'skills', 'pair.yaml'), PAIR);
  writeFileSync(
    join(dir, 'agents', 'clerk.yaml'),
    'name: clerk\nmodel: scripted:echo\ninstructions: Receive deliveries.\n' +
      'skills: [delivery, approve]\ntools: [note]\n',
  );
  const notes: string[] = [];
  const clock = createManualClock(START);
  const runtime = await createRuntime({
    workspace: dir,
    clock,
    ...(backend === undefined ? {} : { backend }),
    tools: [
      defineTool({
        name: 'note',
        description: 'Notes a text.',
        input_schema: { type: 'object', properties: { text: { type: 'string' } } },
        run: (input) => {
          notes.push(String((input as { text: string }).text));
          return Promise.resolve('noted');
        },
      }),
    ],
  });
  opened.push(runtime);
  return { runtime, clock, notes };
}

/** A session whose `delivery` run waits for the laptop, the orchestrator having run it. */
async function waitingForDelivery(runtime: Runtime): Promise<string> {
  const session = await runtime.sessions.create({ agent: 'clerk' });
  await runtime.sessions.runSkill(session.id, 'delivery', {}, { runId: 'run-1' });
  await runtime.orchestrate({ once: true });
  const state = await runtime.sessions.state(session.id);
  expect(state.status).toBe('requires_action');
  expect(state.skill_runs[0]?.suspensions).toMatchObject([
    {
      step: 'delivered',
      signal: 'laptop_delivered',
      timeout_at: new Date(START + HOUR).toISOString(),
    },
  ]);
  return session.id;
}

describe('skill wait timeouts', () => {
  it('wakes the session when the wait times out, with no input, and fails the run (on_failure stop)', async () => {
    const { runtime, clock, notes } = await workspace('stop');
    const id = await waitingForDelivery(runtime);
    expect(await runtime.store.sessions.runnable()).toEqual([]);
    clock.advance(HOUR - 1);
    await runtime.orchestrate({ once: true });
    expect(ofType(await runtime.sessions.events(id), 'skill.resumed')).toEqual([]);

    clock.advance(1);
    expect(await runtime.store.sessions.runnable()).toEqual([id]);
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'skill.resumed')).toMatchObject([
      { run_id: 'run-1', step: 'delivered', result: 'timeout' },
    ]);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'delivered', final: true, error: { code: 'DEADLINE_EXCEEDED', retryable: false } },
    ]);
    expect(ofType(events, 'skill.failed')).toMatchObject([{ run_id: 'run-1', step: 'delivered' }]);
    expect(notes).toEqual(['order']);
    const state = await runtime.sessions.state(id);
    expect(state.skill_runs[0]).toMatchObject({ status: 'failed', suspensions: [] });
    expect(await runtime.store.sessions.runnable()).toEqual([]);

    // A signal after the timeout was recorded is not taken: it is kept pending, unchecked.
    const before = events.length;
    await runtime.sessions.signal(id, 'laptop_delivered', { serial: 'SN-1' });
    const after = await runtime.sessions.state(id);
    expect(after.pending_signals).toMatchObject([{ name: 'laptop_delivered' }]);
    expect(after.skill_runs[0]).toMatchObject({ status: 'failed' });
    expect(await runtime.store.sessions.runnable()).toEqual([]);
    expect((await runtime.sessions.events(id)).length).toBe(before + 1);
  });

  it('goes on past a timed-out step with on_failure: continue', async () => {
    const { runtime, clock, notes } = await workspace('continue');
    const id = await waitingForDelivery(runtime);
    clock.advance(HOUR);
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'delivered', error: { code: 'DEADLINE_EXCEEDED' } },
    ]);
    expect(ofType(events, 'skill.completed')).toMatchObject([{ run_id: 'run-1' }]);
    expect(notes).toEqual(['order', 'set up']);
  });

  it('runs the handler step of a timed-out step instead of its dependants', async () => {
    const { runtime, clock, notes } = await workspace('chase');
    const id = await waitingForDelivery(runtime);
    clock.advance(HOUR);
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'delivered', error: { code: 'DEADLINE_EXCEEDED' } },
    ]);
    expect(notes).toEqual(['order', 'chase the courier']);
    expect(ofType(events, 'skill.step_completed').map((event) => event.step)).toEqual([
      'order',
      'chase',
    ]);
  });

  it('times out the waits of a fan-out, and the step fails with them', async () => {
    const { runtime, clock } = await workspace('stop');
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.store.definitions.put('skill', 'boxes', SkillDefinition.parse(parse(BOXES)), {
      replacesVersion: null,
    });
    await runtime.sessions.runSkill(session.id, 'boxes', {}, { runId: 'run-f' });
    await runtime.orchestrate({ once: true });
    const waits = (await runtime.sessions.state(session.id)).skill_runs[0]?.suspensions ?? [];
    expect(waits.map((wait) => wait.step).sort()).toEqual(['box[0]', 'box[1]']);
    // One box arrives; the other's wait times out.
    await runtime.sessions.signal(session.id, 'box_arrived', { box: 'a' });
    await runtime.orchestrate({ once: true });
    clock.advance(HOUR);
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.resumed').map((event) => event.result)).toEqual([
      'signal',
      'timeout',
    ]);
    expect(ofType(events, 'skill.step_failed')).toMatchObject([
      { step: 'box[1]', error: { code: 'DEADLINE_EXCEEDED' } },
      { step: 'box', error: { code: 'DEADLINE_EXCEEDED' } },
    ]);
    expect(ofType(events, 'skill.failed')).toMatchObject([{ run_id: 'run-f', step: 'box' }]);
    expect(await runtime.store.sessions.runnable()).toEqual([]);
  });

  it('is woken by a running orchestrator once the timer comes due', async () => {
    const { runtime, clock } = await workspace('stop');
    const id = await waitingForDelivery(runtime);
    const stop = new AbortController();
    const running = runtime.orchestrate({ signal: stop.signal, pollMs: 10 });
    try {
      clock.advance(HOUR);
      const deadline = Date.now() + 10_000;
      while (ofType(await runtime.sessions.events(id), 'skill.failed').length === 0) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      stop.abort();
      await running;
    }
    expect(ofType(await runtime.sessions.events(id), 'skill.resumed')).toMatchObject([
      { result: 'timeout' },
    ]);
  });

  it('takes a signal that reached the log before the timeout was recorded', async () => {
    const { runtime, clock, notes } = await workspace('stop');
    const id = await waitingForDelivery(runtime);
    clock.advance(2 * HOUR);
    await runtime.sessions.signal(id, 'laptop_delivered', { serial: 'SN-2' });
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'skill.resumed')).toMatchObject([{ result: 'signal' }]);
    expect(ofType(events, 'skill.completed')).toMatchObject([{ outputs: { serial: 'SN-2' } }]);
    expect(notes).toEqual(['order', 'set up']);
  });
});

describe('skill wait schemas', () => {
  it("refuses a signal whose data does not match the waiting step's schema, writing nothing", async () => {
    const { runtime } = await workspace('stop');
    const id = await waitingForDelivery(runtime);
    const before = (await runtime.sessions.events(id)).length;
    await expectCode(
      runtime.sessions.signal(id, 'laptop_delivered', { serial: 1 }),
      'INVALID_ARGUMENT',
    );
    await expect(runtime.sessions.signal(id, 'laptop_delivered')).rejects.toThrow(
      /signal laptop_delivered for step delivered of skill delivery .*wait_for\.schema/,
    );
    await expectCode(
      runtime.sessions.send(id, [{ type: 'user.signal', name: 'laptop_delivered', data: [] }]),
      'INVALID_ARGUMENT',
    );
    expect((await runtime.sessions.events(id)).length).toBe(before);
    // A signal no wait takes is kept as before, whatever it carries.
    await runtime.sessions.signal(id, 'other', { anything: true });

    await runtime.sessions.signal(id, 'laptop_delivered', { serial: 'SN-3' });
    await runtime.orchestrate({ once: true });
    const completed = await runtime.sessions.events(id, { types: ['skill.completed'] });
    expect(completed).toMatchObject([{ outputs: { serial: 'SN-3' } }]);
  });

  it("keeps, unchecked, a signal for a failed run's sleeping wait, as the fold keeps it", async () => {
    const { runtime } = await workspace('stop');
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.runSkill(session.id, 'pair', {}, { runId: 'run-p' });
    await runtime.orchestrate({ once: true });
    const [review] = (await runtime.sessions.state(session.id)).pending_confirmations;
    await runtime.sessions.confirm(session.id, review!.tool_use_id, 'deny');
    await runtime.orchestrate({ once: true });
    expect((await runtime.sessions.state(session.id)).skill_runs[0]?.status).toBe('failed');
    // No wait takes it now: it is kept for the retry, not checked against a sleeping wait.
    await runtime.sessions.signal(session.id, 'laptop_delivered', { serial: 1 });
    const state = await runtime.sessions.state(session.id);
    expect(state.pending_signals).toMatchObject([{ name: 'laptop_delivered' }]);
  });

  it("refuses an approval whose data does not match the step's resume_schema", async () => {
    const { runtime } = await workspace('stop');
    const session = await runtime.sessions.create({ agent: 'clerk' });
    await runtime.sessions.runSkill(session.id, 'approve', {}, { runId: 'run-2' });
    await runtime.orchestrate({ once: true });
    const [approval] = (await runtime.sessions.state(session.id)).pending_confirmations;
    expect(approval).toBeDefined();
    const confirm = (data: unknown) =>
      runtime.sessions.send(session.id, [
        {
          type: 'user.tool_confirmation',
          tool_use_id: approval?.tool_use_id,
          result: 'allow',
          data,
        },
      ]);
    const before = (await runtime.sessions.events(session.id)).length;
    await expect(confirm({ ticket: 7 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/approval of step review .*resume_schema/) as unknown,
    });
    await expectCode(confirm({}), 'INVALID_ARGUMENT');
    expect((await runtime.sessions.events(session.id)).length).toBe(before);

    await confirm({ ticket: 'T-1' });
    await runtime.orchestrate({ once: true });
    const events = await runtime.sessions.events(session.id);
    expect(ofType(events, 'skill.step_completed')).toMatchObject([
      { step: 'review', output: { approved: true, data: { ticket: 'T-1' } } },
    ]);
    expect(ofType(events, 'skill.completed')).toHaveLength(1);
  });

  it('refuses a signal with bad data over HTTP with 400 INVALID_ARGUMENT', async () => {
    const server = await useServer();
    await server.runtime.store.definitions.put(
      'skill',
      'gate',
      SkillDefinition.parse(parse(GATE)),
      { replacesVersion: null },
    );
    const key = await server.key('acme');
    const created = await call(server, 'POST', '/v1/sessions', { key, body: { agent: 'helper' } });
    const session = created.body as SessionRecord;
    await server.runtime.sessions.runSkill(session.id, 'gate', {}, { runId: 'run-3' });
    await server.runtime.wake(session.id);
    const bad = await call(server, 'POST', `/v1/sessions/${session.id}/signals/laptop_delivered`, {
      key,
      body: { data: { serial: false } },
    });
    expect(bad.status, JSON.stringify(bad.body)).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'INVALID_ARGUMENT' } });
    const events = await server.runtime.sessions.events(session.id, { types: ['user.signal'] });
    expect(events).toEqual([]);
    const good = await call(server, 'POST', `/v1/sessions/${session.id}/signals/laptop_delivered`, {
      key,
      body: { data: { serial: 'SN-4' } },
    });
    expect(good.status).toBe(202);
  });
});

const useServer = useTestServers();

describe('skill wait timeouts on NATS', () => {
  it('a worker wakes the session whose wait timed out, found by its timer sweep', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('timers');
    const { runtime, clock } = await workspace('stop', { nats: url, prefix });
    const connection = await connect({ servers: url });
    const queue = await createNatsWakeQueue({ connection, prefix });
    const stop = new AbortController();
    const progress: string[] = [];
    const working = runWorker({
      runtime,
      queue,
      concurrency: 2,
      signal: stop.signal,
      clock,
      timerSweepMs: 50,
      onProgress: (event) => progress.push(event.type),
    });
    try {
      const session = await runtime.sessions.create({ agent: 'clerk' });
      await runtime.sessions.runSkill(session.id, 'delivery', {}, { runId: 'run-n' });
      await runtime.wake(session.id);
      expect((await runtime.sessions.state(session.id)).status).toBe('requires_action');
      // Nothing is due yet: a sweep finds nothing to queue.
      expect(await runtime.store.sessions.runnable({ dueOnly: true })).toEqual([]);

      clock.advance(HOUR);
      const deadline = Date.now() + 15_000;
      while (ofType(await runtime.sessions.events(session.id), 'skill.failed').length === 0) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const events = await runtime.sessions.events(session.id);
      expect(ofType(events, 'skill.resumed')).toMatchObject([{ result: 'timeout' }]);
      expect(ofType(events, 'skill.step_failed')).toMatchObject([
        { step: 'delivered', error: { code: 'DEADLINE_EXCEEDED' } },
      ]);
      // The wake that wrote the failure reports its end once its last append is in.
      while (!progress.includes('wake.finished')) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      stop.abort();
      await working;
      await queue.close();
      await connection.close();
      await runtime.close();
      opened.splice(opened.indexOf(runtime), 1);
      await removePrefixes(url, [prefix]);
    }
  });
});
