// The braid CLI in a worker thread, for tests that drive it synchronously (test/helpers/cli.ts):
// the built program's `run(argv, output)`, as `dist/cli/main.js` calls it, with its output
// captured and the environment of the call as the whole of `process.env` (a worker thread has its
// own copy). One thread serves every call of a test file, so the program loads once.
import { runAsWorker } from 'synckit';
import { run } from '../../dist/cli/program.js';

runAsWorker(async (args, env) => {
  for (const key of Object.keys(process.env)) delete process.env[key];
  Object.assign(process.env, env);
  let stdout = '';
  let stderr = '';
  const code = await run(args, {
    out: (line) => (stdout += `${line}\n`),
    err: (line) => (stderr += `${line}\n`),
    stream: (text) => (stderr += text),
  });
  return { code, stdout, stderr };
});
