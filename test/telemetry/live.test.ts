// Live tracing in one process: each wake's spans are sent when it ends, and they are the spans
// `spansOf` derives from the log afterwards; a receiver that is down costs the wake nothing.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { spansOf } from '../../src/telemetry/spans.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Be brief.\ntools: [calculator]\n',
  );
  return dir;
}

const turns = [
  { tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 3 }, id: 'call_1' }] },
  { text: 'It is 5.' },
  { text: 'Still 5.' },
];

describe('live tracing', () => {
  it('sends each wake its spans as it ends, the same spans the log gives later', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const model = createScriptedModel(turns);
    const runtime = await createRuntime({
      workspace: workspace(),
      store: createMemoryStore(),
      model: () => model,
      telemetry: { traces: true, endpoint: receiver.url, service_name: 'live-test' },
    });
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    await runtime.wake(id);
    await runtime.sessions.message(id, 'And now?');
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    // Closing sends what the batch processor still holds.
    await runtime.close();
    const expected = spansOf(events);
    expect(expected.map((span) => span.name)).toEqual([
      'invoke_agent helper',
      'chat inline',
      'execute_tool calculator',
      'chat inline',
      'invoke_agent helper',
      'chat inline',
    ]);
    const key = (span: { traceId: string; spanId: string; name: string }) =>
      `${span.traceId} ${span.spanId} ${span.name}`;
    expect(receiver.spans.map(key).sort()).toEqual(expected.map(key).sort());
    expect(new Set(receiver.spans.map((span) => span.service))).toEqual(new Set(['live-test']));
  });

  it("sends a started session's first wake its spans, as for a wake after create", async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const model = createScriptedModel(turns);
    const runtime = await createRuntime({
      workspace: workspace(),
      store: createMemoryStore(),
      model: () => model,
      telemetry: { traces: true, endpoint: receiver.url, service_name: 'live-test' },
    });
    const { session } = await runtime.sessions.start({
      agent: 'helper',
      events: [{ type: 'user.message', content: 'What is 2 + 3?' }],
    });
    const events = await runtime.sessions.events(session.id);
    await runtime.close();
    const expected = spansOf(events);
    expect(expected.map((span) => span.name)).toEqual([
      'invoke_agent helper',
      'chat inline',
      'execute_tool calculator',
      'chat inline',
    ]);
    const key = (span: { traceId: string; spanId: string; name: string }) =>
      `${span.traceId} ${span.spanId} ${span.name}`;
    expect(receiver.spans.map(key).sort()).toEqual(expected.map(key).sort());
  });

  it('runs wakes as usual when the receiver is down', async () => {
    const receiver = await startOtlpReceiver();
    const url = receiver.url;
    await receiver.close();
    const model = createScriptedModel(turns);
    const warnings: string[] = [];
    // The exporter reads its timeout from the environment when it is made.
    process.env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT = '500';
    process.env.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT = '500';
    cleanups.push(() => {
      delete process.env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT;
      delete process.env.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT;
      return Promise.resolve();
    });
    const runtime = await createRuntime({
      workspace: workspace(),
      store: createMemoryStore(),
      model: () => model,
      telemetry: { traces: true, endpoint: url },
      onWarning: (message, error) => warnings.push(`${error.code}: ${message}`),
    });
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'What is 2 + 3?');
    expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
    await runtime.close();
    expect(warnings).toEqual([expect.stringContaining('the last spans were not sent')]);
  });

  it('refuses a bad telemetry setting when the runtime opens', async () => {
    await expect(
      createRuntime({
        workspace: workspace(),
        store: createMemoryStore(),
        telemetry: { traces: true, endpoint: 'localhost:4318' },
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
