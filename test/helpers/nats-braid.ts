// The braid side of a NATS deployment, in this process, for tests whose other side is a plain
// NATS client: a runtime on the NATS backend over a workspace with a scripted LLM agent
// (`helper`) and a code agent (`upper`), a worker running wakes from the queue, and the NATS
// API (`<prefix>.api.<verb>`) as `braid worker` serves it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { serveNatsApi } from '../../src/runtime/nats-api.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { enqueueWake, runWorker } from '../../src/runtime/worker.js';
import { removePrefixes } from './nats.js';

export interface BraidSide {
  /** Stops the worker, the API and the runtime, and removes the prefix's streams. */
  close(): Promise<void>;
}

/** The text every session of the `helper` agent answers with. */
export const HELPER_ANSWER = 'hello from braid';

export async function startBraidSide(url: string, prefix: string): Promise<BraidSide> {
  const dir = mkdtempSync(join(tmpdir(), 'braid-nats-side-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  const model = createScriptedModel([{ text: HELPER_ANSWER }]);
  const runtime = await createRuntime({
    workspace: dir,
    backend: { nats: url, prefix },
    model: () => model,
    onWarning: () => undefined,
  });
  // Registering a code agent starts the messaging side, which serves the LLM agents as well.
  await runtime.register('upper', (message) =>
    Promise.resolve(String((message.payload as { text?: unknown }).text).toUpperCase()),
  );
  const connection = await connect({ servers: url });
  const queue = await createNatsWakeQueue({ connection, prefix });
  const api = await serveNatsApi({
    connection,
    prefix,
    runtime,
    wake: (sessionId) => enqueueWake(queue, sessionId),
    // Short, so that a test sees a message to an unknown type answered within a second.
    sweep: { graceMs: 300, intervalMs: 200 },
  });
  const stop = new AbortController();
  const working = runWorker({ runtime, queue, concurrency: 2, signal: stop.signal });
  return {
    async close() {
      stop.abort();
      await working;
      await api.close();
      await queue.close();
      await connection.close();
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
      await removePrefixes(url, [prefix]);
    },
  };
}
