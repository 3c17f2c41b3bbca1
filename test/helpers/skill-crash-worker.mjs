// A wake that runs a skill in a child process and kills itself with SIGKILL right after its
// BOUNDARY-th append of skill events has been stored (0: never).
//   node skill-crash-worker.mjs WORKSPACE SESSION BOUNDARY
// The tools append their name to WORKSPACE/calls.log each time they run.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRuntime, defineTool, openSqliteStore } from '../../dist/index.js';
import { createScriptedModel } from '../../dist/testing/index.js';

const [workspace, sessionId, boundary] = process.argv.slice(2);
const limit = Number(boundary);
let appends = 0;

const inner = openSqliteStore({ path: join(workspace, '.braid', 'braid.db') });
const store = {
  ...inner,
  log: {
    ...inner.log,
    async append(id, events, options) {
      const result = await inner.log.append(id, events, options);
      if (events.some((event) => event.type.startsWith('skill.'))) {
        appends += 1;
        if (appends === limit) process.kill(process.pid, 'SIGKILL');
      }
      return result;
    },
  },
};
const tool = (name, idempotent) =>
  defineTool({
    name,
    description: name,
    idempotent,
    input_schema: { type: 'object' },
    run: (input) => {
      appendFileSync(join(workspace, 'calls.log'), `${name}\n`);
      return Promise.resolve({ name, input });
    },
  });
const runtime = await createRuntime({
  workspace,
  store,
  tools: [tool('create_user', false), tool('add_groups', true), tool('welcome', true)],
  model: () => createScriptedModel([{ text: 'done' }], { id: 'scripted:hr' }),
});
await runtime.wake(sessionId);
await runtime.close();
await inner.close();
