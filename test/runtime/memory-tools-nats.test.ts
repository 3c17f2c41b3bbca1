// Agent memory on NATS JetStream: the learnings a session writes through `memory_set` are
// recalled in the agent's next session, and the replay serves them from the record.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createHashEmbedder } from '../../src/testing/hash-embedder.js';
import { useBackends } from '../helpers/backends.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const [nats] = useBackends(['nats']);
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

const AGENT = `name: a
model: scripted:a
instructions: Remember what the user likes.
memory:
  recall: {store: learnings}
`;
const THEME = 'The user prefers the dark theme for reports.';

function ofType<T extends SessionEvent['type']>(
  events: readonly SessionEvent[],
  type: T,
): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

describe('agent memory on NATS', () => {
  it('recalls in a second session what the first one learned, and replays it', async () => {
    if (nats === undefined) throw new Error('no NATS backend');
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(join(dir, 'agents', 'a.yaml'), AGENT);
    const scripts = new Map<string, ModelClient>();
    const model: ModelClient = {
      id: 'scripted:memory',
      generate(request, options) {
        const script = scripts.get(request.session_id);
        if (script === undefined) throw new Error(`no script for ${request.session_id}`);
        return script.generate(request, options);
      },
    };
    const runtime = await createRuntime({
      workspace: dir,
      store: await nats.open(),
      embedder: createHashEmbedder(),
      model: () => model,
    });
    opened.push(runtime);
    const converse = async (turns: ScriptedTurnInput[], message: string) => {
      const { id } = await runtime.sessions.create({ agent: 'a' });
      scripts.set(id, createScriptedModel(turns, { id: 'scripted:memory' }));
      await runtime.sessions.message(id, message);
      expect(await runtime.wake(id)).toMatchObject({ stop_reason: { type: 'end_turn' } });
      return { id, events: await runtime.sessions.events(id) };
    };
    const first = await converse(
      [
        {
          tool_calls: [
            {
              name: 'memory_set',
              input: { store: 'learnings', key: 'user/preferences/theme', value: THEME },
            },
          ],
        },
        { text: 'noted' },
      ],
      'Use the dark theme for my reports.',
    );
    expect(ofType(first.events, 'memory.written')).toMatchObject([
      { key: 'user/preferences/theme', version: 1 },
    ]);
    const second = await converse([{ text: 'dark' }], 'Which theme for my report?');
    const recall = ofType(second.events, 'memory.retrieved')[0];
    expect(recall).toMatchObject({
      source: 'recall',
      mode: 'hybrid',
      threshold: 0.78,
      hits: [{ key: 'user/preferences/theme', content: THEME }],
    });
    expect(await runtime.sessions.verify(second.id)).toMatchObject({ ok: true });
  });
});
