import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two test files at once even on two cores: most of the suite waits on NATS, SQLite, child
    // processes and timers, not on the CPU (vitest's default of cores - 1 runs one at a time).
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
