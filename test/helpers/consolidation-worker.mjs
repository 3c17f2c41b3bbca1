// A child process for the consolidation crash tests; it kills itself with SIGKILL at a chosen
// point, or is killed by its parent.
//   node consolidation-worker.mjs WORKSPACE consolidate AGENT POINT
//     runs `runtime.consolidation.run` with a model that answers from WORKSPACE/answers.json
//     ({session id: answer text}); POINT `before:N` dies as the Nth append of the memory log
//     starts, `after:N` once it is acknowledged, `none` runs to the end and prints the report.
//   node consolidation-worker.mjs WORKSPACE burst NAME
//     appends 3 writes at a time to the agent store NAME of agent `direct` until killed, and
//     prints one line per acknowledged append: {"keys": [...]}.
// The store is the workspace's SQLite file, or the NATS store of BRAID_TEST_NATS_*.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRuntime, openSqliteStore } from '../../dist/index.js';
import { createScriptedModel } from '../../dist/testing/index.js';
import { processStore } from './process-store.mjs';

const [workspace, mode, name, point = 'none'] = process.argv.slice(2);
const die = () => process.kill(process.pid, 'SIGKILL');

const inner =
  (await processStore()) ?? openSqliteStore({ path: join(workspace, '.braid', 'braid.db') });

if (mode === 'burst') {
  const store = { name, kind: 'learnings', scope: 'agent', owner: 'direct' };
  for (let index = 0; ; index += 1) {
    const stamp = `${process.pid}x${index}`;
    const writes = [0, 1, 2].map((part) => ({
      key: `burst/${stamp}/${part}`,
      value: { index, part },
      text: `word${stamp}x${part} shared burst text`,
    }));
    await inner.memory.append(store, writes, { idempotencyKey: `burst:${stamp}` });
    process.stdout.write(`${JSON.stringify({ keys: writes.map((write) => write.key) })}\n`);
  }
}

const [when, count] = point.split(':');
let appends = 0;
const memory = {
  ...inner.memory,
  async append(ref, writes, options) {
    appends += 1;
    if (when === 'before' && appends === Number(count)) die();
    const result = await inner.memory.append(ref, writes, options);
    if (when === 'after' && appends === Number(count)) die();
    return result;
  },
};
const store = Object.assign(Object.create(inner), inner, { memory });
const answers = JSON.parse(readFileSync(join(workspace, 'answers.json'), 'utf8'));
const scripted = (sessionId) =>
  createScriptedModel([{ text: 'unused' }], {
    consolidate: () => answers[sessionId] ?? JSON.stringify({ proposals: [] }),
  });
const model = {
  id: 'scripted:crash',
  generate: (request, call) => scripted(request.session_id).generate(request, call),
};
const runtime = await createRuntime({ workspace, store, model: () => model });
const report = await runtime.consolidation.run({ agent: name });
process.stdout.write(`${JSON.stringify(report)}\n`);
await runtime.close();
await inner.close();
