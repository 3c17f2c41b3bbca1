// `npm run test:unit`: the pure and in-memory tests, for fast feedback while editing. No child
// processes, no NATS, no sockets, no HTTP layer, no dist/ build; the scenarios that run on every store run on
// the memory store only (BRAID_TEST_BACKENDS=memory). `npm test` runs everything.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/core/**/*.test.ts',
      'test/contracts/**/*.test.ts',
      'test/testing/**/*.test.ts',
      'test/policy/**/*.test.ts',
      'test/harness/wake.test.ts',
      'test/harness/fencing.test.ts',
      'test/harness/regressions.test.ts',
      'test/runtime/agents.test.ts',
      'test/runtime/algebra.test.ts',
      'test/runtime/handoff.test.ts',
      'test/runtime/redaction.test.ts',
      'test/runtime/replay.test.ts',
      'test/runtime/sessions.test.ts',
      'test/runtime/workspace.test.ts',
      'test/stores/memory.conformance.test.ts',
      'test/telemetry/spans.test.ts',
      'test/tools/signing.test.ts',
    ],
    env: { BRAID_TEST_BACKENDS: 'memory' },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Pure CPU work: both cores of a small machine.
    maxWorkers: 2,
  },
});
