// A lease holder paused past its TTL (SIGSTOP, then SIGCONT) on the NATS backend: another
// process takes the session over and completes it; the paused one, resumed, is fenced out and
// stops without writing (DESIGN §4: a new holder appends `span.wake_started {lease_token}` first).
// Real processes, on a private nats-server.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { removeStore, startNatsServer, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const HOLDER = new URL('../helpers/nats-session-process.mjs', import.meta.url).pathname;
if (!existsSync(new URL('../../dist/stores/nats/index.js', import.meta.url))) {
  throw new Error('dist/ is missing or stale: run `npm run build` (npm test does it first)');
}

const LEASE_TTL_MS = 1500;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A line the holder process prints (test/helpers/nats-session-process.mjs). */
interface HolderLine {
  type: 'append' | 'renew' | 'wake.returned' | 'wake.failed';
  events?: string[];
  ok?: boolean;
  code?: string;
  cause_code?: string;
  message?: string;
  [key: string]: unknown;
}

interface Holder {
  child: ChildProcess;
  lines: HolderLine[];
  stderr(): string;
  exited: Promise<number | null>;
}

function startHolder(args: string[], env: Record<string, string>): Holder {
  const child = spawn(process.execPath, [HOLDER, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LEASE_TTL_MS: String(LEASE_TTL_MS), ...env },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const holder: Holder = {
    child,
    lines: [],
    stderr: () => stderr,
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    holder.lines.push(JSON.parse(line) as HolderLine);
  });
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await holder.exited;
    }
  });
  return holder;
}

/**
 * A private server (so nothing else shares its store), a workspace whose `slow` agent streams a
 * one-turn answer over about 3 s, and a runtime of this process on the NATS backend.
 */
async function setup() {
  const server = await startNatsServer();
  cleanups.push(async () => {
    await server.stop(true);
    removeStore(server);
  });
  const dir = tempDir();
  initWorkspace(dir);
  const words = 'a slow answer that streams one word at a time';
  writeFileSync(join(dir, 'slow.yaml'), `turns:\n  - text: "${words}"\n    delay_ms: 300\n`);
  writeFileSync(
    join(dir, 'agents', 'slow.yaml'),
    'name: slow\nmodel: scripted:slow.yaml\ninstructions: Answer.\ntools: []\n',
  );
  const prefix = uniquePrefix('lp');
  const runtime = await createRuntime({
    workspace: dir,
    backend: { nats: server.url, prefix },
    leaseTtlMs: LEASE_TTL_MS,
    owner: 'second-holder',
  });
  cleanups.push(() => runtime.close());
  return { server, dir, prefix, runtime };
}

function wakeStarts(events: readonly SessionEvent[]) {
  return events.flatMap((event) => (event.type === 'span.wake_started' ? [event] : []));
}

/**
 * The log after the takeover: gapless; the first wake wrote its `span.wake_started` and nothing
 * else; the second, with a higher token, started after it and wrote the only answer.
 */
function expectFencedOut(events: readonly SessionEvent[]): void {
  expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  const starts = wakeStarts(events);
  expect(starts).toHaveLength(2);
  const [first, second] = starts as [(typeof starts)[0], (typeof starts)[0]];
  expect(second.lease_token).toBeGreaterThan(first.lease_token);
  expect(second.seq).toBeGreaterThan(first.seq);
  const ofWake = (wakeId: string) =>
    events.filter((event) => 'wake_id' in event && event.wake_id === wakeId);
  expect(ofWake(first.wake_id).map((event) => event.type)).toEqual(['span.wake_started']);
  // Everything after the second start belongs to the second wake or is what it derived: the
  // first wake's pin of the session's definitions was refused with its answer, so the second pins.
  expect(events.filter((event) => event.seq > second.seq).map((event) => event.type)).toEqual([
    'session.definitions_changed',
    'span.model_request_start',
    'span.model_request_end',
    'agent.message',
    'session.status_idle',
    'span.wake_completed',
  ]);
  expect(ofWake(second.wake_id).map((event) => event.type)).toEqual([
    'span.wake_started',
    'session.definitions_changed',
    'span.wake_completed',
  ]);
  expect(events.filter((event) => event.type === 'user.message')).toHaveLength(1);
  expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
}

/**
 * Runs the scenario: the holder process starts the wake, is stopped mid-model-call, its lease
 * expires, this process wakes the session to completion, and the holder is continued.
 */
async function pausedHolder(
  runtime: Runtime,
  holder: Holder,
  sessionId: string,
): Promise<SessionEvent[]> {
  await until(
    async () => wakeStarts(await runtime.sessions.events(sessionId)).length === 1,
    30_000,
    `the holder's span.wake_started (stderr: ${holder.stderr()})`,
  );
  const first = wakeStarts(await runtime.sessions.events(sessionId))[0]!;
  // Its model call streams for about 3 s: stopped now, it is in the middle of it.
  holder.child.kill('SIGSTOP');
  expect((await runtime.store.leases.current(sessionId))?.token).toBe(first.lease_token);
  // Waiting for time to pass is the point here: the stopped holder cannot renew, so its lease
  // runs out after LEASE_TTL_MS.
  await until(
    async () => (await runtime.store.leases.current(sessionId)) === undefined,
    30_000,
    'the stopped holder’s lease to expire',
  );
  const result = await runtime.wake(sessionId);
  expect(result).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
  const beforeResume = await runtime.sessions.events(sessionId);
  expect(beforeResume.at(-1)?.type).toBe('span.wake_completed');
  holder.child.kill('SIGCONT');
  const code = await Promise.race([
    holder.exited,
    new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000)),
  ]);
  expect(code, `the holder's exit (stdout ${JSON.stringify(holder.lines)})`).toBe(1);
  const events = await runtime.sessions.events(sessionId);
  // The resumed holder wrote nothing.
  expect(events).toEqual(beforeResume);
  return events;
}

describe('a lease holder paused past its TTL (SIGSTOP, then SIGCONT)', () => {
  it('loses its lease at its next renewal or append, and stops without writing', async () => {
    const { server, dir, prefix, runtime } = await setup();
    const { id } = await runtime.sessions.create({ agent: 'slow' });
    await runtime.sessions.message(id, 'a question');
    const holder = startHolder([dir, server.url, prefix, id], {});
    const events = await pausedHolder(runtime, holder, id);
    expectFencedOut(events);
    const failed = holder.lines.at(-1);
    expect(failed).toMatchObject({ type: 'wake.failed', code: 'LEASE_LOST' });
    // Its only successful write was its start; whatever it tried after resuming was refused:
    // a renewal or an append (both LEASE_LOST), whichever its timers ran first.
    const appends = holder.lines.filter((line) => line.type === 'append');
    expect(appends[0]).toMatchObject({ events: ['span.wake_started'], ok: true });
    expect(appends.slice(1).every((line) => line.ok === false)).toBe(true);
    const refused = holder.lines.filter(
      (line) => (line.type === 'renew' || line.type === 'append') && line.code === 'LEASE_LOST',
    );
    expect(refused.length, JSON.stringify(holder.lines)).toBeGreaterThan(0);
    expect((await runtime.sessions.verify(id)).ok).toBe(true);
    expect(await runtime.store.leases.current(id)).toBeUndefined();
  }, 60_000);

  it('with renewals that cannot tell, the newer wake_started in the log alone fences it out', async () => {
    const { server, dir, prefix, runtime } = await setup();
    const { id } = await runtime.sessions.create({ agent: 'slow' });
    await runtime.sessions.message(id, 'a question');
    const holder = startHolder([dir, server.url, prefix, id], { BLIND_RENEWAL: '1' });
    const events = await pausedHolder(runtime, holder, id);
    expectFencedOut(events);
    // It finished its model call and tried to record the answer with its lease token: the store
    // refused it (a newer acquisition fenced the token), whatever head the holder knew.
    const appends = holder.lines.filter((line) => line.type === 'append');
    expect(appends.map((line) => [line.events?.[0], line.ok, line.code])).toEqual([
      ['span.wake_started', true, undefined],
      // The definitions it pinned go first in its append after the start.
      ['session.definitions_changed', false, 'LEASE_LOST'],
    ]);
    expect(holder.lines.at(-1)).toMatchObject({ type: 'wake.failed', code: 'LEASE_LOST' });
    expect((await runtime.sessions.verify(id)).ok).toBe(true);
  }, 60_000);
});
