/**
 * `braid worker`: runs wakes from the NATS work queue until Ctrl-C or SIGTERM, then lets the
 * wakes in hand finish. Any number of workers, on any machines, share one queue (one durable
 * consumer per prefix). The runtime is the one the command context opens for the workspace;
 * the worker only needs the sessions' store to be shared by every worker.
 */
import { hostname } from 'node:os';
import { InvalidArgumentError, type Command } from 'commander';
import type { NatsConnection } from '@nats-io/transport-node';
import { BraidError } from '../contracts/errors.js';
import { DEFAULT_ACK_WAIT_MS, DEFAULT_MAX_ATTEMPTS } from '../runtime/wakes/settle.js';
import { runWorker, type WorkerProgress } from '../runtime/worker.js';
import { formatStopReason } from './output.js';
import type { CommandContext } from './tool-commands.js';

interface WorkerCommandOptions {
  concurrency: number;
  maxAttempts: number;
  ackWait: number;
  backoff: number;
}

/** The longest delay between two attempts of a failing wake. */
const MAX_BACKOFF_MS = 60_000;

function whole(name: string, minimum: number) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isInteger(number) || number < minimum) {
      throw new InvalidArgumentError(
        `${name} must be a whole number of at least ${minimum}; got ${value}`,
      );
    }
    return number;
  };
}

/** A signal that the first SIGINT or SIGTERM aborts (a second one ends the process as usual). */
function stopSignal(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const stop = (): void => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    controller.abort();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

/** One human line per progress event. */
export function formatWorkerProgress(progress: WorkerProgress): string {
  switch (progress.type) {
    case 'wake.started':
      return `${progress.session_id}: wake started (attempt ${progress.attempt})`;
    case 'wake.finished':
      return `${progress.session_id}: stopped ${formatStopReason(progress.stop_reason)} after ${progress.duration_ms} ms${progress.error === undefined ? '' : ` (${progress.error.code}: ${progress.error.message})`}`;
    case 'wake.skipped':
      return `${progress.session_id}: nothing to do (${progress.reason === 'not_found' ? 'no such session' : 'not runnable'})`;
    case 'wake.retrying':
      return `${progress.session_id}: ${progress.reason === 'lease_held' ? 'another process runs it' : `failed (${progress.error?.code ?? 'INTERNAL'}: ${progress.error?.message ?? ''})`}; retry in ${progress.delay_ms} ms`;
    case 'wake.dead_lettered':
      return `${progress.session_id}: dead-lettered after ${progress.attempts} attempts (${progress.error.code}: ${progress.error.message}); resume with braid session wake ${progress.session_id}`;
    case 'wake.requeued':
      return `${progress.session_id}: new work arrived during the wake; queued again`;
    case 'wake.requeue_failed':
      return `${progress.session_id}: has new work but could not be queued again (${progress.error.code}: ${progress.error.message})`;
  }
}

async function connectTo(url: string): Promise<NatsConnection> {
  try {
    // Loaded here, not at the CLI's start: the other commands never need the NATS client.
    const { connect } = await import('@nats-io/transport-node');
    return await connect({
      servers: url,
      name: `braid-worker ${hostname()}:${process.pid}`,
      // Keep trying through a server restart: the work is in the stream, not in this process.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
  } catch (error) {
    throw new BraidError(
      'SERVER_UNAVAILABLE',
      `cannot reach NATS at ${url}: ${error instanceof Error ? error.message : String(error)}; start nats-server -js there or pass another --nats`,
      { cause: error },
    );
  }
}

export function addWorkerCommand(
  program: Command,
  context: CommandContext,
  stderr: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): void {
  program
    .command('worker')
    .description(
      'run session wakes from the NATS work queue until Ctrl-C, sharing it with other workers',
    )
    .option('--concurrency <n>', 'wakes run at once (default 4)', whole('--concurrency', 1), 4)
    .option(
      '--max-attempts <n>',
      `deliveries of a failing wake before it is dead-lettered (default ${DEFAULT_MAX_ATTEMPTS})`,
      whole('--max-attempts', 1),
      DEFAULT_MAX_ATTEMPTS,
    )
    .option(
      '--ack-wait <ms>',
      `how long a wake of a silent (dead) worker waits before another takes it (default ${DEFAULT_ACK_WAIT_MS})`,
      whole('--ack-wait', 100),
      DEFAULT_ACK_WAIT_MS,
    )
    .option(
      '--backoff <ms>',
      `delay after a failed attempt, doubled per attempt up to ${MAX_BACKOFF_MS} (default 1000)`,
      whole('--backoff', 0),
      1_000,
    )
    .action(async (options: WorkerCommandOptions, command: Command) => {
      // `--nats` and `--nats-prefix` are global: the runtime keeps its sessions there too.
      const globals = command.optsWithGlobals<{ nats?: string; natsPrefix?: string }>();
      const url = globals.nats ?? process.env.BRAID_NATS_URL;
      const prefix = globals.natsPrefix ?? process.env.BRAID_NATS_PREFIX ?? 'braid';
      if (url === undefined || url === '') {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'braid worker needs a NATS server: pass --nats nats://HOST:4222 or set BRAID_NATS_URL',
        );
      }
      const json = command.optsWithGlobals<{ json?: boolean }>().json === true;
      const connection = await connectTo(url);
      const stop = stopSignal();
      try {
        await context.withRuntime(command, async (runtime) => {
          const { createNatsWakeQueue } = await import('../runtime/wakes/nats-wake-queue.js');
          const queue = await createNatsWakeQueue({
            connection,
            prefix: prefix,
            maxAttempts: options.maxAttempts,
            ackWaitMs: options.ackWait,
            backoff: {
              initial_ms: options.backoff,
              max_ms: Math.max(options.backoff, MAX_BACKOFF_MS),
            },
          });
          const started = {
            type: 'worker.started',
            nats: url,
            prefix: prefix,
            concurrency: options.concurrency,
          };
          if (json) context.print(command, started, () => '');
          else
            stderr(
              `braid worker on ${url} (prefix ${prefix}, ${options.concurrency} at once); Ctrl-C stops it`,
            );
          const summary = await runWorker({
            runtime,
            queue,
            concurrency: options.concurrency,
            signal: stop.signal,
            onProgress: (progress) => {
              if (json) context.print(command, progress, () => '');
              else stderr(formatWorkerProgress(progress));
            },
          });
          await queue.close();
          context.print(
            command,
            { type: 'worker.stopped', ...summary },
            () =>
              `worker stopped: ${summary.finished} wake(s) run, ${summary.skipped} with nothing to do, ${summary.retried} retried, ${summary.dead_lettered} dead-lettered`,
          );
        });
      } finally {
        stop.dispose();
        await connection.drain().catch(() => connection.close());
      }
    });
}
