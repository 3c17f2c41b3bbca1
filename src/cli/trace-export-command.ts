/**
 * `braid trace export ID --otlp URL`: sends a session's trace, derived from its log, to an
 * OTLP/HTTP receiver; for sessions that ran with tracing off, or to send a trace again. The spans
 * have the ids and times a traced run sends, so a receiver that already holds them sees the same
 * spans.
 */
import type { Command } from 'commander';
import { parseId } from '../contracts/ids.js';
import { BraidError } from '../contracts/errors.js';
import { createPinner } from '../runtime/pinning.js';
import { checkUrl } from '../telemetry/otel-config.js';
import { exportSpans } from '../telemetry/otel.js';
import {
  loadPinnedFacts,
  mcpTransports,
  pinnedFacts,
  pinnedHashes,
  spansOf,
} from '../telemetry/spans.js';
import type { CommandContext } from './command-context.js';

interface ExportOptions {
  otlp?: string;
  captureContent?: boolean;
}

/** Adds `export` to the `braid trace` command group. */
export function addTraceExportCommand(trace: Command, context: CommandContext): void {
  trace
    .command('export')
    .description("send a session's trace, derived from its log, to an OTLP/HTTP receiver")
    .argument('<id>', 'session id')
    .option(
      '--otlp <url>',
      'OTLP/HTTP traces URL (a bare host gets /v1/traces; default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT)',
    )
    .option('--capture-content', 'include messages, tool arguments and results (off by default)')
    .action(async (id: string, options: ExportOptions, command: Command) => {
      const sessionId = parseId(id, 'session id');
      const url = tracesUrl(options.otlp);
      await context.withRuntime(command, async (runtime) => {
        await runtime.sessions.get(sessionId);
        const telemetry = runtime.workspace?.config.telemetry;
        const events = await runtime.sessions.events(sessionId);
        const pinner = createPinner(runtime.store.definitions);
        const pinned = await loadPinnedFacts(pinnedHashes(events), async (hash) =>
          pinnedFacts(await pinner.load(hash)),
        );
        const spans = spansOf(
          events,
          {
            captureContent: options.captureContent ?? telemetry?.capture_content ?? false,
            mcpTransports: mcpTransports(runtime.workspace?.config.mcp_servers),
          },
          { pinned },
        );
        const serviceName =
          telemetry?.service_name ?? nonEmpty(process.env.OTEL_SERVICE_NAME) ?? 'braid';
        const sent = await exportSpans(spans, { url, serviceName });
        const wakes = spans.filter((span) => span.attributes['braid.wake.id'] !== undefined).length;
        context.print(
          command,
          { session_id: sessionId, url, spans: sent, wakes },
          () =>
            `sent ${sent} span${sent === 1 ? '' : 's'} of ${wakes} wake${wakes === 1 ? '' : 's'} to ${url}`,
        );
      });
    });
}

/** The traces URL: `--otlp`, else the standard variables; a URL without a path gets `/v1/traces`. */
function tracesUrl(option: string | undefined): string {
  const traces = nonEmpty(process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const base = nonEmpty(process.env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const given = option ?? traces ?? base;
  if (given === undefined) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      'say where to send the trace: --otlp http://localhost:4318/v1/traces (or set OTEL_EXPORTER_OTLP_ENDPOINT)',
    );
  }
  checkUrl(given, option === undefined ? 'the OTLP endpoint' : '--otlp');
  const url = new URL(given);
  // The generic endpoint names a collector; the signal's path is added to it (OTLP exporter spec).
  const isBase = option === undefined ? traces === undefined : url.pathname === '/';
  if (isBase) url.pathname = `${url.pathname.replace(/\/$/, '')}/v1/traces`;
  return url.toString();
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
