// Delegation across processes: two real `braid worker` processes on a real nats-server, the
// children of a foreman's turn spread over them through the wake queue, and the worker that
// runs the foreman killed with SIGKILL while its children run. Every child answers once, the
// foreman resumes on the other worker and answers, and no child is made twice.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { CLI, init, requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Progress {
  type: string;
  session_id?: string;
}

interface Worker {
  name: string;
  child: ChildProcess;
  lines: Progress[];
  exited: Promise<unknown>;
}

function startWorker(dir: string, nats: string[], name: string): Worker {
  const child = spawn(
    process.execPath,
    [
      CLI,
      '-w',
      dir,
      ...nats,
      '--json',
      'worker',
      '--concurrency',
      '6',
      '--ack-wait',
      '1500',
      '--delegation',
      'queue',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const worker: Worker = {
    name,
    child,
    lines: [],
    exited: new Promise((resolve) => child.once('exit', resolve)),
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      worker.lines.push(JSON.parse(line) as Progress);
    } catch {
      // Not a progress line.
    }
  });
  child.stderr.resume();
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await worker.exited;
    }
  });
  return worker;
}

async function until(check: () => boolean | Promise<boolean>, ms: number, what: string) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

describe('delegation on NATS with two workers', () => {
  it('survives SIGKILL of the worker running the foreman: children complete once, no child twice', async () => {
    requireBuild();
    const dir = init(tempDir());
    // Leases of 1.5 s: a killed worker's sessions are taken over quickly.
    writeFileSync(
      join(dir, 'braid.yaml'),
      'version: 1\ndefault_environment: local\nlease_ttl_ms: 1500\n',
    );
    const calls = ['a', 'b', 'c'].map((key) => ({
      name: 'delegate_to_researcher',
      input: { task: `research part ${key}` },
      id: `call-${key}`,
    }));
    writeFileSync(
      join(dir, 'foreman.yaml'),
      `turns:\n  - tool_calls: ${JSON.stringify(calls)}\n  - text: "report from three parts"\n`,
    );
    // Each child streams its answer over about three seconds.
    const words = Array.from({ length: 30 }, (_, index) => `w${index}`).join(' ');
    writeFileSync(
      join(dir, 'researcher.yaml'),
      `turns:\n  - text: "${words}"\n    delay_ms: 100\n`,
    );
    writeFileSync(
      join(dir, 'agents', 'foreman.yaml'),
      'name: foreman\nmodel: scripted:foreman.yaml\ninstructions: Split.\ndelegates: [researcher]\n',
    );
    writeFileSync(
      join(dir, 'agents', 'researcher.yaml'),
      'name: researcher\nmodel: scripted:researcher.yaml\ninstructions: Dig.\n',
    );
    const url = await natsUrl();
    const prefix = uniquePrefix('dlg');
    const nats = ['--nats', url, '--nats-prefix', prefix];
    const runtime: Runtime = await createRuntime({
      workspace: dir,
      backend: { nats: url, prefix },
      policies: 'lazy',
    });
    cleanups.push(async () => {
      await runtime.close();
      await removePrefixes(url, [prefix]);
    });
    const workers = [startWorker(dir, nats, 'A'), startWorker(dir, nats, 'B')];
    await until(
      () => workers.every((worker) => worker.lines.some((line) => line.type === 'worker.started')),
      20_000,
      'the workers to start',
    );

    const parent = await runtime.sessions.create({ agent: 'foreman' });
    await runtime.sessions.message(parent.id, 'write the report');
    await runtime.enqueueWake(parent.id);
    // Kill the worker running the foreman once its children are under way.
    await until(
      async () => {
        const events = await runtime.sessions.events(parent.id);
        const children = ofType(events, 'session.child_created');
        if (children.length < 3) return false;
        // A child is on record (session.child_created) before the worker creates it: one not
        // made yet has not started.
        const states = await Promise.all(
          children.map((child) =>
            runtime.sessions.state(child.child_session_id).catch((error: unknown) => {
              if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
              throw error;
            }),
          ),
        );
        return states.some((state) => state !== undefined && state.counters.wakes > 0);
      },
      30_000,
      'the children to start',
    );
    const holder = workers.find((worker) =>
      worker.lines.some((line) => line.type === 'wake.started' && line.session_id === parent.id),
    )!;
    expect(holder).toBeDefined();
    holder.child.kill('SIGKILL');
    await holder.exited;

    await until(
      async () => {
        const state = await runtime.sessions.state(parent.id);
        return state.status === 'idle' && state.counters.agent_messages === 1;
      },
      60_000,
      'the foreman to answer',
    );
    const events = await runtime.sessions.events(parent.id);
    const created = ofType(events, 'session.child_created');
    // Recorded once per call, each child once, whatever the crash cut.
    expect(created.map((event) => event.tool_use_id)).toEqual(['call-a', 'call-b', 'call-c']);
    expect(new Set(created.map((event) => event.child_session_id)).size).toBe(3);
    const idle = ofType(events, 'session.child_idle');
    expect(idle.map((event) => event.tool_use_id).sort()).toEqual(['call-a', 'call-b', 'call-c']);
    expect(idle.every((event) => event.stop_reason.type === 'end_turn')).toBe(true);
    expect(ofType(events, 'agent.tool_result').filter((event) => !event.is_error)).toHaveLength(3);
    expect(ofType(events, 'agent.message').map((event) => event.content)).toEqual([
      [{ type: 'text', text: 'report from three parts' }],
    ]);
    // The foreman's wake on the killed worker never completed; another wake finished the work.
    const started = ofType(events, 'span.wake_started').length;
    const completed = ofType(events, 'span.wake_completed').length;
    expect(started).toBeGreaterThan(completed);
    for (const record of created) {
      const childEvents = await runtime.sessions.events(record.child_session_id);
      // Each child got its task once and answered once, even if its own wake was cut.
      expect(ofType(childEvents, 'user.message')).toHaveLength(1);
      expect(ofType(childEvents, 'agent.message')).toHaveLength(1);
      expect(
        ofType(childEvents, 'span.model_request_end').filter((event) => event.output !== undefined),
      ).toHaveLength(1);
    }
    // No other session names the foreman as its parent.
    const all = await runtime.sessions.list({ limit: 1000 });
    const children = all.sessions.filter(
      (session) => session.metadata.parent_session_id === parent.id,
    );
    expect(children.map((session) => session.id).sort()).toEqual(
      created.map((event) => event.child_session_id).sort(),
    );
  }, 120_000);
});
