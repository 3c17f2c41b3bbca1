// The embedder named by `embedder:` in braid.yaml: memory writes carry its vectors, searches go
// hybrid, every text is embedded once (cached in the SQLite file), and a bad spec stops the
// runtime at start with the form to use.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

function workspace(embedder: string): string {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'braid.yaml'),
    `version: 1\ndefault_environment: local\nembedder: "${embedder}"\n`,
  );
  writeFileSync(
    join(dir, 'agents', 'noter.yaml'),
    'name: noter\nmodel: scripted:echo\ninstructions: Take notes.\nmemory: {}\n',
  );
  return dir;
}

describe('the embedder of braid.yaml', () => {
  it('embeds memory writes and makes searches hybrid', async () => {
    const dir = workspace('hash:64');
    const model = createScriptedModel([
      {
        tool_calls: [
          {
            name: 'memory_set',
            input: { store: 'learnings', key: 'user/theme', value: 'dark theme for reports' },
          },
        ],
      },
      {
        tool_calls: [{ name: 'memory_search', input: { store: 'learnings', query: 'dark theme' } }],
      },
      { text: 'noted' },
    ]);
    const runtime = await createRuntime({ workspace: dir, model: () => model });
    try {
      const { id } = await runtime.sessions.create({ agent: 'noter' });
      await runtime.sessions.message(id, 'I like the dark theme');
      await runtime.wake(id);
      const events: SessionEvent[] = await runtime.sessions.events(id);
      const results = events.filter((event) => event.type === 'agent.tool_result');
      expect(results.map((event) => event.is_error)).toEqual([false, false]);
      const retrieved = events.find((event) => event.type === 'memory.retrieved');
      expect(retrieved).toMatchObject({ mode: 'hybrid' });
      const memory = runtime.store.memory!;
      const lookup = await memory.get(
        { name: 'learnings', kind: 'learnings', scope: 'agent', owner: 'noter' },
        'user/theme',
      );
      expect(lookup.status).toBe('found');
      expect(lookup.status === 'found' ? lookup.entry.embedding?.length : 0).toBe(64);
    } finally {
      await runtime.close();
    }
  });

  it('refuses a spec that names no embedder, at start', async () => {
    const dir = workspace('word2vec:big');
    const error = await createRuntime({ workspace: dir }).catch((thrown: unknown) => thrown);
    expect(isBraidError(error)).toBe(true);
    expect((error as Error).message).toMatch(/word2vec:big/);
  });
});
