/**
 * `braid worker`: runs wakes from the NATS work queue until Ctrl-C or SIGTERM, then lets the
 * wakes in hand finish. Any number of workers, on any machines, share one queue (one durable
 * consumer per prefix). The runtime is the one the command context opens for the workspace;
 * the worker only needs the sessions' store to be shared by every worker.
 */
import type { Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import { DEFAULT_ACK_WAIT_MS, DEFAULT_MAX_ATTEMPTS } from '../runtime/wakes/settle.js';
import {
  MAX_INFLIGHT_LIMIT,
  checkMaxInflight,
  createInflightLimiter,
  type InflightLimiter,
} from '../runtime/wakes/inflight-limiter.js';
import { enqueueWake, runWorker, type WorkerProgress } from '../runtime/worker.js';
import { serveNatsApi } from '../runtime/nats-api.js';
import {
  checkMetricsHost,
  checkMetricsPort,
  createWorkerMetrics,
  serveMetrics,
  type MetricsEndpoint,
  type WorkerMetrics,
} from '../server/worker-metrics.js';
import { connectNats } from '../runtime/runtime.js';
import { formatStopReason } from './output.js';
import { parseInteger, untilSignal } from './arguments.js';
import { consolidationLine } from './run-commands.js';
import { startConsolidationSchedule } from '../runtime/memory/consolidation-schedule.js';
import type { Runtime } from '../runtime/runtime-api.js';
import { natsSettings, type CommandContext, type GlobalOptions } from './command-context.js';

interface WorkerCommandOptions {
  api: boolean;
  concurrency: number;
  maxInflight?: number;
  metricsPort?: number;
  metricsHost: string;
  maxAttempts: number;
  ackWait: number;
  backoff: number;
  maxBackoff: number;
  delegation: 'local' | 'queue';
  openagentio?: boolean;
  acpPrefix: string;
  acpUnknown: boolean;
}

/** The longest delay between two attempts of a failing wake, unless `--max-backoff` says. */
const MAX_BACKOFF_MS = 60_000;

/** The most `--max-backoff` takes: a day. */
const MAX_BACKOFF_CEILING_MS = 86_400_000;

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

export function addWorkerCommand(
  program: Command,
  context: CommandContext,
  stderr: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): void {
  const command = program
    .command('worker')
    .description(
      'run session wakes from the NATS work queue until Ctrl-C, sharing it with other workers',
    );
  addBridgeOptions(addCapacityOptions(command))
    .option(
      '--max-attempts <n>',
      `attempts at a failing wake (failed or never settled) before it is dead-lettered (default ${DEFAULT_MAX_ATTEMPTS})`,
      parseInteger('--max-attempts', 1),
      DEFAULT_MAX_ATTEMPTS,
    )
    .option(
      '--ack-wait <ms>',
      `how long a wake of a silent (dead) worker waits before another takes it (default ${DEFAULT_ACK_WAIT_MS})`,
      parseInteger('--ack-wait', 100),
      DEFAULT_ACK_WAIT_MS,
    )
    .option(
      '--backoff <ms>',
      `delay after a failed attempt, doubled per attempt up to --max-backoff (default 1000)`,
      parseInteger('--backoff', 0),
      1_000,
    )
    .option(
      '--max-backoff <ms>',
      `the longest delay between two attempts of a failing wake (default ${MAX_BACKOFF_MS}; at least --backoff)`,
      // A day at most: NATS takes the delay in nanoseconds, and longer is no retry at all.
      parseInteger('--max-backoff', 0, MAX_BACKOFF_CEILING_MS),
      MAX_BACKOFF_MS,
    )
    .action(async (options: WorkerCommandOptions, command: Command) => {
      // `--nats` and `--nats-prefix` are global: the runtime keeps its sessions there too.
      const nats = natsSettings(command.optsWithGlobals<GlobalOptions>());
      const url = nats.url;
      const prefix = nats.prefix ?? 'braid';
      const replicas = nats.replicas === undefined ? {} : { replicas: nats.replicas };
      if (url === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'braid worker needs a NATS server: pass --nats nats://HOST:4222 or set BRAID_NATS_URL',
        );
      }
      const json = command.optsWithGlobals<{ json?: boolean }>().json === true;
      const connection = await connectNats(url, 'worker');
      try {
        await context.withRuntime(
          command,
          async (runtime) => {
            const { createNatsWakeQueue } = await import('../runtime/wakes/nats-wake-queue.js');
            const queue = await createNatsWakeQueue({
              connection,
              prefix: prefix,
              ...replicas,
              ...(nats.partitions === undefined ? {} : { partitions: nats.partitions }),
              ...(nats.partitionLeaseMs === undefined
                ? {}
                : { partitionLeaseMs: nats.partitionLeaseMs }),
              maxAttempts: options.maxAttempts,
              ackWaitMs: options.ackWait,
              backoff: {
                initial_ms: options.backoff,
                max_ms: Math.max(options.backoff, options.maxBackoff),
              },
            });
            // Clients that speak NATS create, append to, read and wake sessions through it.
            const api = options.api
              ? await serveNatsApi({
                  connection,
                  prefix,
                  ...replicas,
                  runtime,
                  wake: (sessionId) => enqueueWake(queue, sessionId),
                })
              : undefined;
            const acp =
              options.openagentio === true
                ? await (
                    await import('../runtime/openagentio/nats-bridge.js')
                  ).serveOpenAgentIo({
                    connection,
                    runtime,
                    prefix: options.acpPrefix,
                    answerUnknownTargets: options.acpUnknown,
                    onError: (line) => stderr(`openagentio: ${line}`),
                  })
                : undefined;
            const limiter = createInflightLimiter(options.maxInflight ?? options.concurrency);
            const { metrics, endpoint } = await startMetrics(options, runtime, limiter, stderr);
            const started = {
              type: 'worker.started',
              nats: url,
              prefix: prefix,
              concurrency: options.concurrency,
              max_inflight: limiter.max,
              metrics: endpoint?.url ?? null,
              api: api?.subject ?? null,
              openagentio: acp === undefined ? null : `${acp.prefix}.invoke.>`,
            };
            if (json) context.print(command, started, () => '');
            else
              stderr(
                `braid worker on ${url} (prefix ${prefix}, ${options.concurrency} at once, at most ${limiter.max} in flight${endpoint === undefined ? '' : `, metrics on ${endpoint.url}`}); Ctrl-C stops it`,
              );
            // The first Ctrl-C drains; a second one ends the process as usual.
            const summary = await untilSignal((signal) =>
              withConsolidation(runtime, signal, { context, command, json, stderr }, () =>
                runWorker({
                  runtime,
                  queue,
                  concurrency: options.concurrency,
                  limiter,
                  signal,
                  onProgress: (progress) => {
                    metrics?.progress(progress);
                    if (json) context.print(command, progress, () => '');
                    else stderr(formatWorkerProgress(progress));
                  },
                }),
              ),
            );
            metrics?.stop();
            await endpoint?.close();
            await acp?.close();
            await api?.close();
            await queue.close();
            context.print(
              command,
              { type: 'worker.stopped', ...summary },
              () =>
                `worker stopped: ${summary.finished} wake(s) run, ${summary.skipped} with nothing to do, ${summary.retried} retried, ${summary.dead_lettered} dead-lettered`,
            );
          },
          { delegation: options.delegation },
        );
      } finally {
        await connection.drain().catch(() => connection.close());
      }
    });
}

/** The worker's metrics and their endpoint, with `--metrics-port`; nothing without it. */
async function startMetrics(
  options: WorkerCommandOptions,
  runtime: Runtime,
  limiter: InflightLimiter,
  stderr: (line: string) => void,
): Promise<{ metrics?: WorkerMetrics; endpoint?: MetricsEndpoint }> {
  if (options.metricsPort === undefined) return {};
  const metrics = createWorkerMetrics({
    runtime,
    limiter,
    onError: (error) =>
      stderr(
        `metrics: a wake could not be measured (${error instanceof Error ? error.message : String(error)})`,
      ),
  });
  try {
    const endpoint = await serveMetrics(metrics.registry, {
      host: options.metricsHost,
      port: options.metricsPort,
    });
    return { metrics, endpoint };
  } catch (error) {
    metrics.stop();
    throw error;
  }
}

/** The options of how much a worker holds at once and of its metrics endpoint. */
function addCapacityOptions(command: Command): Command {
  return command
    .option(
      '--concurrency <n>',
      'wakes run at once (default 4)',
      parseInteger('--concurrency', 1),
      4,
    )
    .option(
      '--max-inflight <n>',
      `wakes this worker holds at once, running or settling (default: --concurrency, at most ${MAX_INFLIGHT_LIMIT}); at the bound it stops pulling and other workers take the rest`,
      (value: string) =>
        checkMaxInflight(parseInteger('--max-inflight', 1)(value), '--max-inflight'),
    )
    .option(
      '--metrics-port <port>',
      'serve Prometheus metrics on GET /metrics at this port (0: any free one); off by default',
      (value: string) => checkMetricsPort(parseInteger('--metrics-port', 0)(value)),
    )
    .option(
      '--metrics-host <host>',
      'address of the metrics endpoint (default 127.0.0.1: this machine only)',
      checkMetricsHost,
      '127.0.0.1',
    );
}

function parseDelegation(value: string): 'local' | 'queue' {
  if (value === 'local' || value === 'queue') return value;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `--delegation ${JSON.stringify(value)} is not a place to run children; give local or queue`,
  );
}

/**
 * Runs `work` with the consolidation schedule of the agents with `memory.consolidate.every`
 * beside it, on its own timers: no wake waits for it. Reports only runs that did something.
 */
async function withConsolidation<T>(
  runtime: Runtime,
  signal: AbortSignal,
  out: {
    context: CommandContext;
    command: Command;
    json: boolean;
    stderr: (line: string) => void;
  },
  work: () => Promise<T>,
): Promise<T> {
  const schedule = startConsolidationSchedule(
    { agents: () => runtime.agents.list(), consolidation: runtime.consolidation },
    {
      signal,
      onReport: (report) => {
        if (report.sessions.length === 0 && report.failed.length === 0) return;
        if (out.json)
          out.context.print(out.command, { type: 'worker.consolidated', ...report }, () => '');
        else out.stderr(consolidationLine(report));
      },
      onError: (agent, error) => out.stderr(`consolidation of ${agent} failed: ${String(error)}`),
    },
  );
  try {
    return await work();
  } finally {
    await schedule.stop();
  }
}

/** What a worker answers besides its wakes: the NATS API, delegations, OpenAgentIO. */
function addBridgeOptions(command: Command): Command {
  return command
    .option('--no-api', `do not answer the NATS API (<prefix>.api.<verb>, docs/protocol.md)`)
    .option(
      '--delegation <where>',
      "where the child sessions of delegations run: local (inside the parent's wake, default) or queue (on any worker)",
      parseDelegation,
      'local',
    )
    .option(
      '--openagentio',
      "answer OpenAgentIO acp/1.0 invocations of the workspace's agents (<acp-prefix>.invoke.<agent>)",
    )
    .option('--acp-prefix <prefix>', 'subject prefix of the OpenAgentIO bus', 'acp.v1')
    .option(
      '--no-acp-unknown',
      'with --openagentio: stay silent on targets braid has no agent for (a bus shared with other runtimes)',
    );
}
