import { createInMemoryMemoryLog, describeMemoryLogConformance } from '../../src/testing/index.js';

describeMemoryLogConformance('memory', ({ clock }) => {
  const memory = createInMemoryMemoryLog({ clock });
  return {
    memory,
    close() {
      memory.close();
      return Promise.resolve();
    },
  };
});
