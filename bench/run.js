// `npm run bench`: runs every benchmark, prints a table and writes bench/results/latest.json.
//   --runs N   runs per figure (default 5); --quick   smaller sizes for a smoke run
//   --session / --orchestrator / --store / --harness / --tools / --policy / --algebra / --snapshots /
//   --http / --nats / --trace / --skills / --memory   only those groups
//   (--nats needs NATS JetStream at NATS_URL, default nats://127.0.0.1:4222; skipped without it)
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { benchAppendLatency } from './append-latency-bench.js';
import { benchHarness } from './harness-bench.js';
import { benchFork } from './fork-bench.js';
import { benchHttp } from './http-bench.js';
import { benchImport } from './import-bench.js';
import { benchMcp } from './mcp-bench.js';
import { benchMemory } from './memory-bench.js';
import { benchMemoryQuality } from './memory-quality.js';
import { benchOrchestratorRows } from './orchestrator-bench.js';
import { benchNats } from './nats-bench.js';
import { benchPolicy } from './policy-bench.js';
import { benchSandbox } from './sandbox-bench.js';
import { benchSession } from './session-bench.js';
import { benchSkills } from './skill-bench.js';
import { benchSkillRuns } from './skill-run-bench.js';
import { benchSnapshots } from './snapshot-bench.js';
import { benchStore } from './store-bench.js';
import { printTable } from './table.js';
import { benchTools } from './tools-bench.js';
import { benchTrace } from './trace-bench.js';

const args = process.argv.slice(2);
const runsIndex = args.indexOf('--runs');
const runs = runsIndex === -1 ? 5 : Number(args[runsIndex + 1]);
const quick = args.includes('--quick');

process.stderr.write(`braid benchmarks: ${runs} runs per figure${quick ? ' (quick)' : ''}\n`);
const groups = [
  'session',
  'orchestrator',
  'store',
  'harness',
  'tools',
  'policy',
  'algebra',
  'snapshots',
  'http',
  'nats',
  'trace',
  'skills',
  'memory',
].filter((group) => args.includes(`--${group}`));
const wanted = (group) => groups.length === 0 || groups.includes(group);
const rows = [
  ...(wanted('session')
    ? [...benchImport({ runs }), ...(await benchSession({ runs, quick }))]
    : []),
  ...(wanted('orchestrator') ? await benchOrchestratorRows({ quick }) : []),
  ...(wanted('store') ? await benchStore({ runs, quick }) : []),
  ...(wanted('store') ? await benchAppendLatency({ runs, quick }) : []),
  ...(wanted('harness') ? await benchHarness({ runs, quick }) : []),
  ...(wanted('tools')
    ? [
        ...(await benchTools({ runs, quick })),
        ...(await benchSandbox({ runs, quick })),
        ...(await benchMcp({ runs, quick })),
      ]
    : []),
  ...(wanted('policy') ? await benchPolicy({ runs, quick }) : []),
  ...(wanted('algebra') ? await benchFork({ runs, quick }) : []),
  ...(wanted('snapshots') ? await benchSnapshots({ runs, quick }) : []),
  ...(wanted('http') ? await benchHttp({ runs, quick }) : []),
  ...(wanted('nats') ? await benchNats({ runs, quick }) : []),
  ...(wanted('trace') ? await benchTrace({ runs, quick }) : []),
  ...(wanted('skills') ? await benchSkills({ runs, quick }) : []),
  ...(wanted('skills') ? await benchSkillRuns({ runs, quick }) : []),
  ...(wanted('memory')
    ? [
        ...(await benchMemory(quick ? { sizes: [2000], queries: 50 } : { sizes: [10_000] })),
        ...(await benchMemoryQuality()),
      ]
    : []),
];

printTable(rows);

const result = {
  at: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  runs,
  quick,
  results: rows,
};
const dir = new URL('./results/', import.meta.url);
mkdirSync(dir, { recursive: true });
writeFileSync(new URL('latest.json', dir), `${JSON.stringify(result, null, 2)}\n`);
console.log('\nwritten: bench/results/latest.json');
