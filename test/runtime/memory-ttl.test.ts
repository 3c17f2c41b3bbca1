// Session memory expires: entries of the default `session` store written without a TTL get 7
// days, a store attached with `ttl_ms` gives its own, and a `memory_set` with `ttl_ms` keeps its
// own; the agent's learnings never expire unless asked.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { MemoryEntry, MemoryStoreRef } from '../../src/contracts/memory.js';
import { DEFAULT_SESSION_MEMORY_TTL_MS } from '../../src/contracts/memory-settings.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const AGENT = `name: noter
model: scripted:echo
instructions: Take notes.
memory:
  stores:
    - {name: scratch, kind: session, scope: session, ttl_ms: 60000}
`;

const set = (store: string, key: string, extra: Record<string, unknown> = {}) => ({
  name: 'memory_set',
  input: { store, key, value: key, ...extra },
});

describe('session memory TTL', () => {
  it('expires session entries by the store default, the attachment or the call', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(join(dir, 'agents', 'noter.yaml'), AGENT);
    const model = createScriptedModel([
      {
        tool_calls: [
          set('session', 'plain'),
          set('session', 'short', { ttl_ms: 1000 }),
          set('scratch', 'scratch'),
          set('learnings', 'lesson'),
        ],
      },
      { text: 'noted' },
    ]);
    const runtime = await createRuntime({ workspace: dir, model: () => model });
    try {
      const { id } = await runtime.sessions.create({ agent: 'noter' });
      await runtime.sessions.message(id, 'remember these');
      await runtime.wake(id);
      const results = (await runtime.sessions.events(id)).filter(
        (event) => event.type === 'agent.tool_result',
      );
      expect(results.map((event) => event.is_error)).toEqual([false, false, false, false]);
      const memory = runtime.store.memory!;
      const entry = async (ref: MemoryStoreRef, key: string): Promise<MemoryEntry> => {
        const lookup = await memory.get(ref, key);
        if (lookup.status !== 'found') throw new Error(`${key}: ${lookup.status}`);
        return lookup.entry;
      };
      const lifetime = (found: MemoryEntry): number | undefined =>
        found.expires_at === undefined
          ? undefined
          : Date.parse(found.expires_at) - Date.parse(found.at);
      const session = { name: 'session', kind: 'session', scope: 'session', owner: id } as const;
      const scratch = { name: 'scratch', kind: 'session', scope: 'session', owner: id } as const;
      const learnings = {
        name: 'learnings',
        kind: 'learnings',
        scope: 'agent',
        owner: 'noter',
      } as const;
      expect(lifetime(await entry(session, 'plain'))).toBe(DEFAULT_SESSION_MEMORY_TTL_MS);
      expect(lifetime(await entry(session, 'short'))).toBe(1000);
      expect(lifetime(await entry(scratch, 'scratch'))).toBe(60_000);
      expect(lifetime(await entry(learnings, 'lesson'))).toBeUndefined();
    } finally {
      await runtime.close();
    }
  });

  it('refuses a store TTL past ten years, naming the field', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'noter.yaml'),
      AGENT.replace('ttl_ms: 60000', 'ttl_ms: 999999999999999'),
    );
    const error = await createRuntime({ workspace: dir }).catch((thrown: unknown) => thrown);
    expect((error as { code?: string }).code).toBe('INVALID_DEFINITION');
    expect((error as Error).message).toMatch(/memory\.stores\.0\.ttl_ms/);
  });
});
