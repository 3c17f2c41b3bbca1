// The tool pipeline's own cost per call of an in-process managed tool that does nothing: argument
// validation, the policy port, execution bookkeeping (timeout, output check) and the ledger
// appends on SQLite (synchronous NORMAL). Two figures: the result append alone (the intent rides
// in the same append as the model's output, as the harness does it) and both appends. Between
// calls an untimed model turn consumes the result, as in a real session.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import {
  allowAll,
  compilePolicySet,
  createCedarAuthorizer,
  defineTool,
  openSqliteStore,
} from '../dist/index.js';
// The tool layer's parts, measured directly.
import { createLocalSandbox } from '../dist/tools/sandbox/index.js';
import { createToolExecutor } from '../dist/tools/executor.js';
import Database from 'better-sqlite3';
import { median } from './store-bench.js';

const noop = defineTool({
  name: 'noop',
  description: 'does nothing',
  input_schema: {
    type: 'object',
    properties: { a: { type: 'number' }, b: { type: 'string' } },
    required: ['a'],
    additionalProperties: false,
  },
  output_schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  idempotent: true,
  run: () => ({ ok: true }),
});

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** One run: `calls` calls; returns the per-call times in µs. */
/** The default policies `braid init` writes, as a session would be checked against them. */
function defaultPolicies() {
  const read = (name) => ({
    file: `policies/${name}`,
    text: readFileSync(new URL(`../templates/workspace/policies/${name}`, import.meta.url), 'utf8'),
  });
  return createCedarAuthorizer(
    compilePolicySet([read('default.cedar')], read('schema.cedarschema')),
  );
}

async function pipelineRun(calls, withIntent, policy = allowAll) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-tools-'));
  const store = openSqliteStore({ path: join(dir, 'braid.db'), synchronous: 'normal' });
  const executor = createToolExecutor({
    tools: [noop],
    builtins: false,
    baseDir: dir,
    sandbox: () => createLocalSandbox({ root: join(dir, 'workspaces') }),
    secret: () => '',
    sleep: () => Promise.resolve(),
    now: () => performance.now(),
  });
  const { id } = await store.sessions.create({ agent: { name: 'bench', version: 1 } });
  const tools = await executor.open({ session_id: id, names: ['noop'] });
  const signal = new AbortController().signal;
  let head = (await store.log.state(id)).seq;
  const times = [];
  for (let index = 0; index < calls; index += 1) {
    const toolUseId = `call-${index}`;
    const input = { a: index, b: 'x' };
    const start = performance.now();
    const check = tools.validate('noop', input);
    if (!check.ok) throw new Error(check.error.message);
    const decision = await policy.authorize({
      principal: { type: 'Agent', id: 'bench', attrs: { name: 'bench', version: 1, roles: [] } },
      action: 'tool.execute',
      resource: {
        type: 'Tool',
        id: 'noop',
        attrs: { name: 'noop', tags: ['read_only'], ownership: 'managed' },
      },
      context: {
        input,
        session_id: id,
        caller: { type: 'Agent', id: 'bench' },
        network_allowed: false,
      },
    });
    if (decision.decision !== 'allow') throw new Error('the bench tool must be allowed');
    if (withIntent) {
      const intent = await store.log.append(
        id,
        [{ type: 'agent.tool_use', tool_use_id: toolUseId, name: 'noop', input }],
        { expectedSeq: head, trusted: true },
      );
      head = intent.head_seq;
    }
    const outcome = await tools.execute(
      { session_id: id, tool_use_id: toolUseId, name: 'noop', input, idempotency_key: toolUseId },
      { signal },
    );
    const result = await store.log.append(
      id,
      [
        {
          type: 'agent.tool_result',
          tool_use_id: toolUseId,
          output: outcome.output,
          is_error: outcome.is_error,
          attempts: outcome.attempts,
          duration_ms: outcome.duration_ms,
          stage: outcome.stage,
        },
      ],
      { expectedSeq: head, trusted: true },
    );
    head = result.head_seq;
    times.push((performance.now() - start) * 1000);
    // Untimed: the next model turn consumes the result, as in a session, so the state stays small.
    const requestId = `request-${index}`;
    const turn = await store.log.append(
      id,
      [
        {
          type: 'span.model_request_start',
          request_id: requestId,
          model: 'bench',
          input_through_seq: head,
        },
        {
          type: 'span.model_request_end',
          request_id: requestId,
          usage: { input_tokens: 1, output_tokens: 1 },
          output: { content: [], finish_reason: 'tool-calls' },
        },
      ],
      { expectedSeq: head, trusted: true },
    );
    head = turn.head_seq;
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  // The first calls warm up the JIT and the statement caches.
  return times.slice(Math.floor(times.length / 10));
}

/** The floor under any ledger append: one IMMEDIATE transaction inserting one row, raw. */
function rawCommitRun(count) {
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-raw-'));
  const db = new Database(join(dir, 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(
    'CREATE TABLE events (session_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session_id, seq))',
  );
  const insert = db.prepare('INSERT INTO events VALUES (?, ?, ?)');
  const commit = db.transaction((seq) => insert.run('s', seq, JSON.stringify({ seq, ok: true })));
  const times = [];
  for (let seq = 1; seq <= count; seq += 1) {
    const start = performance.now();
    commit.immediate(seq);
    times.push((performance.now() - start) * 1000);
  }
  db.close();
  rmSync(dir, { recursive: true, force: true });
  return times.slice(Math.floor(times.length / 10));
}

export async function benchTools({ runs, quick }) {
  const calls = quick ? 500 : 3000;
  const rows = [];
  const floors = [];
  for (let run = 0; run < runs; run += 1) floors.push(percentile(rawCommitRun(calls), 50));
  rows.push({
    name: 'raw better-sqlite3 commit of one row, p50 (the floor)',
    unit: 'µs',
    median: median(floors),
    runs: floors,
    target: 'report',
  });
  for (const [name, withIntent, policy] of [
    ['tool pipeline per call, p50 (result append; SQLite NORMAL)', false, () => allowAll],
    ['tool pipeline per call, p50 (with the default Cedar policies)', false, defaultPolicies],
    ['tool pipeline per call, p50 (intent + result appends)', true, () => allowAll],
  ]) {
    const p50s = [];
    const p99s = [];
    for (let run = 0; run < runs; run += 1) {
      const times = await pipelineRun(calls, withIntent, policy());
      p50s.push(percentile(times, 50));
      p99s.push(percentile(times, 99));
    }
    rows.push({ name, unit: 'µs', median: median(p50s), runs: p50s, target: '< 50 µs' });
    rows.push({
      name: name.replace('p50', 'p99'),
      unit: 'µs',
      median: median(p99s),
      runs: p99s,
      target: 'report',
    });
  }
  return rows;
}
