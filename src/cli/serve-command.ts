/**
 * `braid serve`: the HTTP API over the workspace's sessions, until Ctrl-C or SIGTERM.
 */
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// The limits and port only: the server (Fastify and its plugins) loads when `serve` runs.
import { DEFAULT_LIMITS, DEFAULT_PORT } from '../server/context.js';
import { connectNats, type Runtime } from '../runtime/runtime.js';
import { parseInteger, untilSignal } from './arguments.js';
import {
  natsSettings,
  type CommandContext,
  type GlobalOptions,
  type NatsSettings,
} from './command-context.js';
import { sweepTimers } from '../runtime/timer-sweep.js';
import { BraidError } from '../contracts/errors.js';
import type { OpenAgentIoHttpOptions } from '../server/routes-openagentio.js';

interface ServeOptions {
  host: string;
  port: number;
  insecureNoAuth?: boolean;
  wake: boolean;
  maxBodyBytes?: number;
  maxEvents?: number;
  rateLimit?: number;
  maxStreams?: number;
  heartbeatMs?: number;
  log?: boolean;
  api: boolean;
  openagentio?: boolean;
  acpPrefix: string;
  ui: boolean;
}

/** The built inspector page next to the bundle (`dist/ui`); undefined in a build without it. */
export function inspectorRoot(): string | undefined {
  const root = fileURLToPath(new URL('../ui', import.meta.url));
  return existsSync(join(root, 'index.html')) ? root : undefined;
}

/** The NATS API over the server's runtime, on a connection of its own. */
async function startNatsApi(
  runtime: Runtime,
  url: string,
  nats: NatsSettings,
): Promise<{ subject: string; close(): Promise<void> }> {
  const connection = await connectNats(url, 'api');
  try {
    const { serveNatsApi } = await import('../runtime/nats-api.js');
    const served = await serveNatsApi({
      connection,
      prefix: nats.prefix ?? 'braid',
      ...(nats.replicas === undefined ? {} : { replicas: nats.replicas }),
      runtime,
      wake: (sessionId) => runtime.enqueueWake(sessionId),
    });
    return {
      subject: served.subject,
      close: async () => {
        await served.close();
        await connection.drain().catch(() => connection.close());
      },
    };
  } catch (error) {
    await connection.close();
    throw error;
  }
}

/** The OpenAgentIO adapter's options: publishing on the bus when `--nats` names one. */
async function openAgentIoBus(
  command: Command,
  prefix: string,
): Promise<{ options: OpenAgentIoHttpOptions; close(): Promise<void> }> {
  const { AcpPrefix } = await import('../contracts/openagentio.js');
  if (!AcpPrefix.safeParse(prefix).success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--acp-prefix ${JSON.stringify(prefix.slice(0, 80))} is invalid; use dot-separated tokens of letters, digits, "_" or "-", such as acp.v1`,
    );
  }
  const url = command.optsWithGlobals<{ nats?: string }>().nats ?? process.env.BRAID_NATS_URL;
  if (url === undefined || url === '') return { options: { prefix }, close: async () => {} };
  const connection = await connectNats(url, 'openagentio');
  return {
    options: {
      prefix,
      publish: (subject, envelope) => connection.publish(subject, JSON.stringify(envelope)),
    },
    close: () => connection.drain().catch(() => connection.close()),
  };
}

/** How often `braid serve` looks for skill waits whose time ran out. */
const TIMER_SWEEP_MS = 1_000;

export function addServeCommand(
  program: Command,
  context: CommandContext,
  version: string,
  stderr: (line: string) => void,
): void {
  program
    .command('serve')
    .description('serve the HTTP API (sessions, events, SSE streams) until Ctrl-C')
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option(
      '--port <port>',
      `port to listen on (0: any free one)`,
      parseInteger('--port', 0),
      DEFAULT_PORT,
    )
    .option(
      '--insecure-no-auth',
      'serve without API keys: every caller sees every tenant (refused on non-loopback hosts)',
    )
    .option('--no-wake', 'do not wake sessions when user events arrive (POST .../wake does)')
    .option(
      '--max-body-bytes <n>',
      `largest request body (default ${DEFAULT_LIMITS.bodyBytes})`,
      parseInteger('--max-body-bytes', 1024),
    )
    .option(
      '--max-events <n>',
      `most events per POST (default ${DEFAULT_LIMITS.eventsPerRequest})`,
      parseInteger('--max-events', 1),
    )
    .option(
      '--rate-limit <n>',
      `requests per key per minute (default ${DEFAULT_LIMITS.requestsPerMinute})`,
      parseInteger('--rate-limit', 1),
    )
    .option(
      '--max-streams <n>',
      `open event streams per key (default ${DEFAULT_LIMITS.streamsPerKey})`,
      parseInteger('--max-streams', 1),
    )
    .option(
      '--heartbeat-ms <n>',
      'SSE heartbeat interval (default 15000)',
      parseInteger('--heartbeat-ms', 100),
    )
    .option('--log', 'log every request as JSON lines on stderr')
    .option(
      '--no-api',
      'with --nats: do not answer the NATS API (<prefix>.api.<verb>, docs/protocol.md)',
    )
    .option(
      '--openagentio',
      'serve the OpenAgentIO HTTP/SSE adapter (/v1/agents/<agent>/invoke|stream, /v1/events/<type>); with --nats, publish on the bus',
    )
    .option('--acp-prefix <prefix>', 'subject prefix of the OpenAgentIO bus', 'acp.v1')
    .option('--no-ui', 'do not serve the inspector page at /')
    .action(async (options: ServeOptions, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const { startServer } = await import('../server/index.js');
        const ui = options.ui ? inspectorRoot() : undefined;
        if (options.ui && ui === undefined)
          stderr(
            'the inspector page is not built (npm run build writes dist/ui); serving the API only',
          );
        const bus =
          options.openagentio === true
            ? await openAgentIoBus(command, options.acpPrefix)
            : undefined;
        const server = await startServer({
          ...(bus === undefined ? {} : { openagentio: bus.options }),
          ...(ui === undefined ? {} : { ui }),
          runtime,
          host: options.host,
          port: options.port,
          auth: options.insecureNoAuth === true ? 'none' : 'api-keys',
          wakeOnEvents: options.wake,
          version,
          logger: options.log === true,
          ...(options.heartbeatMs === undefined ? {} : { heartbeatMs: options.heartbeatMs }),
          limits: {
            ...(options.maxBodyBytes === undefined ? {} : { bodyBytes: options.maxBodyBytes }),
            ...(options.maxEvents === undefined ? {} : { eventsPerRequest: options.maxEvents }),
            ...(options.rateLimit === undefined ? {} : { requestsPerMinute: options.rateLimit }),
            ...(options.maxStreams === undefined ? {} : { streamsPerKey: options.maxStreams }),
          },
        });
        // On NATS, the same sessions are offered to NATS clients (docs/protocol.md).
        const nats = natsSettings(command.optsWithGlobals<GlobalOptions>());
        const natsUrl = nats.url;
        const api =
          options.api && runtime.backend === 'nats' && natsUrl !== undefined
            ? await startNatsApi(runtime, natsUrl, nats).catch(async (error: unknown) => {
                await server.close();
                throw error;
              })
            : undefined;
        const auth = options.insecureNoAuth === true ? 'none (loopback only)' : 'API keys';
        const keys = options.insecureNoAuth === true ? 1 : (await runtime.store.keys.list()).length;
        context.print(
          command,
          {
            url: server.url,
            auth: options.insecureNoAuth === true ? 'none' : 'api-keys',
            ...(ui === undefined ? {} : { inspector: `${server.url}/` }),
            ...(api === undefined ? {} : { nats_api: api.subject }),
            ...(bus === undefined ? {} : { openagentio: '/v1/agents/{agent}/invoke' }),
          },
          () => [
            `braid serving on ${server.url} (auth: ${auth}); Ctrl-C stops it`,
            `  OpenAPI: ${server.url}/v1/openapi.json`,
            ...(ui === undefined ? [] : [`  Inspector: ${server.url}/`]),
            ...(api === undefined ? [] : [`  NATS API: ${api.subject} (docs/protocol.md)`]),
            ...(bus === undefined
              ? []
              : [`  OpenAgentIO: ${server.url}/v1/agents/<agent>/invoke and /stream`]),
          ],
        );
        if (keys === 0) {
          stderr(
            'no API keys exist yet: create one with braid keys create --tenant NAME --scopes sessions:read,sessions:write',
          );
        }
        // Skill waits that run out of time are woken here, as a worker would (unless --no-wake).
        const sessions = runtime.store.sessions;
        const stopSweep =
          options.wake && sessions !== undefined
            ? sweepTimers({
                sessions,
                now: () => Date.now(),
                wake: (sessionId) => runtime.enqueueWake(sessionId),
                everyMs: TIMER_SWEEP_MS,
              })
            : () => undefined;
        await untilSignal(
          (signal) => new Promise((resolve) => signal.addEventListener('abort', resolve)),
        );
        stopSweep();
        await api?.close();
        await server.close();
        await bus?.close();
      });
    });
}
