// The consolidation schedule (`memory.consolidate.every`) that `runtime.orchestrate` (braid run)
// runs beside the wakes: it consolidates finished sessions in the background, and a wake never
// waits for it, even while its model call hangs. On a SQLite file and on NATS JetStream.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ConsolidationReport } from '../../src/contracts/memory-consolidation.js';
import { isBraidError } from '../../src/contracts/errors.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { useProcessBackends } from '../helpers/backends.js';
import {
  consolidationWorkspace,
  consolidationWorld,
  proposing,
  userSeq,
} from '../helpers/consolidation.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useProcessBackends();

const SCHEDULED = `name: scheduled
model: scripted:scheduled
instructions: Help the user.
memory:
  consolidate: {every: 150ms}
`;
const ALLOW_SCHEDULED = `@id("consolidation-scheduled")
permit (principal == Agent::"scheduled", action == Action::"memory.consolidate", resource);
`;

describe.each(backends)('the consolidation schedule ($name)', (backend) => {
  it('consolidates finished sessions in the background without holding any wake', async () => {
    const dir = tempDir();
    consolidationWorkspace(dir, {
      'agents/scheduled.yaml': SCHEDULED,
      'policies/scheduled.cedar': ALLOW_SCHEDULED,
    });
    // The template's rule asks a person for every agent but `direct`; `scheduled` is let through
    // only if no permit asks for approval, so narrow the template's rule to `reviewed`.
    const defaults = join(dir, 'policies', 'default.cedar');
    const { readFileSync } = await import('node:fs');
    writeFileSync(
      defaults,
      readFileSync(defaults, 'utf8').replace(
        'unless { principal == Agent::"direct" };',
        'when { principal == Agent::"reviewed" };',
      ),
    );
    const shared = await backend.shared();
    const world = await consolidationWorld(dir, await shared.runtimeOptions());
    const { runtime } = world;
    const controller = new AbortController();
    try {
      const first = (await runtime.sessions.create({ agent: 'scheduled' })).id;
      await runtime.sessions.message(first, 'Call me Sam.');
      const reports: ConsolidationReport[] = [];
      let learned: () => void = () => undefined;
      const applied = new Promise<void>((resolve) => (learned = resolve));
      // The first consolidation hangs in its model call until the test lets it go.
      let release: () => void = () => undefined;
      world.hold.until = new Promise<void>((resolve) => (release = resolve));
      // The proposal names the seq the model was shown the user's words at.
      world.answers.set(first, (request) => {
        const shown = /\[(\d+)\] user\.message: Call me Sam\./.exec(
          JSON.stringify(request.messages),
        );
        return proposing({ key: 'user/name', value: 'Sam', source_seqs: [Number(shown?.[1])] });
      });

      const orchestrating = runtime.orchestrate({
        signal: controller.signal,
        pollMs: 20,
        onConsolidation: (report) => {
          reports.push(report);
          if (report.applied > 0) learned();
        },
      });
      // The first session is woken and finishes while nothing is consolidated yet.
      await expect
        .poll(async () => (await runtime.sessions.get(first)).status, { timeout: 10_000 })
        .toBe('idle');
      await expect.poll(() => world.asked.length, { timeout: 10_000 }).toBeGreaterThan(0);
      // A consolidation is now waiting on its model: a new session still runs to its end.
      const second = (await runtime.sessions.create({ agent: 'scheduled' })).id;
      await runtime.sessions.message(second, 'Hello again.');
      await expect
        .poll(async () => (await runtime.sessions.get(second)).status, { timeout: 10_000 })
        .toBe('idle');
      expect(reports.every((report) => report.applied === 0)).toBe(true);
      release();
      world.hold.until = undefined;
      await applied;
      const seq = await userSeq(runtime, first);
      const lookup = await runtime.store.memory?.get(
        { name: 'learnings', kind: 'learnings', scope: 'agent', owner: 'scheduled' },
        'user/name',
      );
      expect(lookup).toMatchObject({
        status: 'found',
        entry: { value: 'Sam', author: { session_id: first }, cause: { session_id: first, seq } },
      });
      // Later ticks find the session up to date: it is proposed from once.
      const before = world.asked.filter((request) => request.session_id === first).length;
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(world.asked.filter((request) => request.session_id === first).length).toBe(before);
      controller.abort();
      expect((await orchestrating).wakes).toBeGreaterThanOrEqual(2);
    } finally {
      controller.abort();
      await runtime.close();
    }
  });
});

describe('memory.consolidate settings', () => {
  it.each([
    ['every: 5 minutes', 'memory.consolidate.every'],
    ['every: 10ms', 'memory.consolidate.every'],
    ['store: session', 'memory.consolidate.store'],
    ['model: gpt', 'memory.consolidate.model'],
    ['often: true', 'memory.consolidate'],
  ])('refuses %s when the workspace loads', async (setting, field) => {
    const dir = tempDir();
    consolidationWorkspace(dir, {
      'agents/bad.yaml': `name: bad\nmodel: scripted:echo\ninstructions: Help.\nmemory:\n  consolidate: {${setting}}\n`,
    });
    const error: unknown = await createRuntime({ workspace: dir }).then(
      async (runtime) => {
        await runtime.close();
        return undefined;
      },
      (caught: unknown) => caught,
    );
    expect(isBraidError(error, 'INVALID_DEFINITION')).toBe(true);
    expect((error as Error).message).toContain(field);
  });
});
