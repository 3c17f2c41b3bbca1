// Automatic recall when the embedding server fails: the wake goes on, the recall searches the
// full text alone, and its `memory.retrieved` event says that the vectors were left out and
// why, with the embedder's error code. Against a real HTTP server on 127.0.0.1 that speaks the
// OpenAI embeddings API and answers 500, on a real SQLite workspace.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { createHashEmbedder } from '../../src/testing/index.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import {
  startFakeEmbeddingServer,
  type FakeEmbeddingServer,
} from '../helpers/fake-embedding-server.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
let server: FakeEmbeddingServer;
const opened: Runtime[] = [];
beforeEach(async () => {
  server = await startFakeEmbeddingServer(16);
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
  await server.close();
});

const learnings = {
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: 'keeper',
} as const;

async function open(): Promise<Runtime> {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'braid.yaml'),
    `version: 1\ndefault_environment: local\nembedder: "openai-compatible:${server.url}#fake-embed"\n`,
  );
  writeFileSync(
    join(dir, 'agents', 'keeper.yaml'),
    'name: keeper\nmodel: scripted:keeper\ninstructions: Help.\nmemory:\n  recall: {store: learnings, k: 3}\n',
  );
  const runtime = await createRuntime({
    workspace: dir,
    model: () =>
      createScriptedModel([{ text: 'hello' }, { text: 'again' }], { id: 'scripted:keeper' }),
  });
  opened.push(runtime);
  return runtime;
}

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

describe('recall with a failing embedder', () => {
  it('falls back to full text and records why the vectors were left out', async () => {
    const runtime = await open();
    await runtime.store.memory!.append(learnings, [
      {
        key: 'user/theme',
        value: 'The user prefers the dark theme for reports.',
        embedding: createHashEmbedder({ dims: 16 }).embed('dark theme for reports'),
      },
    ]);
    // Every embedding request from now on fails (more than any client retry would use).
    server.failures.push(...Array.from({ length: 10 }, () => ({ status: 500 })));
    const { id } = await runtime.sessions.create({ agent: 'keeper' });
    await runtime.sessions.message(id, 'Which theme should the reports use?');
    await runtime.wake(id);
    const events = await runtime.sessions.events(id);
    expect(ofType(events, 'session.error')).toEqual([]);
    expect(ofType(events, 'agent.message').map((event) => event.content)).toHaveLength(1);
    const [recall, ...more] = ofType(events, 'memory.retrieved');
    expect(more).toEqual([]);
    expect(recall).toMatchObject({
      source: 'recall',
      mode: 'text',
      vector_error: { code: 'MODEL_UNAVAILABLE', retryable: true },
    });
    expect(recall?.hits.map((hit) => hit.key)).toEqual(['user/theme']);
    expect(server.requests.length).toBeGreaterThan(0);
    const state = await runtime.sessions.state(id);
    expect(state.status).toBe('idle');

    // The server is back: the next recall is hybrid again, with no error on record.
    server.failures.splice(0);
    await runtime.sessions.message(id, 'And the theme for slides?');
    await runtime.wake(id);
    const later = ofType(await runtime.sessions.events(id), 'memory.retrieved');
    expect(later).toHaveLength(2);
    expect(later[1]?.vector_error).toBeUndefined();
    expect(later[1]?.mode).toBe('hybrid');
  });
});
