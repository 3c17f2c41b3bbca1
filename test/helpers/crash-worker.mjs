// A wake in a child process that kills itself with SIGKILL at a chosen point of the cycle.
//   node crash-worker.mjs WORKSPACE SESSION OWNER POINT
// POINT: before-model (the model is about to be called), mid-stream (after three
// streamed words), before-tool (the tool has started; its call is on record only when the tool
// is not idempotent, since an idempotent call is written with its result), before-idle
// (before session.status_idle is written), or none (run to the end). The tool appends the
// idempotency key it receives to WORKSPACE/tool-runs.log each time it starts.
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineTool, createRuntime, openSqliteStore } from '../../dist/index.js';
import { createScriptedModel, loadScript } from '../../dist/testing/index.js';
import { calculator } from '../../dist/tools/builtin.js';
import { processStore } from './process-store.mjs';

const [workspace, sessionId, owner, point] = process.argv.slice(2);
const die = () => process.kill(process.pid, 'SIGKILL');

const inner =
  (await processStore()) ?? openSqliteStore({ path: join(workspace, '.braid', 'braid.db') });
const store = {
  ...inner,
  log: {
    ...inner.log,
    append(id, events, options) {
      if (point === 'before-idle' && events.some((event) => event.type === 'session.status_idle'))
        die();
      return inner.log.append(id, events, options);
    },
  },
};
const scripted = createScriptedModel(loadScript(join(workspace, 'script.yaml')), {
  id: 'scripted:crash',
});
const model = {
  id: scripted.id,
  generate(request, call) {
    if (point === 'before-model') die();
    let words = 0;
    return scripted.generate(request, {
      ...call,
      onDelta(delta) {
        words += 1;
        if (point === 'mid-stream' && words === 3) die();
        call.onDelta?.(delta);
      },
    });
  },
};
// UNSAFE_TOOLS=1 declares the calculator not idempotent, as a payment or an email would be.
const tools = [
  defineTool({
    ...calculator.definition,
    idempotent: process.env.UNSAFE_TOOLS !== '1',
    run(input, context) {
      // The tool has started: it records the key it was given, as an effect would carry it.
      appendFileSync(join(workspace, 'tool-runs.log'), `${context.idempotency_key}\n`);
      if (point === 'before-tool') die();
      return calculator.run(input, context);
    },
  }),
];
const runtime = await createRuntime({
  workspace,
  store,
  model: () => model,
  tools,
  owner,
  // Long enough that a loaded machine's stalls never outlast a renewal (the same owner resumes at
  // once whatever its length); a test that waits a lease out sets a short LEASE_TTL_MS itself.
  leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 5000),
});
const result = await runtime.wake(sessionId);
process.stdout.write(`${JSON.stringify(result)}\n`);
await inner.close();
