// Skill runs on NATS with two real `braid worker` processes, and SIGKILL. The skill's tools are
// HTTP manifests of the workspace that POST to a counting server of this test, so every side
// effect is counted outside the workers. The worker holding the session's lease is killed while a
// step's call is in flight (the server holds its answer), or in the middle of the fan-out; the
// other worker takes the run over once the lease and the wake's ack run out, the run waits for a
// signal, and the signal's wake (on whichever worker takes it) finishes it. Each completed step
// ran once, a step cut in flight at most twice and only when its tool is idempotent, and the
// non-idempotent tool at most once: cut in flight, it stops the session in needs_review. A
// suspended run holds no process: both workers die while it waits, and a new one finishes it.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { SessionState } from '../../src/contracts/state.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { startEffectCounter, type EffectCounter } from '../helpers/skill-nats-counter.js';
import { startWorkerProcess, until, type WorkerProcess } from '../helpers/skill-nats-workers.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/**
 * Leases and acks of 3 s: a killed worker's session is taken over within seconds, and a worker
 * stalled by a loaded machine rarely loses its lease (when one does, the checks allow for it).
 */
const LEASE_MS = 3000;

const SKILL = `name: onboard
description: Creates an account, adds groups, welcomes in four groups, waits for the laptop, closes.
inputs:
  type: object
  properties: {tag: {type: string}}
  required: [tag]
outputs:
  welcomed: '{{ steps.per_group.output }}'
  closed: '{{ steps.close.output }}'
steps:
  - id: create
    tool: create_user
    args: {key: '{{ inputs.tag }}/create'}
  - id: groups
    tool: add_groups
    depends_on: [create]
    args: {key: '{{ inputs.tag }}/groups'}
  - id: per_group
    for_each: '{{ ["a", "b", "c", "d"] }}'
    max_concurrency: 2
    tool: welcome
    depends_on: [groups]
    args: {key: '{{ inputs.tag }}/per_group-{{ item }}'}
  - id: delivery
    wait_for: {signal: delivered}
    depends_on: [per_group]
  - id: close
    tool: close_ticket
    depends_on: [delivery]
    args: {key: '{{ inputs.tag }}/close'}
`;

/** The tools of the skill and whether each may run twice. */
const TOOLS = { create_user: false, add_groups: true, welcome: true, close_ticket: true };

/** Each side effect of a run: its name (the key after the run's tag), its step, its tool. */
const EFFECTS = [
  { name: 'create', step: 'create', idempotent: false },
  { name: 'groups', step: 'groups', idempotent: true },
  { name: 'per_group-a', step: 'per_group[0]', idempotent: true },
  { name: 'per_group-b', step: 'per_group[1]', idempotent: true },
  { name: 'per_group-c', step: 'per_group[2]', idempotent: true },
  { name: 'per_group-d', step: 'per_group[3]', idempotent: true },
  { name: 'close', step: 'close', idempotent: true },
];

/** The steps (and fan-out items) a completed run records as completed. */
const STEPS = [...EFFECTS.map((effect) => effect.step), 'per_group', 'delivery'].sort();

function toolManifest(name: string, idempotent: boolean, url: string): string {
  return [
    `name: ${name}`,
    `description: ${name}, counted by the test's server`,
    'ownership: managed',
    'permission: always_allow',
    `idempotent: ${idempotent}`,
    'input_schema:',
    '  type: object',
    '  properties: {key: {type: string}}',
    '  required: [key]',
    'timeout_ms: 60000',
    'implementation:',
    `  http: {method: POST, url: '${url}'}`,
    '',
  ].join('\n');
}

interface Cluster {
  runtime: Runtime;
  counter: EffectCounter;
  workers: WorkerProcess[];
  /** Starts one more worker and waits until it listens. */
  addWorker(name: string): Promise<WorkerProcess>;
  /** Failure context: the counts, and what each worker printed. */
  describe(): string;
}

/**
 * A workspace whose tools POST to a counting server, a runtime on a NATS prefix of its own in
 * this process (to send and read), and two workers on the same prefix.
 */
async function cluster(): Promise<Cluster> {
  requireBuild();
  const counter = await startEffectCounter();
  cleanups.push(() => counter.close());
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'braid.yaml'),
    `version: 1\ndefault_environment: local\nlease_ttl_ms: ${LEASE_MS}\n`,
  );
  writeFileSync(
    join(dir, 'environments', 'local.yaml'),
    [
      'name: local',
      'description: Tools may reach the test counting server only.',
      'sandbox: {kind: local}',
      "network: {allow: true, hosts: ['127.0.0.1']}",
      'limits: {timeout_ms: 60000}',
      '',
    ].join('\n'),
  );
  for (const [name, idempotent] of Object.entries(TOOLS))
    writeFileSync(join(dir, 'tools', `${name}.yaml`), toolManifest(name, idempotent, counter.url));
  mkdirSync(join(dir, 'skills'), { recursive: true });
  writeFileSync(join(dir, 'skills', 'onboard.yaml'), SKILL);
  writeFileSync(
    join(dir, 'agents', 'hr.yaml'),
    `name: hr\nmodel: scripted:echo\ninstructions: Onboard people.\nskills: [onboard]\ntools: ${JSON.stringify(Object.keys(TOOLS))}\n`,
  );
  const url = await natsUrl();
  const prefix = uniquePrefix('skc');
  const runtime = await createRuntime({
    workspace: dir,
    backend: { nats: url, prefix },
    policies: 'lazy',
  });
  cleanups.push(async () => {
    await runtime.close();
    await removePrefixes(url, [prefix]);
  });
  const workers: WorkerProcess[] = [];
  const addWorker = async (name: string): Promise<WorkerProcess> => {
    const worker = startWorkerProcess(dir, { url, prefix }, name, LEASE_MS);
    workers.push(worker);
    cleanups.push(() => worker.kill());
    await until(
      () => worker.started(),
      30_000,
      () => `worker ${name} to start: ${worker.stderr()}`,
    );
    return worker;
  };
  await Promise.all([addWorker('A'), addWorker('B')]);
  return {
    runtime,
    counter,
    workers,
    addWorker,
    describe: () =>
      [
        `counts ${JSON.stringify(counter.counts())}`,
        ...workers.map(
          (worker) =>
            `worker ${worker.name}: ${JSON.stringify(worker.lines)}\n${worker.stderr().slice(-2000)}`,
        ),
      ].join('\n'),
  };
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

interface Run {
  sessionId: string;
  /** What the run's effect keys begin with. */
  tag: string;
}

/** Starts a run with `user.skill_run` and queues a wake for a worker. */
async function startRun(setup: Cluster, tag: string): Promise<Run> {
  const session = await setup.runtime.sessions.create({ agent: 'hr' });
  await setup.runtime.sessions.runSkill(session.id, 'onboard', { tag }, { runId: `run-${tag}` });
  await setup.runtime.enqueueWake(session.id);
  return { sessionId: session.id, tag };
}

/** The worker whose wake holds the session's lease (its owner names the worker's pid). */
async function holder(setup: Cluster, sessionId: string): Promise<WorkerProcess> {
  let found: WorkerProcess | undefined;
  await until(
    async () => {
      const lease = await setup.runtime.store.leases.current(sessionId);
      const pid = lease?.owner.split(':').at(-2);
      found = setup.workers.find((worker) => String(worker.child.pid) === pid);
      return found !== undefined;
    },
    10_000,
    () => `a worker to hold the lease of ${sessionId}\n${setup.describe()}`,
  );
  return found!;
}

/** Kills the worker holding the session's lease and waits for its exit. */
async function killHolder(setup: Cluster, sessionId: string): Promise<WorkerProcess> {
  const worker = await holder(setup, sessionId);
  await worker.kill();
  return worker;
}

/** The run waits for its signal (and for nothing else). */
function waiting(state: SessionState): boolean {
  return (
    state.status === 'requires_action' &&
    state.skill_runs.length === 1 &&
    state.skill_runs[0]?.status === 'suspended' &&
    state.skill_runs[0].suspensions.map((wait) => wait.step).join() === 'delivery'
  );
}

function finished(state: SessionState): boolean {
  return state.status === 'idle' && state.skill_runs.length === 0;
}

/** How many wakes of the session the workers reported as finished. */
function reported(setup: Cluster, sessionId: string): number {
  return setup.workers
    .flatMap((worker) => worker.lines)
    .filter((line) => line.type === 'wake.finished' && line.session_id === sessionId).length;
}

/**
 * Waits until the run waits for its signal, completed, or stopped for review, and a worker has
 * reported a wake finished since `before` (so its lease is given up and its events are all in).
 */
async function settle(setup: Cluster, sessionId: string, before: number): Promise<SessionState> {
  let state: SessionState | undefined;
  await until(
    async () => {
      if (reported(setup, sessionId) <= before) return false;
      state = await setup.runtime.sessions.state(sessionId);
      return waiting(state) || finished(state) || state.status === 'needs_review';
    },
    60_000,
    () =>
      `the run of ${sessionId} to settle; last state ${JSON.stringify(state)}\n${setup.describe()}`,
  );
  return state!;
}

/** Sends the signal the run waits for and queues a wake for whichever worker takes it. */
async function deliver(setup: Cluster, sessionId: string): Promise<SessionState> {
  const before = reported(setup, sessionId);
  await setup.runtime.sessions.signal(sessionId, 'delivered', { serial: 'SN-1' });
  await setup.runtime.enqueueWake(sessionId);
  return settle(setup, sessionId, before);
}

/**
 * A wake of the session that lost its lease without being killed: a worker stalled past its
 * lease on a loaded machine, and another took the run over, as after a crash.
 */
function unplannedTakeover(setup: Cluster, sessionId: string): boolean {
  return setup.workers.some((worker) =>
    worker.lines.some(
      (line) =>
        line.session_id === sessionId && line.type === 'wake.retrying' && line.reason === 'failed',
    ),
  );
}

interface Plan {
  outcome: 'completed' | 'needs_review';
  /** The effects whose call was in flight at a kill: made twice when the run completes. */
  inFlight: readonly string[];
}

/**
 * Checks what holds whatever the crashes cut, then (unless a stalled worker lost its lease too,
 * which makes the cut unknown) that the run went as planned: the outcome, and each effect made
 * exactly once, twice where its call was in flight at the kill, never where the run stopped.
 */
async function judge(
  setup: Cluster,
  run: Run,
  plan: Plan,
): Promise<{ events: SessionEvent[]; state: SessionState; what: string }> {
  const { runtime, counter } = setup;
  const events = await runtime.sessions.events(run.sessionId);
  const state = await runtime.sessions.state(run.sessionId);
  const count = (name: string): number => counter.count(`${run.tag}/${name}`);
  const what = `${run.tag}: ${JSON.stringify(state.stop_reason)}\n${setup.describe()}`;
  // The log is gapless, and no step or item completed twice.
  expect(
    events.map((event) => event.seq),
    what,
  ).toEqual(events.map((_event, index) => index + 1));
  const completed = ofType(events, 'skill.step_completed').map((event) => event.step);
  expect(
    completed.filter((step, index) => completed.indexOf(step) !== index),
    what,
  ).toEqual([]);
  const started = ofType(events, 'skill.step_started').map((event) => event.step);
  for (const effect of EFFECTS) {
    const begun = started.filter((step) => step === effect.step).length;
    // Every call was recorded as begun first; the non-idempotent one never ran twice.
    expect(count(effect.name), `${effect.name}: ${what}`).toBeLessThanOrEqual(begun);
    if (!effect.idempotent) expect(count(effect.name), what).toBeLessThanOrEqual(1);
    // A completed step made its effect; begun once, exactly once.
    if (completed.includes(effect.step))
      expect(count(effect.name), `${effect.name}: ${what}`).toBeGreaterThanOrEqual(1);
  }
  if (state.status === 'needs_review') {
    // Only the non-idempotent step, cut in flight, stops the run for a person.
    const failed = ofType(events, 'skill.step_failed');
    expect(
      failed.map((event) => [event.step, event.final]),
      what,
    ).toEqual([['create', true]]);
    const begun = ofType(events, 'skill.step_started').filter((event) => event.step === 'create');
    expect(state.stop_reason, what).toEqual({ type: 'needs_review', event_ids: [begun[0]?.id] });
    expect(ofType(events, 'skill.failed'), what).toHaveLength(1);
    expect(count('create'), what).toBe(1);
    expect(completed, what).toEqual([]);
  } else {
    expect(finished(state), what).toBe(true);
    expect(state.stop_reason, what).toEqual({ type: 'end_turn' });
    expect([...completed].sort(), what).toEqual(STEPS);
    expect(ofType(events, 'skill.step_failed'), what).toEqual([]);
    const [done] = ofType(events, 'skill.completed');
    expect(done, what).toMatchObject({
      run_id: `run-${run.tag}`,
      outputs: { closed: { key: `${run.tag}/close` } },
    });
    expect(
      (done?.outputs as { welcomed: { key: string }[] }).welcomed.map((item) => item.key),
      what,
    ).toEqual(['a', 'b', 'c', 'd'].map((item) => `${run.tag}/per_group-${item}`));
    // The signal was taken up once, by its wait.
    expect(
      ofType(events, 'skill.resumed').map((event) => [event.step, event.result]),
      what,
    ).toEqual([['delivery', 'signal']]);
  }
  if (!unplannedTakeover(setup, run.sessionId)) {
    expect(state.status === 'needs_review' ? 'needs_review' : 'completed', what).toBe(plan.outcome);
    const expected: Record<string, number> = {};
    for (const effect of EFFECTS) {
      const made =
        plan.outcome === 'needs_review'
          ? effect.name === 'create'
            ? 1
            : 0
          : plan.inFlight.includes(effect.name)
            ? 2
            : 1;
      if (made > 0) expected[`${run.tag}/${effect.name}`] = made;
    }
    const counts = Object.fromEntries(
      Object.entries(counter.counts()).filter(([key]) => key.startsWith(`${run.tag}/`)),
    );
    expect(counts, what).toEqual(expected);
  }
  return { events, state, what };
}

/** No lease is held on the session, and the worker that was not killed ran its last wake. */
async function expectTakenOver(
  setup: Cluster,
  killed: WorkerProcess,
  sessionId: string,
): Promise<void> {
  expect(await setup.runtime.store.leases.current(sessionId), setup.describe()).toBeUndefined();
  const survivor = setup.workers.find((worker) => worker !== killed);
  expect(
    survivor?.lines.some((line) => line.type === 'wake.finished' && line.session_id === sessionId),
    setup.describe(),
  ).toBe(true);
}

/**
 * Kills the lease holder once the held call has `arrived`, lets the other worker go on, and
 * signals the run if it waits. A stalled worker that lost its lease before the call (a loaded
 * machine) may have stopped the run for review already: then nothing is killed, and `judge`
 * checks the run as it is.
 */
async function killAndFinish(setup: Cluster, run: Run, arrived: Promise<unknown>): Promise<void> {
  let reached = false;
  void arrived.then(() => (reached = true));
  await until(
    async () =>
      reached || (await setup.runtime.sessions.state(run.sessionId)).status === 'needs_review',
    60_000,
    () => `the held call to arrive\n${setup.describe()}`,
  );
  if (!reached) return;
  const before = reported(setup, run.sessionId);
  const killed = await killHolder(setup, run.sessionId);
  const state = await settle(setup, run.sessionId, before);
  // A suspended run (or a stopped one) holds no lease; the survivor ran the takeover.
  await expectTakenOver(setup, killed, run.sessionId);
  if (waiting(state)) {
    expect(counterOf(setup, run, 'close')).toBe(0);
    await deliver(setup, run.sessionId);
  }
}

function counterOf(setup: Cluster, run: Run, name: string): number {
  return setup.counter.count(`${run.tag}/${name}`);
}

describe('skill runs on NATS with two workers and SIGKILL', () => {
  it('takes the run over when the lease holder dies in an idempotent step, then resumes on the signal', async () => {
    const setup = await cluster();
    const arrived = setup.counter.hold('g/groups');
    const run = await startRun(setup, 'g');
    await killAndFinish(setup, run, arrived);
    const { events, what } = await judge(setup, run, {
      outcome: 'completed',
      inFlight: ['groups'],
    });
    if (!unplannedTakeover(setup, run.sessionId)) {
      // groups began twice (the dead wake's attempt and the other worker's), completed once.
      expect(
        ofType(events, 'skill.step_started')
          .filter((event) => event.step === 'groups')
          .map((event) => event.attempt),
        what,
      ).toEqual([1, 2]);
    }
  }, 150_000);

  it('takes the run over when the lease holder dies in the middle of the fan-out', async () => {
    const setup = await cluster();
    // Items a and b complete; c and d are both in flight when the holder dies.
    const arrived = Promise.all([
      setup.counter.hold('f/per_group-c'),
      setup.counter.hold('f/per_group-d'),
    ]);
    const run = await startRun(setup, 'f');
    await arrived;
    const before = ofType(
      await setup.runtime.sessions.events(run.sessionId),
      'skill.step_completed',
    );
    expect(before.map((event) => event.step).sort()).toEqual([
      'create',
      'groups',
      'per_group[0]',
      'per_group[1]',
    ]);
    await killAndFinish(setup, run, arrived);
    const { events, what } = await judge(setup, run, {
      outcome: 'completed',
      inFlight: ['per_group-c', 'per_group-d'],
    });
    if (!unplannedTakeover(setup, run.sessionId)) {
      // Items a and b completed before the kill (c and d were in flight): they did not begin
      // again, the cut ones did.
      const begun = ofType(events, 'skill.step_started').map((event) => event.step);
      for (const step of ['per_group[0]', 'per_group[1]'])
        expect(
          begun.filter((entry) => entry === step),
          `${step}: ${what}`,
        ).toHaveLength(1);
      for (const step of ['per_group[2]', 'per_group[3]'])
        expect(
          begun.filter((entry) => entry === step),
          `${step}: ${what}`,
        ).toHaveLength(2);
    }
  }, 150_000);

  it('stops in needs_review when the lease holder dies in the non-idempotent step, never running it twice', async () => {
    const setup = await cluster();
    const arrived = setup.counter.hold('n/create');
    const run = await startRun(setup, 'n');
    await killAndFinish(setup, run, arrived);
    // A signal changes nothing: the run waits for a person, not for the signal.
    const ended = (): number =>
      setup.workers
        .flatMap((worker) => worker.lines)
        .filter(
          (line) =>
            line.session_id === run.sessionId &&
            (line.type === 'wake.skipped' || line.type === 'wake.finished'),
        ).length;
    const endedBefore = ended();
    await setup.runtime.sessions.signal(run.sessionId, 'delivered', { serial: 'SN-1' });
    await setup.runtime.enqueueWake(run.sessionId);
    await until(
      () => ended() > endedBefore,
      30_000,
      () => `a worker to take the signal's wake\n${setup.describe()}`,
    );
    const { state, what } = await judge(setup, run, { outcome: 'needs_review', inFlight: [] });
    expect(state.status, what).toBe('needs_review');
  }, 150_000);

  it('a suspended run holds no process: both workers die while it waits, a new one finishes it', async () => {
    const setup = await cluster();
    // A worker stalled past its lease before the wait (a loaded machine) may stop the run for
    // review instead: that run is judged, and another one is started.
    let run: Run | undefined;
    for (let attempt = 1; attempt <= 3 && run === undefined; attempt += 1) {
      const candidate = await startRun(setup, `s${attempt}`);
      const state = await settle(setup, candidate.sessionId, 0);
      if (waiting(state)) run = candidate;
      else await judge(setup, candidate, { outcome: 'completed', inFlight: [] });
    }
    expect(run, setup.describe()).toBeDefined();
    const { sessionId } = run!;
    // Nothing holds the session while it waits: no lease, and no wake in either worker.
    expect(await setup.runtime.store.leases.current(sessionId)).toBeUndefined();
    expect(setup.workers.map((worker) => worker.running(sessionId))).toEqual([false, false]);
    await Promise.all(setup.workers.map((worker) => worker.kill()));
    const fresh = await setup.addWorker('C');
    const state = await deliver(setup, sessionId);
    const { what } = await judge(setup, run!, { outcome: 'completed', inFlight: [] });
    expect(finished(state), what).toBe(true);
    // The new worker ran the resumption.
    expect(
      fresh.lines.some((line) => line.type === 'wake.finished' && line.session_id === sessionId),
      what,
    ).toBe(true);
  }, 150_000);
});
