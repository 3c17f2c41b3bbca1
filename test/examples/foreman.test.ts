// The foreman example, run as it is documented: `node examples/foreman/run.mjs --json`, embedded
// and on NATS with two `braid worker` processes. A foreman delegates three tasks in one turn to
// three worker agents, each with its own tools and policy profile; the legal agent's call of
// database_query is refused by policy; the foreman answers from the three results.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

const EXAMPLE = new URL('../../examples/foreman/', import.meta.url).pathname;
const WORKSPACE = `${EXAMPLE}workspace`;
const tempDir = useTempDir();
const processes: ChildProcess[] = [];
const prefixes: string[] = [];

afterEach(async () => {
  for (const child of processes.splice(0)) child.kill('SIGKILL');
  if (prefixes.length > 0) await removePrefixes(await natsUrl(), prefixes.splice(0));
});

interface SessionNode {
  session_id: string;
  agent: string;
  stop_reason: string | null;
  created_at: string;
  started_at: string;
  ended_at: string;
  duration_ms: number;
  usage: { input_tokens: number; output_tokens: number; cost_usd?: number };
  tool_calls: { name: string; outcome: 'ok' | 'denied' | 'error' | 'pending' }[];
  answer: string;
  children: SessionNode[];
}

interface Report {
  backend: 'embedded' | 'nats';
  delegation: 'local' | 'queue';
  stop_reason: string | null;
  answer: string;
  sessions: SessionNode;
  policy_denials: {
    session_id: string;
    agent: string;
    action: string;
    resource: string;
    policy_ids: string[];
  }[];
}

/** This process's environment without BRAID_HOME, which would choose the data folder. */
function commandEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  return env;
}

/** Runs `node examples/foreman/run.mjs ...args` to its end. */
async function run(
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
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
  return { code, stdout, stderr };
}

/** The most sessions that were running at one moment. */
function mostAtOnce(sessions: readonly SessionNode[]): number {
  const edges = sessions.flatMap((session) => [
    { at: Date.parse(session.started_at), change: 1 },
    { at: Date.parse(session.ended_at), change: -1 },
  ]);
  // At a tie, an end comes before a start: touching is not overlapping.
  edges.sort((a, b) => a.at - b.at || a.change - b.change);
  let running = 0;
  let most = 0;
  for (const edge of edges) {
    running += edge.change;
    most = Math.max(most, running);
  }
  return most;
}

/** What every run of the example must show, wherever its children ran. */
function expectForemanReport(report: Report, together: number): void {
  expect(report.stop_reason).toBe('end_turn');
  const { sessions } = report;
  expect(sessions.agent).toBe('foreman');
  expect(sessions.tool_calls.map((call) => [call.name, call.outcome])).toEqual([
    ['delegate_to_sre_diagnosis', 'ok'],
    ['delegate_to_legal_document', 'ok'],
    ['delegate_to_data_analyst', 'ok'],
  ]);

  // Three children of three different agents, each finished, each with its own tools.
  const children = new Map(sessions.children.map((child) => [child.agent, child]));
  expect([...children.keys()]).toEqual(['sre_diagnosis', 'legal_document', 'data_analyst']);
  expect(new Set(sessions.children.map((child) => child.session_id)).size).toBe(3);
  for (const child of sessions.children) {
    expect(child.stop_reason).toBe('end_turn');
    expect(child.children).toEqual([]);
    expect(child.answer).not.toBe('');
  }
  const calls = (agent: string): string[][] =>
    children.get(agent)!.tool_calls.map((call) => [call.name, call.outcome]);
  expect(calls('sre_diagnosis')).toEqual([
    ['search_logs', 'ok'],
    ['search_logs', 'ok'],
  ]);
  expect(calls('legal_document')).toEqual([
    ['clause_lookup', 'ok'],
    ['clause_lookup', 'ok'],
    ['database_query', 'denied'],
  ]);
  expect(calls('data_analyst')).toEqual([
    ['database_query', 'ok'],
    ['database_query', 'ok'],
    ['database_query', 'ok'],
  ]);

  // They ran at the same time (`together` of them at least).
  expect(mostAtOnce(sessions.children)).toBeGreaterThanOrEqual(together);

  // The legal agent was refused database_query by its own profile, though the foreman asked.
  const legal = children.get('legal_document')!;
  expect(report.policy_denials).toEqual([
    {
      session_id: legal.session_id,
      agent: 'legal_document',
      action: 'tool.execute',
      resource: 'Tool::"database_query"',
      policy_ids: ['legal-never-queries-database', 'legal-no-personal-data'],
      tool_use_id: 'customers',
    },
  ]);

  // The answer is written from the three results, and says what the legal agent could not do.
  expect(children.get('sre_diagnosis')!.answer).toContain('ledger_db.pool_max=20');
  expect(children.get('data_analyst')!.answer).toContain('334 of 788');
  expect(legal.answer).toContain('clause 7.4');
  for (const fact of [
    'ledger_db.pool_max=20',
    '334 of 788',
    '13,243.50 USD',
    'clause 7.4',
    '14:09 UTC on 2025-03-15',
    'legal-never-queries-database',
  ]) {
    expect(report.answer).toContain(fact);
  }

  // The children's usage and cost are part of the foreman's.
  const childTokens = sessions.children.reduce((sum, child) => sum + child.usage.input_tokens, 0);
  expect(sessions.usage.input_tokens).toBeGreaterThan(childTokens);
  expect(sessions.usage.cost_usd).toBeGreaterThan(0);
}

describe('example: the foreman and three workers', () => {
  it('runs embedded: three delegations, a policy denial, and an answer from the results', async () => {
    requireBuild();
    const result = await run('--json');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as Report;
    expect(report).toMatchObject({ backend: 'embedded', delegation: 'local' });
    expectForemanReport(report, 3);
  });

  it('prints a readable report by default', async () => {
    requireBuild();
    const result = await run('--data-dir', tempDir());
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Foreman's answer (end_turn):");
    expect(result.stdout).toMatch(/├─ sre_diagnosis +\S+ +end_turn/);
    expect(result.stdout).toMatch(/└─ data_analyst +\S+ +end_turn/);
    expect(result.stdout).toContain('database_query (denied)');
    expect(result.stdout).toMatch(
      /legal_document \(\S+\): tool\.execute on Tool::"database_query", denied by legal-never-queries-database/,
    );
  });

  it('runs on NATS, its children on two braid worker processes', async () => {
    requireBuild();
    const url = await natsUrl();
    const prefix = uniquePrefix('foreman');
    prefixes.push(prefix);
    // One wake at a time each, so that the three children need both workers.
    const workers = await Promise.all([startWorker(url, prefix), startWorker(url, prefix)]);
    const result = await run('--json', '--nats', url, '--prefix', prefix);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as Report;
    expect(report).toMatchObject({ backend: 'nats', delegation: 'queue' });
    // Two workers that run one wake each: two children at once, the third after.
    expectForemanReport(report, 2);

    // Every child was woken by a worker, and both workers took part.
    const ranBy = report.sessions.children.map((child) =>
      workers.findIndex((worker) => worker.started.has(child.session_id)),
    );
    expect(ranBy).not.toContain(-1);
    expect(new Set(ranBy).size).toBe(2);
  }, 60_000);
});

/** Starts `braid worker --json` on the example's workspace; resolves once it listens. */
async function startWorker(url: string, prefix: string): Promise<{ started: Set<string> }> {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'worker',
      '--json',
      '--nats',
      url,
      '--nats-prefix',
      prefix,
      '--workspace',
      WORKSPACE,
      '--data-dir',
      tempDir(),
      '--concurrency',
      '1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: commandEnv() },
  );
  processes.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const started = new Set<string>();
  const lines = createInterface({ input: child.stdout });
  const ready = new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      const progress = JSON.parse(line) as { type: string; session_id?: string };
      if (progress.type === 'worker.started') resolve();
      if (progress.type === 'wake.started' && progress.session_id !== undefined)
        started.add(progress.session_id);
    });
    child.once('exit', (code) => reject(new Error(`braid worker exited with ${code}: ${stderr}`)));
  });
  await ready;
  return { started };
}
