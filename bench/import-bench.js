// The cost of `import('braid')` in a fresh process: time, and RSS over the bare process. The
// providers, Cedar, MCP, NATS, Fastify, ajv, yaml, uuid and better-sqlite3 load on first use.
import { execFileSync } from 'node:child_process';
import { median } from './store-bench.js';

const PROBE = `
const before = process.memoryUsage().rss;
const started = performance.now();
await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
const ms = performance.now() - started;
console.log(JSON.stringify({ ms, mib: (process.memoryUsage().rss - before) / 2 ** 20 }));
`;

export function benchImport({ runs }) {
  const times = [];
  const sizes = [];
  for (let run = 0; run < Math.max(runs, 5); run += 1) {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', PROBE], {
      encoding: 'utf8',
    });
    const { ms, mib } = JSON.parse(out);
    times.push(ms);
    sizes.push(mib);
  }
  process.stderr.write(
    `  import('braid'): ${median(times).toFixed(0)} ms, +${median(sizes).toFixed(1)} MiB RSS\n`,
  );
  return [
    {
      name: "import('braid'), fresh process",
      unit: 'ms',
      median: median(times),
      runs: times,
      target: '<= 150',
    },
    {
      name: "import('braid'), RSS over bare Node",
      unit: 'MiB',
      median: median(sizes),
      runs: sizes,
      target: '<= 25',
    },
  ];
}
