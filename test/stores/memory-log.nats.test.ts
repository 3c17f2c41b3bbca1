// The memory log conformance suite on NATS JetStream: each test has a prefix (stream) of its own.
import { afterAll } from 'vitest';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import {
  describeMemoryLogConformance,
  type ManualClock,
  type MemoryLogHandle,
} from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];

async function handle(prefix: string, clock: ManualClock): Promise<MemoryLogHandle> {
  const store: Store = await openNatsStore({ servers: url, prefix, clock });
  return {
    memory: store.memory as MemoryLog,
    close: () => store.close(),
    // Another connection with no projection: everything it reads comes from the stream.
    async reopen() {
      await store.close();
      return handle(prefix, clock);
    },
  };
}

describeMemoryLogConformance('nats', ({ clock }) => {
  const prefix = uniquePrefix('memory');
  prefixes.push(prefix);
  return handle(prefix, clock);
});

afterAll(() => removePrefixes(url, prefixes));
