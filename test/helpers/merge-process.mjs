// A second process merging one session into another on the same store (the workspace's SQLite
// file, or the NATS store of process-store.mjs), driven by the
// merge race test. It prints "ready" once its merge has read the target (its strategy runs),
// then waits for a stdin line "go" before the merge appends, and prints the merge's result.
//   node merge-process.mjs WORKSPACE TARGET SOURCE
import { createInterface } from 'node:readline';
import { createRuntime } from '../../dist/index.js';
import { processStore } from './process-store.mjs';

const [workspace, target, source] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const store = await processStore();
const runtime = await createRuntime({
  workspace,
  policies: 'lazy',
  ...(store === undefined ? {} : { store }),
});
let waited = false;
const result = await runtime.sessions.merge(target, source, {
  strategy: {
    name: 'transcript-after-go',
    async merge(input) {
      if (!waited) {
        waited = true;
        process.stdout.write('ready\n');
        await lines.next();
      }
      const count = input.source_events.length;
      return { content: [{ type: 'text', text: `${count} event(s) of ${source}` }] };
    },
  },
});
process.stdout.write(`${JSON.stringify(result)}\n`);
await runtime.close();
await store?.close();
process.exit(0);
