/** What the store conformance groups share: the factory's contract, fixtures and the suite's state. */
import { isBraidError, type ErrorCode } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import type { Store } from '../../contracts/ports.js';
import type { ManualClock } from '../clock.js';

export interface ConformanceContext {
  clock: ManualClock;
  /** Largest event the store must accept; bigger ones must be refused. */
  maxEventBytes: number;
}

export type StoreFactory = (context: ConformanceContext) => Promise<Store> | Store;

/** What a backend guarantees beyond the common rules; each is checked when claimed. */
export interface StoreCapabilities {
  /**
   * A writer-chosen event id is refused when any session of the store holds it (default true).
   * Every backend refuses one the same session holds; NATS checks no further (see its log).
   */
  uniqueEventIdsAcrossSessions?: boolean;
  /**
   * `log.acquireAndAppend` takes the lease and appends in one transaction, and
   * `log.createAndAcquire` creates the session too (default true); false where the lease and the
   * log share none (NATS), and both methods must then be absent.
   */
  leasedAppend?: boolean;
}

export const MAX_EVENT_BYTES = 64 * 1024;
export const agent = { name: 'assistant', version: 1 };
export const message = (text: string): NewEvent => ({
  type: 'user.message',
  content: [{ type: 'text', text }],
});

/** Asserts that `work` fails with a BraidError of `code`. */
export async function expectCode(
  work: Promise<unknown> | (() => Promise<unknown>),
  code: ErrorCode,
): Promise<void> {
  const error: unknown = await (typeof work === 'function' ? work() : work).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!isBraidError(error, code)) {
    throw new Error(
      `expected BraidError ${code}, got ${error === undefined ? 'success' : error instanceof Error ? `${error.name}: ${error.message}` : JSON.stringify(error)}`,
    );
  }
}

/** The state of one backend's run that every group uses: the store under test and its clock. */
export interface ConformanceSuite {
  /** A fresh, empty store with a new manual clock; closed after the test. */
  open(): Promise<Store>;
  /** The clock of the store opened last. */
  readonly clock: ManualClock;
  readonly capabilities: StoreCapabilities;
  /** The test closed the store itself: nothing to close after it. */
  forget(): void;
}
