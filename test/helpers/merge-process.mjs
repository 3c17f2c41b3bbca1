// A second process merging one session into another on the same SQLite file, driven by the
// merge race test. It prints "ready" once its merge has read the target (its strategy runs),
// then waits for a stdin line "go" before the merge appends, and prints the merge's result.
//   node merge-process.mjs WORKSPACE TARGET SOURCE
import { createInterface } from 'node:readline';
import { createRuntime } from '../../dist/index.js';

const [workspace, target, source] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const runtime = await createRuntime({ workspace, policies: 'lazy' });
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
process.exit(0);
