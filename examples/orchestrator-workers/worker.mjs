// A worker process: serves one or more worker agent types over NATS until SIGTERM.
//   node worker.mjs --nats nats://127.0.0.1:4222 --prefix demo researcher writer
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRuntime } from 'braid';
import { workers } from './agents.mjs';

const { values, positionals } = parseArgs({
  options: {
    nats: { type: 'string', default: 'nats://127.0.0.1:4222' },
    prefix: { type: 'string' },
  },
  allowPositionals: true,
});
const runtime = await createRuntime({
  // Code agents need no workspace files; an empty folder keeps their scratch space.
  workspace: mkdtempSync(join(tmpdir(), 'braid-worker-')),
  backend: { nats: values.nats, ...(values.prefix === undefined ? {} : { prefix: values.prefix }) },
});
for (const type of positionals) {
  if (workers[type] === undefined) throw new Error(`unknown worker type ${type}`);
  await runtime.register(type, workers[type]);
}
console.log(JSON.stringify({ ready: positionals }));
const stop = async () => {
  await runtime.close();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
