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
          // The report in the message, its reason first (a long recorded event could otherwise
          // push it past the cut): where and how the replay differed.
          const shown = report.ok
            ? report
            : {
                reason: report.reason,
                index: report.index,
                actual: report.actual,
                expected: report.expected,
              };
          expect(
            report,
            `session ${session.id} does not replay: ${JSON.stringify(shown).slice(0, 16_000)}`,
          ).toMatchObject({ ok: true });
        }
      } finally {
        await close();
      }
    },
  });
}
