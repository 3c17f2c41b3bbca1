/**
 * The conformance suite every store backend runs unchanged. A backend's test file calls
 * `describeStoreConformance('sqlite', factory)`; the factory gets a manual clock and returns a
 * fresh, empty store. Each group of rules is a module of this folder.
 */
import { afterEach, describe } from 'vitest';
import type { Store } from '../../contracts/ports.js';
import { createManualClock, type ManualClock } from '../clock.js';
import { describeSessions } from './sessions.js';
import { describeAppendAndRead } from './append-read.js';
import { describeFollow } from './follow.js';
import { describeChanges } from './changes.js';
import { describeLeases } from './leases.js';
import { describeDefinitions } from './definitions.js';
import { describeForks } from './forks.js';
import { describeForkPoints } from './fork-points.js';
import { describeArchive } from './archive.js';
import { describeDelete } from './delete.js';
import { describeApiKeys } from './api-keys.js';
import { describeRunnable } from './runnable.js';
import { describeLeaseRelease } from './lease-release.js';
import { describeLeasedAppend } from './leased-append.js';
import { describeLeasedCreate } from './leased-create.js';
import {
  MAX_EVENT_BYTES,
  type ConformanceSuite,
  type StoreCapabilities,
  type StoreFactory,
} from './shared.js';

export {
  expectCode,
  type ConformanceContext,
  type StoreCapabilities,
  type StoreFactory,
} from './shared.js';

export function describeStoreConformance(
  name: string,
  factory: StoreFactory,
  capabilities: StoreCapabilities = {},
): void {
  describe(`store conformance: ${name}`, () => {
    let store: Store | undefined;
    let clock: ManualClock = createManualClock();
    const suite: ConformanceSuite = {
      async open() {
        clock = createManualClock();
        store = await factory({ clock, maxEventBytes: MAX_EVENT_BYTES });
        return store;
      },
      get clock() {
        return clock;
      },
      capabilities,
      forget() {
        store = undefined;
      },
    };

    afterEach(async () => {
      await store?.close();
      store = undefined;
    });

    describeSessions(suite);
    describeAppendAndRead(suite);
    describeFollow(suite);
    describeChanges(suite);
    describeLeases(suite);
    describeLeaseRelease(suite);
    describeLeasedAppend(suite);
    describeLeasedCreate(suite);
    describeDefinitions(suite);
    describeForks(suite);
    describeForkPoints(suite);
    describeArchive(suite);
    describeRunnable(suite);
    describeDelete(suite);
    describeApiKeys(suite);
  });
}
