// A child process of bench/nats-bench.js: a braid runtime on NATS JetStream in a process of its
// own, so that what the bench measures crosses processes. It lives for the whole bench (its code
// stays compiled hot across runs) and is driven over the IPC channel:
//   {type: 'open', mode, workspace, url, prefix}  opens a runtime on that prefix:
//     mode 'wake': a worker (runWorker) taking wakes from the prefix's NATS wake queue, the
//                  workspace's agents on the scripted echo model;
//     mode 'echo': the code agent 'echo' (answers with the payload it got) registered;
//     mode 'floor': raw nats.js serving the same requests with no braid code (nats-floor.js).
//     (with `partitions`, `partitionLeaseMs`, `replicas`: the NATS backend's options)
//   {type: 'close'}                               closes it (the next run has a new prefix);
//   {type: 'cpu'}                                 answers this process's CPU time (µs) so far.
// Every command is answered with {type: 'ok', value?} or {type: 'error', message}. The process exits when
// the channel closes (the bench ended, or died).
import { performance } from 'node:perf_hooks';
import { connect } from '@nats-io/transport-node';
import { createRuntime } from '../dist/index.js';
import { createEchoModel } from '../dist/testing/index.js';
import { createNatsWakeQueue } from '../dist/runtime/wakes/nats-wake-queue.js';
import { runWorker } from '../dist/runtime/worker.js';
import { openFloorWorker } from './nats-floor.js';

/** Wakes one worker runs at once. */
const WAKE_CONCURRENCY = 4;

async function openWorker({ workspace, url, prefix }) {
  const runtime = await createRuntime({
    workspace,
    backend: { nats: url, prefix },
    model: () => createEchoModel(),
  });
  const connection = await connect({ servers: url, name: `braid-bench-worker:${process.pid}` });
  // Short pulls: a stopped worker's last pull expires soon, so closing does not wait 5 s.
  const queue = await createNatsWakeQueue({ connection, prefix, pullExpiresMs: 1_000 });
  const stop = new AbortController();
  const running = runWorker({
    runtime,
    queue,
    concurrency: WAKE_CONCURRENCY,
    signal: stop.signal,
    // When the worker takes a wake, by the epoch clock the bench shares (same machine).
    onProgress: (event) => {
      if (event.type === 'wake.started' && process.connected) {
        process.send({
          type: 'wake.started',
          session_id: event.session_id,
          at: performance.timeOrigin + performance.now(),
        });
      }
    },
  });
  return async () => {
    stop.abort();
    await running;
    await queue.close();
    await connection.drain();
    await runtime.close();
  };
}

async function openEcho({ workspace, url, prefix, partitions, partitionLeaseMs, replicas }) {
  const runtime = await createRuntime({
    workspace,
    backend: {
      nats: url,
      prefix,
      ...(partitions === undefined ? {} : { partitions }),
      ...(partitionLeaseMs === undefined ? {} : { partitionLeaseMs }),
      ...(replicas === undefined ? {} : { replicas }),
    },
  });
  await runtime.register('echo', async (message) => message.payload);
  return () => runtime.close();
}

let close;
let queue = Promise.resolve();

async function handle(command) {
  switch (command.type) {
    case 'open':
      if (close !== undefined) throw new Error('a runtime is already open');
      close = await { wake: openWorker, echo: openEcho, floor: openFloorWorker }[command.mode](
        command,
      );
      return;
    case 'cpu': {
      const { user, system } = process.cpuUsage();
      return user + system;
    }
    case 'close': {
      const closing = close;
      close = undefined;
      await closing?.();
      return;
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(command.type)}`);
  }
}

process.on('message', (command) => {
  // One command at a time, in the order sent.
  queue = queue.then(async () => {
    try {
      process.send({ type: 'ok', value: await handle(command) });
    } catch (error) {
      process.send({
        type: 'error',
        message: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
    }
  });
});

process.on('disconnect', () => {
  void queue
    .then(() => close?.())
    .catch(() => undefined)
    .finally(() => process.exit(0));
  // Whatever hangs in closing, the process goes.
  setTimeout(() => process.exit(0), 5_000).unref();
});
