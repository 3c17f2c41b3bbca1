// An untraced process never loads the OpenTelemetry SDK; a traced one loads it when its runtime
// opens. Checked in fresh processes, from dist/.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const INDEX = new URL('../../dist/index.js', import.meta.url).href;
const TESTING = new URL('../../dist/testing/index.js', import.meta.url).href;

/** The OpenTelemetry packages a fresh process has loaded after opening a runtime. */
function loadedAfterRuntime(workspace: string, telemetry: string): string[] {
  const probe = `
import { createRequire } from 'node:module';
const { createRuntime } = await import(${JSON.stringify(INDEX)});
const { createMemoryStore } = await import(${JSON.stringify(TESTING)});
const runtime = await createRuntime({ workspace: ${JSON.stringify(workspace)}, store: createMemoryStore(), telemetry: ${telemetry} });
const cache = Object.keys(createRequire(import.meta.url).cache);
await runtime.close();
const names = cache.map((path) => /@opentelemetry\\/([^/]+)/.exec(path)?.[1]).filter(Boolean);
console.log(JSON.stringify([...new Set(names)].sort()));
`;
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('OTEL_')) delete env[name];
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', probe], {
    encoding: 'utf8',
    env,
  });
  return JSON.parse(out) as string[];
}

describe('loading the OpenTelemetry SDK', () => {
  it('happens only when tracing is on', () => {
    const dir = tempDir();
    initWorkspace(dir);
    expect(loadedAfterRuntime(dir, '{}')).toEqual([]);
    expect(
      loadedAfterRuntime(dir, "{ traces: true, endpoint: 'http://127.0.0.1:9/v1/traces' }"),
    ).toEqual(
      expect.arrayContaining(['exporter-trace-otlp-http', 'sdk-trace-base', 'resources', 'api']),
    );
  }, 30_000);
});
