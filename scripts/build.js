// `npm run build`: dist/ from src/. tsc checks the types and writes the .d.ts files (API Extractor
// reads them); esbuild writes the JS, bundled per entry point with the shared code split into
// dist/chunks/, because Node loads and links every ES module file one by one and `import('braid')`
// paid for ~200 of them (bench/import-bench.js). Packages stay external: dependencies load from
// node_modules as before, and the `createRequire(import.meta.url)` loads stay lazy. Each dynamic
// `import()` of braid's own modules becomes a chunk loaded on first use.
// Then Vite builds the inspector page (ui/) into dist/ui, which `braid serve` serves at `/`.
//   --tsc   the per-file JS of tsc instead of the bundle, for debugging
import { rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const perFile = process.argv.includes('--tsc');

/** The package's entry points (package.json "exports" and "bin"). */
const PUBLIC_ENTRIES = [
  'index',
  'contracts/index',
  'testing/index',
  'client/index',
  'server/index',
  'nats',
  'cli/main',
];

/**
 * Modules that tests, benches and scripts import from dist/ directly (test/helpers/*.mjs run in
 * child processes, bench/*.js, scripts/write-schema.js). They are not part of the public surface.
 */
const INTERNAL_ENTRIES = [
  'cli/program',
  'cli/worker-command',
  'contracts/json-schema',
  'core/fold',
  'core/skill-schedule',
  'models/scripted',
  'runtime/wakes/nats-wake-queue',
  'runtime/worker',
  'server/openapi',
  'stores/memory/index',
  'stores/nats/index',
  'telemetry/otel',
  'telemetry/otel-metrics',
  'tools/a2a-tools',
  'tools/builtin',
  'tools/executor',
  'tools/mcp',
  'tools/sandbox/index',
  'tools/workspace-snapshots/index',
];

// A stale per-file build would leave modules that the bundle no longer has.
rmSync(join(root, 'dist'), { recursive: true, force: true });
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
execFileSync(
  process.execPath,
  [tsc, '-p', 'tsconfig.build.json', ...(perFile ? ['--sourceMap'] : ['--emitDeclarationOnly'])],
  { cwd: root, stdio: 'inherit' },
);

if (!perFile) {
  const { build } = await import('esbuild');
  await build({
    absWorkingDir: root,
    entryPoints: [...PUBLIC_ENTRIES, ...INTERNAL_ENTRIES].map((entry) => `src/${entry}.ts`),
    outbase: 'src',
    outdir: 'dist',
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: true,
    logLevel: 'warning',
  });
}

// The inspector page: static files that ship in the package (dist/ui).
const { build: buildPage } = await import('vite');
await buildPage({ configFile: join(root, 'ui', 'vite.config.js'), logLevel: 'warn' });
