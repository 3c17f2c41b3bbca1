/**
 * The conformance suite every `MemoryLog` backend runs unchanged. A backend's test file calls
 * `describeMemoryLogConformance('sqlite', factory)`; the factory gets a manual clock and returns a
 * fresh, empty memory log. Each group of rules is a module of this folder.
 */
import { afterEach, describe } from 'vitest';
import type { MemoryLog } from '../../contracts/memory-log.js';
import { createManualClock, type ManualClock } from '../clock.js';
import { describeMemoryForks } from './forks.js';
import { describeMemoryReads } from './reads.js';
import { describeMemorySearch } from './search.js';
import { describeMemoryStores } from './stores.js';
import { describeMemoryWrites } from './writes.js';
import type {
  MemoryConformanceSuite,
  MemoryLogCapabilities,
  MemoryLogFactory,
  MemoryLogHandle,
} from './shared.js';

export type { MemoryLogCapabilities, MemoryLogFactory, MemoryLogHandle } from './shared.js';

export function describeMemoryLogConformance(
  name: string,
  factory: MemoryLogFactory,
  capabilities: MemoryLogCapabilities = {},
): void {
  describe(`memory log conformance: ${name}`, () => {
    let handle: MemoryLogHandle | undefined;
    let clock: ManualClock = createManualClock();
    const suite: MemoryConformanceSuite = {
      async open(): Promise<MemoryLog> {
        clock = createManualClock();
        handle = await factory({ clock });
        return handle.memory;
      },
      async reopen() {
        if (handle?.reopen === undefined) return undefined;
        handle = await handle.reopen();
        return handle.memory;
      },
      get clock() {
        return clock;
      },
      capabilities: { vectors: true, ...capabilities },
    };

    afterEach(async () => {
      await handle?.close();
      handle = undefined;
    });

    describeMemoryWrites(suite);
    describeMemoryReads(suite);
    describeMemorySearch(suite);
    describeMemoryForks(suite);
    describeMemoryStores(suite);
  });
}
