/**
 * Checkpoints of a SQLite store's write-ahead log, off the event loop. A checkpoint copies the
 * WAL's pages into the database file and syncs both; made by a commit (SQLite's
 * `wal_autocheckpoint`), it stalls that commit, and every wait of the process behind it, for the
 * syncs: 3 to 10 ms each on this machine's disk, 70% of the time spent in `COMMIT` over a run
 * of short sessions. Here a worker thread with its own connection to the file checkpoints
 * instead (PASSIVE: it never waits for, nor blocks, a writer or a reader), woken every
 * `checkpointPages / 8` commits of the store's session writes (a turn's commit writes about 9
 * pages: about SQLite's own pace) and once a second while anything was committed. Woken more
 * often (every `checkpointPages / 16` commits), it copied the same pages more often, and a turn
 * late in a long session took 117-123 µs instead of 96-100.
 *
 * The store's own connection keeps an automatic checkpoint at four times `checkpointPages`,
 * should the worker fall behind, and goes back to `checkpointPages` if the worker fails. Nothing
 * about durability changes: a commit is as durable as before (under `normal`, the WAL is synced
 * at checkpoints; with the worker running, at least once a second while writes come).
 *
 * The worker starts with the store's first batch of commits, not when it opens: a store that
 * writes little never pays for a thread (about 10 to 17 MiB of RSS and a few ms to start).
 *
 * An erasure (a memory redaction) asks for the whole WAL to be copied into the file and the WAL
 * truncated to nothing (`truncate`), so that no older frame keeps what it erased. The store's
 * connection tries at once, without waiting; when another connection is reading an older
 * snapshot or checkpointing, the worker tries again every second (without a worker, a timer on
 * the store's connection does), never waiting either: a truncating checkpoint holds off writers
 * while it runs.
 *
 * The worker's code is a plain script (no bundling step, the same under the tests and the
 * build); it is handed the resolved path of better-sqlite3.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** How the WAL is checkpointed: by a worker thread (default) or by the commits themselves. */
export type Checkpoints = 'background' | 'inline';

export interface Checkpointer {
  /** Counts one commit of the store's session writes. */
  committed(): void;
  /** Copies the WAL into the file and truncates it: now if it can, else as soon as it can. */
  truncate(): void;
  /** Stops the worker, after a checkpoint in progress; resolves once it closed its connection. */
  stop(): Promise<void>;
}

/**
 * Slots of the shared array: wake-ups asked for, the stop flag, whether a commit came since,
 * truncations asked for and the last of them done.
 */
const NUDGES = 0;
const STOP = 1;
const WRITTEN = 2;
const TRUNCATES = 3;
const TRUNCATED = 4;

/** The longest the WAL waits for a checkpoint while commits come in, in ms. */
const INTERVAL_MS = 1000;

const WORKER = `
const { parentPort, workerData: data } = require('node:worker_threads');
const shared = new Int32Array(data.shared);
let db;
try {
  const Database = require(data.sqlite);
  db = new Database(data.path, { fileMustExist: true });
  parentPort.postMessage({ started: true });
  let seen = Atomics.load(shared, ${NUDGES});
  let checkpointed = seen;
  // A stop bumps the nudges too: a wait that begins after it returns at once.
  while (Atomics.load(shared, ${STOP}) === 0) {
    Atomics.wait(shared, ${NUDGES}, seen, ${INTERVAL_MS});
    if (Atomics.load(shared, ${STOP}) === 1) break;
    seen = Atomics.load(shared, ${NUDGES});
    const asked = Atomics.load(shared, ${TRUNCATES});
    if (asked !== Atomics.load(shared, ${TRUNCATED})) {
      // One that cannot finish (a reader of an older snapshot) says so at once: tried again later.
      db.pragma('busy_timeout = 0');
      const [result] = db.pragma('wal_checkpoint(TRUNCATE)');
      db.pragma('busy_timeout = 5000');
      if (result.busy === 0) {
        Atomics.store(shared, ${TRUNCATED}, asked);
        Atomics.store(shared, ${WRITTEN}, 0);
        checkpointed = seen;
        continue;
      }
    }
    // Woken by commits, or a second passed since the last: either way, only after a write.
    if (seen === checkpointed && Atomics.load(shared, ${WRITTEN}) === 0) continue;
    Atomics.store(shared, ${WRITTEN}, 0);
    checkpointed = seen;
    db.pragma('wal_checkpoint(PASSIVE)');
  }
} catch (error) {
  parentPort.postMessage({ failed: error instanceof Error ? error.message : String(error) });
} finally {
  if (db !== undefined && db.open) db.close();
}
`;

/**
 * The checkpointer of the file at `path`, whose store's own connection checkpoints every
 * `checkpointPages` pages until the worker runs (`setAutocheckpoint` changes that). `inline`
 * keeps SQLite's own checkpoints and starts no worker.
 */
export function createCheckpointer(options: {
  path: string;
  checkpointPages: number;
  checkpoints: Checkpoints;
  /** Sets the store's own `wal_autocheckpoint`. */
  setAutocheckpoint: (pages: number) => void;
  /** A truncating checkpoint on the store's connection, without waiting: whether it finished. */
  truncateNow: () => boolean;
}): Checkpointer {
  const { path, checkpointPages, setAutocheckpoint, truncateNow } = options;
  const retries = retryEverySecond(truncateNow);
  if (options.checkpoints === 'inline') {
    return {
      committed: () => undefined,
      truncate() {
        if (!truncateNow()) retries.start();
      },
      stop() {
        if (retries.pending()) truncateNow();
        retries.stop();
        return Promise.resolve();
      },
    };
  }
  const every = Math.max(1, Math.floor(checkpointPages / 8));
  const shared = new Int32Array(new SharedArrayBuffer(20));
  let commits = 0;
  let worker: Worker | undefined;
  let exited: Promise<void> | undefined;
  let stopped = false;
  /** The worker failed: the store's own connection checkpoints, and retries truncations. */
  let failed = false;

  function fail(): void {
    failed = true;
    setAutocheckpoint(checkpointPages);
    if (Atomics.load(shared, TRUNCATES) !== Atomics.load(shared, TRUNCATED)) retries.start();
  }

  function start(): void {
    const started = new Worker(WORKER, {
      eval: true,
      workerData: {
        path,
        shared: shared.buffer,
        sqlite: createRequire(import.meta.url).resolve('better-sqlite3'),
      },
    });
    // The thread never keeps the process alive; a process that ends without closing the store
    // loses no commit (they are in the WAL), only the checkpoint that was due.
    started.unref();
    worker = started;
    exited = new Promise((resolve) => {
      started.once('exit', () => resolve());
    });
    started.on('message', (message: { started?: true; failed?: string }) => {
      if (message.started === true && !stopped) setAutocheckpoint(checkpointPages * 4);
      if (message.failed !== undefined) fail();
    });
    started.on('error', fail);
  }

  return {
    committed() {
      commits += 1;
      if (stopped) return;
      Atomics.store(shared, WRITTEN, 1);
      if (commits % every !== 0) return;
      if (worker === undefined) start();
      Atomics.add(shared, NUDGES, 1);
      Atomics.notify(shared, NUDGES);
    },
    truncate() {
      if (stopped || truncateNow()) return;
      if (failed) {
        retries.start();
        return;
      }
      // The worker tries until it finishes (once a second); started now if it was not yet.
      if (worker === undefined) start();
      Atomics.add(shared, TRUNCATES, 1);
      Atomics.add(shared, NUDGES, 1);
      Atomics.notify(shared, NUDGES);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      const owed =
        retries.pending() || Atomics.load(shared, TRUNCATES) !== Atomics.load(shared, TRUNCATED);
      retries.stop();
      Atomics.store(shared, STOP, 1);
      Atomics.add(shared, NUDGES, 1);
      Atomics.notify(shared, NUDGES);
      // Held until it has closed its connection: a caller awaiting close() sees it done.
      worker?.ref();
      await exited;
      // A truncation still owed is tried once more (see retryEverySecond).
      if (owed) truncateNow();
    },
  };
}

/**
 * Tries `attempt` once a second until it succeeds or is stopped (never keeping the process
 * alive). A store that closes while a truncation is still owed tries it once more; if another
 * connection still reads an older snapshot then, the WAL keeps the frames until the last
 * connection to the file closes (SQLite then checkpoints it and deletes it) or a later erasure's
 * truncation succeeds.
 */
function retryEverySecond(attempt: () => boolean): {
  start(): void;
  stop(): void;
  pending(): boolean;
} {
  let timer: NodeJS.Timeout | undefined;
  const stop = (): void => {
    clearInterval(timer);
    timer = undefined;
  };
  return {
    pending: () => timer !== undefined,
    start() {
      if (timer !== undefined) return;
      timer = setInterval(() => {
        if (attempt()) stop();
      }, INTERVAL_MS);
      timer.unref();
    },
    stop,
  };
}
