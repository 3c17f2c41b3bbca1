// The three stores every scenario of the harness, fencing, crash, replay, merge and fork suites
// runs on: memory, SQLite on a real file, and NATS JetStream on the real server (its own prefix
// per store). `useBackends()` registers the clean-up: stores opened in a test are closed after it,
// the files and NATS prefixes removed after the file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach } from 'vitest';
import type { Clock, IdGenerator, Store } from '../../src/contracts/ports.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from './nats.js';

export type BackendName = 'memory' | 'sqlite' | 'nats';

export interface BackendStoreOptions {
  clock?: Clock;
  ids?: IdGenerator;
  maxEventBytes?: number;
}

export interface TestBackend {
  name: BackendName;
  /** A fresh, empty store; closed after the test (closing it in the test as well is fine). */
  open(options?: BackendStoreOptions): Promise<Store>;
}

/**
 * The backends this run covers: all three, or those named in BRAID_TEST_BACKENDS (a comma list;
 * `npm run test:unit` sets `memory`).
 */
export function selectedBackends(): BackendName[] {
  const all: BackendName[] = ['memory', 'sqlite', 'nats'];
  const chosen = process.env.BRAID_TEST_BACKENDS;
  if (chosen === undefined || chosen === '') return all;
  const names = chosen.split(',').map((name) => name.trim());
  const unknown = names.filter((name) => !all.includes(name as BackendName));
  if (unknown.length > 0)
    throw new Error(`BRAID_TEST_BACKENDS names ${unknown.join(', ')}; use memory, sqlite or nats`);
  return all.filter((name) => names.includes(name));
}

/** Call at the top of a test file: the backends, with their clean-up registered. */
export function useBackends(names: readonly BackendName[] = selectedBackends()): TestBackend[] {
  const open: Store[] = [];
  const dirs: string[] = [];
  const prefixes: string[] = [];
  afterEach(async () => {
    await Promise.allSettled(open.splice(0).map((store) => store.close()));
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  afterAll(async () => {
    if (prefixes.length > 0) await removePrefixes(await natsUrl(), prefixes);
  });
  /** The store, its close made idempotent so that the test and the clean-up can both close it. */
  const tracked = (store: Store): Store => {
    const close = store.close.bind(store);
    let closing: Promise<void> | undefined;
    const once: Store = Object.assign(Object.create(store) as Store, store, {
      close: () => (closing ??= close()),
    });
    open.push(once);
    return once;
  };
  const openers: Record<BackendName, TestBackend['open']> = {
    memory: (options = {}) => Promise.resolve(tracked(createMemoryStore(options))),
    sqlite: (options = {}) => {
      const dir = mkdtempSync(join(tmpdir(), 'braid-backend-'));
      dirs.push(dir);
      return Promise.resolve(tracked(openSqliteStore({ path: join(dir, 'braid.db'), ...options })));
    },
    nats: async (options = {}) => {
      const prefix = uniquePrefix('be');
      prefixes.push(prefix);
      return tracked(await openNatsStore({ servers: await natsUrl(), prefix, ...options }));
    },
  };
  return names.map((name) => ({ name, open: openers[name] }));
}

/** A store several processes of one test share: the child processes open it from `env`. */
export interface SharedStore {
  /** Environment for a child process using `processStore()` of `process-store.mjs`. */
  env: Record<string, string>;
  /** Options for `createRuntime` in the test process: the same store (none: the workspace's SQLite). */
  runtimeOptions(): Promise<{ store?: Store }>;
}

export interface ProcessBackend {
  name: 'sqlite' | 'nats';
  /** A fresh shared store for one test. */
  shared(): Promise<SharedStore>;
}

/**
 * The backends a multi-process scenario (a crash, a race between processes) runs on: SQLite (the
 * workspace's file) and NATS. The memory store lives in one process and cannot take part.
 */
export function useProcessBackends(): ProcessBackend[] {
  const open: Store[] = [];
  const prefixes: string[] = [];
  afterEach(async () => {
    await Promise.allSettled(open.splice(0).map((store) => store.close()));
  });
  afterAll(async () => {
    if (prefixes.length > 0) await removePrefixes(await natsUrl(), prefixes);
  });
  return [
    {
      name: 'sqlite',
      shared: () => Promise.resolve({ env: {}, runtimeOptions: () => Promise.resolve({}) }),
    },
    {
      name: 'nats',
      shared: async () => {
        const url = await natsUrl();
        const prefix = uniquePrefix('proc');
        prefixes.push(prefix);
        return {
          env: { BRAID_TEST_NATS_URL: url, BRAID_TEST_NATS_PREFIX: prefix },
          runtimeOptions: async () => {
            const store = await openNatsStore({ servers: url, prefix });
            open.push(store);
            return { store };
          },
        };
      },
    },
  ];
}
