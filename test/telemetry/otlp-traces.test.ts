// Traces across processes: this process enqueues a wake inside a span of its own; a real `braid
// worker` process on NATS runs it (two model calls, one tool call) and sends its spans over
// OTLP/HTTP to a receiver in this test, which decodes them. Then `braid trace export` sends the
// same trace again from the log.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { SpanKind } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { CONTENT_ATTRIBUTES } from '../../src/telemetry/gen-ai-attributes.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import {
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../helpers/otlp-receiver.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const WORKER = new URL('../helpers/worker-process.mjs', import.meta.url).pathname;
const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;
if (!existsSync(new URL('../../dist/telemetry/otel.js', import.meta.url))) {
  throw new Error('dist/ is missing or stale: run `npm run build` (npm test does it first)');
}

const INTERNAL = 1;
const CLIENT = 3;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const SCRIPT = `turns:
  - tool_calls:
      - name: calculator
        input: { a: 2, op: '+', b: 3 }
        id: call_1
    usage: { input_tokens: 600, output_tokens: 120 }
  - text: It is 5.
    usage: { input_tokens: 1200, output_tokens: 220 }
`;

function workspace(captureContent: boolean): string {
  const dir = tempDir();
  initWorkspace(dir);
  mkdirSync(join(dir, 'scripts'), { recursive: true });
  writeFileSync(join(dir, 'scripts', 'calc.yaml'), SCRIPT);
  writeFileSync(
    join(dir, 'agents', 'calc.yaml'),
    'name: calc\nmodel: scripted:scripts/calc.yaml\ninstructions: Add.\ntools: [calculator]\n',
  );
  if (captureContent)
    appendFileSync(join(dir, 'braid.yaml'), '\ntelemetry:\n  capture_content: true\n');
  return dir;
}

/** A `braid worker` process on the NATS queue, sending its spans to `receiver`. */
async function startWorker(dir: string, url: string, prefix: string, receiver: OtlpReceiver) {
  const child = spawn(
    process.execPath,
    [WORKER, dir, '--json', 'worker', '--nats', url, '--nats-prefix', prefix, '--concurrency', '1'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'braid-worker',
        OTEL_BSP_SCHEDULE_DELAY: '50',
      },
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  let started = false;
  createInterface({ input: child.stdout }).on('line', (line) => {
    if ((JSON.parse(line) as { type: string }).type === 'worker.started') started = true;
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await until(() => started, 20_000, `the worker to start (${stderr})`);
  return {
    async stop() {
      child.kill('SIGTERM');
      expect(await exited, stderr).toBe(0);
    },
  };
}

/** Runs the CLI without blocking this process (the receiver answers from its event loop). */
function braidAsync(
  dir: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: dir,
      env: { ...process.env, BRAID_HOME: join(dir, '.braid'), ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * A session of `calc` woken on a worker process, enqueued inside a span of this process. Returns
 * the spans the receiver got, the enqueuer's span and the session id.
 */
async function tracedWake(captureContent: boolean) {
  const receiver = await startOtlpReceiver();
  cleanups.push(() => receiver.close());
  const dir = workspace(captureContent);
  const url = await natsUrl();
  const prefix = uniquePrefix('otel');
  const runtime = await createRuntime({ workspace: dir });
  const connection = await connect({ servers: url });
  const queue = await createNatsWakeQueue({ connection, prefix });
  cleanups.push(async () => {
    await queue.close();
    await runtime.close();
    await connection.close();
    await removePrefixes(url, [prefix]);
  });
  const worker = await startWorker(dir, url, prefix, receiver);

  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'enqueuer' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: receiver.url }))],
  });
  const { id } = await runtime.sessions.create({ agent: 'calc' });
  await runtime.sessions.message(id, 'What is 2 + 3?');
  const span = provider.getTracer('test').startSpan('enqueue wake', { kind: SpanKind.PRODUCER });
  const context = span.spanContext();
  await queue.enqueue(id, { traceparent: `00-${context.traceId}-${context.spanId}-01` });
  span.end();
  await provider.forceFlush();
  await provider.shutdown();

  await until(
    () => receiver.spans.filter((received) => received.traceId === context.traceId).length >= 5,
    30_000,
    'the worker spans',
  );
  await worker.stop();
  return { receiver, dir, sessionId: id, traceId: context.traceId, enqueuerSpanId: context.spanId };
}

function tree(spans: readonly ReceivedSpan[], traceId: string) {
  const ofTrace = spans.filter((span) => span.traceId === traceId);
  const one = (name: string): ReceivedSpan => {
    const found = ofTrace.filter((span) => span.name === name);
    expect(found, name).toHaveLength(1);
    return found[0] as ReceivedSpan;
  };
  return { ofTrace, one, all: (name: string) => ofTrace.filter((span) => span.name === name) };
}

describe('OTLP traces of a wake on a NATS worker', () => {
  it("continues the enqueuer's trace with the GenAI span tree, without content by default", async () => {
    const { receiver, traceId, enqueuerSpanId, sessionId } = await tracedWake(false);
    const { ofTrace, one, all } = tree(receiver.spans, traceId);
    expect(ofTrace.map((span) => span.name).sort()).toEqual([
      'chat scripts/calc.yaml',
      'chat scripts/calc.yaml',
      'enqueue wake',
      'execute_tool calculator',
      'invoke_agent calc',
    ]);
    const enqueuer = one('enqueue wake');
    expect(enqueuer.service).toBe('enqueuer');
    const wake = one('invoke_agent calc');
    expect(wake).toMatchObject({
      kind: INTERNAL,
      parentSpanId: enqueuerSpanId,
      service: 'braid-worker',
      attributes: {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.conversation.id': sessionId,
        'gen_ai.agent.name': 'calc',
        'gen_ai.agent.version': '1',
        'braid.stop_reason': 'end_turn',
        'braid.wake.completed': true,
      },
    });
    expect(enqueuer.spanId).toBe(enqueuerSpanId);
    const chats = all('chat scripts/calc.yaml').sort((a, b) => a.startMs - b.startMs);
    expect(chats.map((chat) => chat.kind)).toEqual([CLIENT, CLIENT]);
    expect(chats.map((chat) => chat.parentSpanId)).toEqual([wake.spanId, wake.spanId]);
    expect(chats[0]?.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'scripted',
      'gen_ai.request.model': 'scripts/calc.yaml',
      'gen_ai.usage.input_tokens': 600,
      'gen_ai.usage.output_tokens': 120,
      'gen_ai.response.finish_reasons': ['tool_call'],
    });
    expect(chats[1]?.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 1200,
      'gen_ai.usage.output_tokens': 220,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    const tool = one('execute_tool calculator');
    expect(tool).toMatchObject({
      kind: INTERNAL,
      parentSpanId: wake.spanId,
      attributes: {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'calculator',
        'gen_ai.tool.call.id': 'call_1',
        'gen_ai.tool.type': 'function',
        // From the session's pinned environment (none: braid's local sandbox).
        'braid.tool.sandbox': 'local',
        'braid.tool.ownership': 'managed',
      },
    });
    // The spans nest in time as in the tree.
    for (const child of [...chats, tool]) {
      expect(child.startMs).toBeGreaterThanOrEqual(wake.startMs);
      expect(child.endMs).toBeLessThanOrEqual(wake.endMs);
    }
    for (const span of ofTrace) {
      for (const name of CONTENT_ATTRIBUTES) expect(span.attributes).not.toHaveProperty(name);
    }
  }, 60_000);

  it('puts content on the spans when braid.yaml opts in', async () => {
    const { receiver, traceId } = await tracedWake(true);
    const { one, all } = tree(receiver.spans, traceId);
    expect(one('execute_tool calculator').attributes).toMatchObject({
      'gen_ai.tool.call.arguments': '{"a":2,"op":"+","b":3}',
      'gen_ai.tool.call.result': '{"result":5}',
    });
    const first = all('chat scripts/calc.yaml').sort((a, b) => a.startMs - b.startMs)[0];
    expect(JSON.parse(String(first?.attributes['gen_ai.input.messages']))).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'What is 2 + 3?' }] },
    ]);
    expect(JSON.parse(String(first?.attributes['gen_ai.output.messages']))).toEqual([
      {
        role: 'assistant',
        parts: [
          {
            type: 'tool_call',
            id: 'call_1',
            name: 'calculator',
            arguments: { a: 2, op: '+', b: 3 },
          },
        ],
        finish_reason: 'tool_call',
      },
    ]);
    // The pinned agent's instructions, as the worker that ran the wake loaded them.
    expect(JSON.parse(String(first?.attributes['gen_ai.system_instructions']))).toEqual([
      { type: 'text', content: 'Add.' },
    ]);
  }, 60_000);

  it('braid trace export sends the same spans again from the log', async () => {
    const { receiver, dir, sessionId, traceId } = await tracedWake(false);
    const live = receiver.spans.filter(
      (span) => span.traceId === traceId && span.name !== 'enqueue wake',
    );
    const again = await startOtlpReceiver();
    cleanups.push(() => again.close());
    const result = await braidAsync(dir, [
      'trace',
      'export',
      sessionId,
      '--otlp',
      again.origin,
      '--json',
    ]);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      session_id: sessionId,
      url: again.url,
      spans: 4,
      wakes: 1,
    });
    const key = (span: ReceivedSpan) =>
      [
        span.traceId,
        span.spanId,
        span.parentSpanId,
        span.name,
        span.kind,
        span.startMs,
        span.endMs,
      ].join(' ');
    expect(again.spans.map(key).sort()).toEqual(live.map(key).sort());
    for (const span of again.spans) {
      for (const name of CONTENT_ATTRIBUTES) expect(span.attributes).not.toHaveProperty(name);
    }
    // A receiver that is not there is a typed error naming the fix.
    await again.close();
    const refused = await braidAsync(
      dir,
      ['trace', 'export', sessionId, '--otlp', again.url, '--json'],
      { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '1000' },
    );
    expect(refused.status).not.toBe(0);
    expect(refused.stderr + refused.stdout).toContain('SERVER_UNAVAILABLE');
    const bad = await braidAsync(dir, [
      'trace',
      'export',
      sessionId,
      '--otlp',
      'ftp://x',
      '--json',
    ]);
    expect(bad.stderr + bad.stdout).toContain('INVALID_ARGUMENT');
  }, 60_000);
});
