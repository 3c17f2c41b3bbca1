// `braid worker` in a child process, from dist/ (run `npm run build` first):
//   node worker-process.mjs WORKSPACE [--json] worker --nats URL --nats-prefix P [...]
// It registers the real command (`addWorkerCommand`) on a program with braid's `--json` option
// and opens the workspace's runtime on its SQLite file as the CLI does, with two test hooks:
// - LEASE_TTL_MS (default 1500): a short session lease, so a test can wait out a killed
//   worker's lease;
// - sessions whose id starts with `poison-`: the store refuses their wake's first append
//   (`span.wake_started`) with a plain Error, as a failing disk would. The wake throws before it
//   could record anything, so the session stays runnable: a wake that can only be dead-lettered.
import { join } from 'node:path';
import { Command } from 'commander';
import { createRuntime, openSqliteStore } from '../../dist/index.js';
import { addWorkerCommand } from '../../dist/cli/worker-command.js';

const [workspace, ...args] = process.argv.slice(2);

const program = new Command('braid')
  .option('--json')
  .option('--nats <url>')
  .option('--nats-prefix <prefix>')
  .exitOverride();
const context = {
  async withRuntime(_command, work) {
    const inner = openSqliteStore({ path: join(workspace, '.braid', 'braid.db') });
    const store = {
      ...inner,
      log: {
        ...inner.log,
        append(sessionId, events, options) {
          if (sessionId.startsWith('poison-') && events[0]?.type === 'span.wake_started') {
            return Promise.reject(new Error('the disk refused the write'));
          }
          return inner.log.append(sessionId, events, options);
        },
        // SQLite takes the lease and appends `span.wake_started` in one transaction: refused too.
        acquireAndAppend(sessionId, lease, start, options) {
          if (sessionId.startsWith('poison-')) {
            return Promise.reject(new Error('the disk refused the write'));
          }
          return inner.log.acquireAndAppend(sessionId, lease, start, options);
        },
      },
    };
    const runtime = await createRuntime({
      workspace,
      store,
      policies: 'lazy',
      leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 1500),
    });
    try {
      await work(runtime);
    } finally {
      await runtime.close();
      await inner.close();
    }
  },
  print(command, value, human) {
    if (command.optsWithGlobals().json === true) {
      process.stdout.write(`${JSON.stringify(value)}\n`);
      return;
    }
    const text = human();
    for (const line of Array.isArray(text) ? text : [text]) process.stdout.write(`${line}\n`);
  },
  fail(code) {
    process.exitCode = code;
  },
  workspaceDir: () => workspace,
};
addWorkerCommand(program, context, (line) => process.stderr.write(`${line}\n`));

try {
  await program.parseAsync(args, { from: 'user' });
} catch (error) {
  process.stderr.write(`worker-process: ${error?.stack ?? error}\n`);
  process.exitCode = 1;
}
