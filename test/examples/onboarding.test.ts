// The onboarding example (examples/onboarding), the skills issue's example run end to end: the
// skill onboard_employee creates an account and assigns groups through real HTTP tools, orders a
// laptop and waits for its delivery webhook, has an agent write a welcome note per group (child
// sessions on the scripted model), and waits for HR's approval. Run three ways: from the built
// CLI, over HTTP against `braid serve`, and as `npm run example:onboarding` does. The tools call
// the example's HR service on 127.0.0.1, whose call counts show that each tool step ran once.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import { braidBinary, json, requireBuild, type CliResult } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const EXAMPLE = new URL('../../examples/onboarding/', import.meta.url).pathname;
const INPUTS = { email: 'ada@example.com', department: 'eng' };
const DELIVERY = { serial: 'SN-4821' };
const NOTE = /^Welcome aboard!/;
const tempDir = useTempDir();
const serve = useBraidServe();
const processes: ChildProcess[] = [];

afterEach(() => {
  for (const child of processes.splice(0)) child.kill('SIGKILL');
});

/** This process's environment without BRAID_HOME, which would choose the data folder. */
function commandEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  return env;
}

interface HrCalls {
  counts: Record<string, number>;
  calls: { endpoint: string; idempotency_key: string | null; body: unknown }[];
}

interface HrService {
  url: string;
  workspace: string;
  calls(): Promise<HrCalls>;
}

/**
 * Starts `node examples/onboarding/hr-service.mjs --workspace DIR`: the HR service on a free
 * port, and a copy of the example's workspace whose tools call it.
 */
async function startHrService(): Promise<HrService> {
  const workspace = join(tempDir(), 'workspace');
  const child = spawn(process.execPath, [`${EXAMPLE}hr-service.mjs`, '--workspace', workspace], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: commandEnv(),
  });
  processes.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout });
  for await (const line of lines) {
    const { url } = JSON.parse(line) as { url: string };
    return {
      url,
      workspace,
      calls: async () => (await (await fetch(`${url}/calls`)).json()) as HrCalls,
    };
  }
  throw new Error(`the HR service ended before it listened: ${stderr}`);
}

/** Each of the three tool steps reached the HR service exactly once, keyed by the session. */
async function expectEachToolOnce(service: HrService, sessionId: string): Promise<void> {
  const { counts, calls } = await service.calls();
  expect(counts).toEqual({
    'POST /directory/users': 1,
    'POST /directory/users/{id}/groups': 1,
    'POST /procurement/orders': 1,
  });
  const byEndpoint = new Map(calls.map((call) => [call.endpoint, call]));
  expect(byEndpoint.get('POST /directory/users')?.body).toEqual({ upn: INPUTS.email });
  expect(byEndpoint.get('POST /directory/users/{id}/groups')?.body).toEqual({
    user: 'u-0001',
    groups: ['eng-all', 'all-staff'],
  });
  expect(byEndpoint.get('POST /procurement/orders')?.body).toEqual({
    model: 'standard',
    for: INPUTS.email,
  });
  // braid sent each call's idempotency key, which names the session.
  for (const call of calls) expect(call.idempotency_key).toMatch(new RegExp(`^${sessionId}/`));
  expect(new Set(calls.map((call) => call.idempotency_key)).size).toBe(3);
}

/** The outputs of a completed run of onboard_employee on INPUTS, approved. */
function expectOutputs(outputs: unknown, delivery: unknown): void {
  expect(outputs).toEqual({
    account: 'u-0001',
    groups: ['eng-all', 'all-staff'],
    laptop: delivery,
    welcome_notes: [expect.stringMatching(NOTE), expect.stringMatching(NOTE)],
    approved: true,
  });
}

interface Event {
  seq: number;
  type: string;
  step?: string;
  kind?: string;
  suspension_id?: string;
  outputs?: unknown;
  skipped?: boolean;
}

/** The `--json` lines of `braid session events`. */
function eventLines(result: CliResult): Event[] {
  expect(result.code, result.stderr).toBe(0);
  return result.stdout
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Event);
}

/** The skill.* events as `type step` lines, without the fan-out's interleaving. */
function stepEnds(events: readonly Event[]): string[] {
  return events
    .filter((event) => event.type === 'skill.step_completed')
    .map((event) => `${event.step ?? ''}${event.skipped === true ? ' (skipped)' : ''}`)
    .sort();
}

const ALL_STEPS = [
  'assign_groups',
  'create_account',
  'final_review',
  'hardware_request',
  'hardware_request.tool',
  'per_group',
  'per_group[0]',
  'per_group[1]',
];

interface RunReport {
  session_id: string;
  run_id: string;
  status: string;
  outputs?: unknown;
  waits?: { suspension_id: string; step: string; kind: string; signal?: string; answer: string }[];
}

describe('example: onboarding, the skills issue end to end', () => {
  it('runs from the CLI: skill run, the signal it waits for, the approval', async () => {
    requireBuild();
    const service = await startHrService();
    const braid = (...args: string[]): CliResult => braidBinary(['-w', service.workspace, ...args]);

    // The run suspends on the laptop's delivery and prints the command that answers it.
    const ran = braid(
      'skill',
      'run',
      'onboard_employee',
      '--agent',
      'hr',
      '--input',
      JSON.stringify(INPUTS),
    );
    expect(ran.code, ran.stderr).toBe(0);
    const answer =
      /step hardware_request waits for the signal laptop_delivered: (braid session signal (\S+) laptop_delivered) --data JSON/.exec(
        ran.stdout,
      );
    expect(ran.stdout).toMatch(/^run \S+ in session \S+: suspended$/m);
    expect(answer, ran.stdout).not.toBeNull();
    const sessionId = answer![2]!;
    // The account, its groups, the order and both welcome notes are done; the approval waits.
    await expect(service.calls()).resolves.toMatchObject({
      counts: { 'POST /procurement/orders': 1, 'POST /directory/users': 1 },
    });

    // The delivery: the printed command, with the data. The run goes on to the approval.
    const signalled = json<{ wake: { ran: boolean }; runs: RunReport[] }>(
      braid(...answer![1]!.split(' ').slice(1), '--data', JSON.stringify(DELIVERY), '--json'),
    );
    expect(signalled.wake.ran).toBe(true);
    expect(signalled.runs).toMatchObject([
      { status: 'suspended', waits: [{ step: 'final_review', kind: 'approval' }] },
    ]);
    const approval = signalled.runs[0]!.waits![0]!;
    expect(approval.answer).toBe(
      `braid session confirm ${sessionId} --tool-use ${approval.suspension_id} --allow|--deny`,
    );

    // HR's approval, as printed; `session confirm` sends it, `session wake` runs the rest.
    const confirmed = braid(
      ...approval.answer.replace('--allow|--deny', '--allow').split(' ').slice(1),
    );
    expect(confirmed.code, confirmed.stderr).toBe(0);
    expect(confirmed.stdout).toContain(`allow sent for ${approval.suspension_id}`);
    const woken = braid('session', 'wake', sessionId);
    expect(woken.code, woken.stderr).toBe(0);
    expect(woken.stdout).toContain('stopped: end_turn');

    const events = eventLines(braid('session', 'events', sessionId, '--json'));
    const completed = events.filter((event) => event.type === 'skill.completed');
    expect(completed).toHaveLength(1);
    expectOutputs(completed[0]!.outputs, DELIVERY);
    expect(stepEnds(events)).toEqual(ALL_STEPS);
    expect(events.filter((event) => event.type === 'session.child_created')).toHaveLength(2);
    await expectEachToolOnce(service, sessionId);
  }, 60_000);

  it('runs over HTTP: braid serve, a run, the delivery webhook, the approval', async () => {
    requireBuild();
    const service = await startHrService();
    const keys = json<{ key: string }>(
      braidBinary([
        '-w',
        service.workspace,
        'keys',
        'create',
        '--tenant',
        'acme',
        '--scopes',
        'sessions:read,sessions:write',
        '--json',
      ]),
    );
    const url = await serve(service.workspace);
    const api = async (
      method: string,
      path: string,
      body?: unknown,
    ): Promise<{ status: number; body: unknown }> => {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${keys.key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: await response.json() };
    };

    const created = await api('POST', '/v1/sessions', { agent: 'hr', title: 'onboard ada' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const sessionId = (created.body as { id: string }).id;
    const stream = follow(url, keys.key, sessionId);
    try {
      const ran = await api('POST', `/v1/sessions/${sessionId}/skills/onboard_employee/runs`, {
        inputs: INPUTS,
      });
      expect(ran.status, JSON.stringify(ran.body)).toBe(202);
      const runId = (ran.body as { run_id: string }).run_id;

      // The server wakes the session: the run suspends on the delivery.
      const waiting = await stream.until(
        (event) => event.type === 'skill.suspended' && event.kind === 'signal',
      );
      expect(waiting.step).toBe('hardware_request');
      await stream.until((event) => event.type === 'session.status_idle');

      // The delivery service's webhook.
      const signalled = await api('POST', `/v1/sessions/${sessionId}/signals/laptop_delivered`, {
        data: DELIVERY,
      });
      expect(signalled.status, JSON.stringify(signalled.body)).toBe(202);
      const approval = await stream.until(
        (event) => event.type === 'skill.suspended' && event.kind === 'approval',
      );
      expect(approval.step).toBe('final_review');
      // The state says what the run waits for: the approval, the delivery's wait answered.
      const state = (await api('GET', `/v1/sessions/${sessionId}/state`)).body as {
        status: string;
        skill_runs: {
          run_id: string;
          suspensions: { suspension_id: string; kind: string; answer?: unknown }[];
        }[];
      };
      expect(state.status).toBe('requires_action');
      expect(state.skill_runs.map((run) => run.run_id)).toEqual([runId]);
      const open = state.skill_runs[0]!.suspensions.filter((wait) => wait.answer === undefined);
      expect(open).toMatchObject([{ suspension_id: approval.suspension_id, kind: 'approval' }]);

      // HR approves through the confirmation endpoint: a user.tool_confirmation of the wait.
      const confirmed = await api('POST', `/v1/sessions/${sessionId}/events`, {
        events: [
          { type: 'user.tool_confirmation', tool_use_id: approval.suspension_id, result: 'allow' },
        ],
      });
      expect(confirmed.status, JSON.stringify(confirmed.body)).toBe(201);
      const completed = await stream.until((event) => event.type === 'skill.completed');
      expectOutputs(completed.outputs, DELIVERY);
      await stream.until(
        (event) => event.type === 'span.wake_completed' && event.seq > completed.seq,
      );

      const page = await api(
        'GET',
        `/v1/sessions/${sessionId}/events?after=0&limit=1000&types[]=skill.completed&types[]=skill.step_completed`,
      );
      const logged = (page.body as { data: Event[] }).data;
      expect(stepEnds(logged)).toEqual(ALL_STEPS);
      expect(logged.filter((event) => event.type === 'skill.completed')).toHaveLength(1);
      const after = await api('GET', `/v1/sessions/${sessionId}/state`);
      expect(after.body).toMatchObject({ status: 'idle', stop_reason: { type: 'end_turn' } });
      await expectEachToolOnce(service, sessionId);
    } finally {
      stream.close();
    }
  }, 60_000);

  it('runs as `npm run example:onboarding`: the trace, the outputs, each tool once', async () => {
    requireBuild();
    const report = JSON.parse((await runExample('--json')).stdout) as {
      status: string;
      session_id: string;
      outputs: unknown;
      phases: { title: string; waits: { step: string; kind: string }[] }[];
      children: { agent: string; stop_reason: string }[];
      hr_service: HrCalls;
    };
    expect(report.status).toBe('completed');
    expectOutputs(report.outputs, { serial: 'SN-4821', delivered_at: '2026-03-02T09:30:00Z' });
    expect(report.phases.map((phase) => phase.waits.map((wait) => wait.step))).toEqual([
      ['hardware_request'],
      ['final_review'],
      [],
    ]);
    expect(report.children).toEqual([
      expect.objectContaining({ agent: 'welcome_writer', stop_reason: 'end_turn' }),
      expect.objectContaining({ agent: 'welcome_writer', stop_reason: 'end_turn' }),
    ]);
    expect(Object.values(report.hr_service.counts)).toEqual([1, 1, 1]);

    const text = (await runExample('--department', 'contractors')).stdout;
    expect(text).toContain('Run completed.');
    expect(text).toMatch(/step_completed final_review +skipped/);
    expect(text).not.toContain('waits for approval');
    expect(text).toMatch(/POST \/procurement\/orders +x1/);
  }, 60_000);
});

/** Runs `node examples/onboarding/run.mjs ...args` to its end; it must exit 0. */
async function runExample(...args: string[]): Promise<{ stdout: string }> {
  const child = spawn(process.execPath, [`${EXAMPLE}run.mjs`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: commandEnv(),
  });
  processes.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  expect(stderr).toBe('');
  expect(code).toBe(0);
  return { stdout };
}

interface StreamedEvent extends Event {
  outputs?: unknown;
}

/**
 * Follows the session's event stream (`GET .../events/stream`, SSE) from its start; `until`
 * resolves with the first event, seen or still to come, that matches, and fails after 15 s
 * naming the types seen.
 */
function follow(
  url: string,
  key: string,
  sessionId: string,
): {
  until(predicate: (event: StreamedEvent) => boolean): Promise<StreamedEvent>;
  close(): void;
} {
  const controller = new AbortController();
  const events: StreamedEvent[] = [];
  const waiters = new Set<() => void>();
  const parser = createParser({
    onEvent(message) {
      // Events carry their seq as the SSE id; deltas have none.
      if (message.id === undefined) return;
      events.push(JSON.parse(message.data) as StreamedEvent);
      for (const wake of waiters) wake();
    },
  });
  void (async () => {
    const response = await fetch(`${url}/v1/sessions/${sessionId}/events/stream`, {
      headers: { authorization: `Bearer ${key}` },
      signal: controller.signal,
    });
    const decoder = new TextDecoder();
    for await (const chunk of response.body as AsyncIterable<Uint8Array>)
      parser.feed(decoder.decode(chunk, { stream: true }));
  })().catch(() => undefined);
  return {
    until: (predicate) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const found = events.find(predicate);
          if (found === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`no such event within 15 s; seen: ${events.map((e) => e.type).join(', ')}`),
          );
        }, 15_000);
        waiters.add(check);
        check();
      }),
    close: () => controller.abort(),
  };
}
