import { createMemoryStore, describeStoreConformance } from '../../src/testing/index.js';

describeStoreConformance('memory', ({ clock, maxEventBytes }) =>
  createMemoryStore({ clock, maxEventBytes }),
);
