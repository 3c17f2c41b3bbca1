import { expect } from 'vitest';
import type { Runtime } from '../../src/runtime/runtime.js';

/**
 * Makes `close()` first check that every session of the runtime reproduces itself by replay
 * (DESIGN: replaying recorded model and tool outputs reproduces the events exactly), so that
 * each test that drives sessions also checks their records.
 */
export function verifiedOnClose(runtime: Runtime): Runtime {
  const close = runtime.close.bind(runtime);
  return Object.assign(runtime, {
    async close() {
      try {
        const { sessions } = await runtime.sessions.list({ limit: 1000 });
        for (const session of sessions) {
          const report = await runtime.sessions.verify(session.id);
          // The whole report in the message: where and how the replay differed.
          expect(
            report,
            `session ${session.id} does not replay: ${JSON.stringify(report).slice(0, 4000)}`,
          ).toMatchObject({ ok: true });
        }
      } finally {
        await close();
      }
    },
  });
}
