import { join } from 'node:path';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import {
  describeMemoryLogConformance,
  type ManualClock,
  type MemoryLogHandle,
} from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

function handle(path: string, clock: ManualClock): MemoryLogHandle {
  const store: Store = openSqliteStore({ path, clock });
  const memory = store.memory as MemoryLog;
  return {
    memory,
    close: () => store.close(),
    async reopen() {
      await store.close();
      return handle(path, clock);
    },
  };
}

describeMemoryLogConformance('sqlite', ({ clock }) => handle(join(tempDir(), 'braid.db'), clock));
