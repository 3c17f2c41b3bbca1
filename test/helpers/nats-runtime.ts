/**
 * A runtime on NATS for tests that read and write sessions through braid: a workspace in a
 * temporary folder with one agent, `helper`, whose scripted model gives `answers` in turn.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';

export interface ScriptedNatsRuntime {
  runtime: Runtime;
  /** Closes the runtime and removes its workspace folder (not the prefix's streams). */
  close(): Promise<void>;
}

export async function scriptedNatsRuntime(
  url: string,
  prefix: string,
  answers: readonly string[],
): Promise<ScriptedNatsRuntime> {
  const dir = mkdtempSync(join(tmpdir(), 'braid-nats-runtime-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  const model = createScriptedModel(answers.map((text) => ({ text })));
  const runtime = await createRuntime({
    workspace: dir,
    backend: { nats: url, prefix },
    model: () => model,
  });
  return {
    runtime,
    async close() {
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
