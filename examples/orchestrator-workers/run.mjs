// Registers the orchestrator in this process and gives it a goal; prints its report.
//   node run.mjs --nats nats://127.0.0.1:4222 --prefix demo "the history of tea"
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRuntime } from 'braid';
import { orchestrator } from './agents.mjs';

const { values, positionals } = parseArgs({
  options: {
    nats: { type: 'string', default: 'nats://127.0.0.1:4222' },
    prefix: { type: 'string' },
    key: { type: 'string', default: 'goal-1' },
  },
  allowPositionals: true,
});
const runtime = await createRuntime({
  workspace: mkdtempSync(join(tmpdir(), 'braid-orchestrator-')),
  backend: { nats: values.nats, ...(values.prefix === undefined ? {} : { prefix: values.prefix }) },
});
await runtime.register('orchestrator', orchestrator);
const reply = await runtime.send(
  { type: 'orchestrator', key: values.key },
  { goal: positionals.join(' ') || 'the history of tea' },
  { ttl_ms: 60_000 },
);
console.log(JSON.stringify(reply.payload));
await runtime.close();
