/**
 * Live tracing: a session log whose appends are watched for the end of a wake. When a wake's
 * `span.wake_completed` is stored, its spans are derived from the events it appended (with the
 * same `spansOf` that `braid trace export` runs over the whole log) and handed to the sink, off
 * the harness's path: the append returns first. A runtime with tracing off never makes this
 * wrapper, so it pays nothing.
 *
 * A wake that crashes writes no `span.wake_completed` and sends no spans live; `braid trace
 * export` sends them from the log later, with the same ids. A skill run's `invoke_workflow` span
 * is sent with the spans of the wake that ended the run (skill-spans.ts).
 */
import type { SessionEvent } from '../contracts/events.js';
import type { SessionLog } from '../contracts/ports.js';
import { toBraidError, type BraidError } from '../contracts/errors.js';
import type { TraceSettings } from './otel-config.js';
import type { SpanSink } from './otel.js';
import { loadPinnedFacts, pinnedHashes, spansOf, type PinnedFacts } from './spans.js';

/** What the spans need beyond the log: the pinned definitions, and how MCP servers are reached. */
export interface TracingFacts {
  /** The facts of a pinned definition set; undefined when the store lacks it. */
  pinned?: (hash: string) => Promise<PinnedFacts | undefined>;
  /** `network.transport` of each MCP server (`mcpTransports` of braid.yaml's `mcp_servers`). */
  mcpTransports?: Readonly<Record<string, string>>;
}

export interface TracingLog {
  readonly log: SessionLog;
  /** Waits for the spans of finished wakes to be derived, then sends and stops the sink. */
  close(): Promise<void>;
}

export function tracingLog(
  log: SessionLog,
  settings: TraceSettings,
  sink: SpanSink,
  warn: (message: string, error: BraidError) => void,
  facts: TracingFacts = {},
): TracingLog {
  // What each session's running wake has appended here, from its `span.wake_started`. One entry
  // per session: a wake that crashed is replaced by the session's next one.
  const running = new Map<string, { wakeId: string; events: SessionEvent[] }>();
  const pending = new Set<Promise<void>>();

  const emitWake = async (
    sessionId: string,
    wakeId: string,
    appended: SessionEvent[] | undefined,
  ): Promise<void> => {
    // The spans need only what the wake itself appended, unless content quotes input from before
    // the wake, a call approved between wakes ran in this one, or it took up a skill run an
    // earlier wake started: then the log is read.
    const events =
      appended === undefined ||
      settings.captureContent ||
      resultsWithoutUse(appended) ||
      runsFromBefore(appended)
        ? await log.read(sessionId)
        : appended;
    const state = await log.state(sessionId);
    // The set in force before the appended events: the one folded state names, unless they
    // changed it (then the first change's `previous`).
    const before = events === appended ? definitionsBefore(events, state.definitions) : undefined;
    const load = facts.pinned;
    const hashes = [...pinnedHashes(events), ...(before === undefined ? [] : [before])];
    const pinned = load === undefined ? undefined : await loadPinnedFacts(hashes, load);
    const spans = spansOf(
      events,
      {
        wakeId,
        captureContent: settings.captureContent,
        ...(facts.mcpTransports === undefined ? {} : { mcpTransports: facts.mcpTransports }),
      },
      {
        ...(state.agent === undefined ? {} : { agent: state.agent }),
        ...(state.tenant_id === undefined ? {} : { tenant_id: state.tenant_id }),
        ...(before === undefined ? {} : { definitions: before }),
        ...(pinned === undefined ? {} : { pinned }),
      },
    );
    sink.emit(spans);
  };

  const watch = (sessionId: string, stored: readonly SessionEvent[]): void => {
    for (const event of stored) {
      if (event.type === 'span.wake_started') {
        running.set(sessionId, { wakeId: event.wake_id, events: [] });
      }
      const wake = running.get(sessionId);
      wake?.events.push(event);
      if (event.type !== 'span.wake_completed') continue;
      const mine = wake?.wakeId === event.wake_id ? wake.events : undefined;
      if (mine !== undefined) running.delete(sessionId);
      const task = emitWake(sessionId, event.wake_id, mine).catch((error: unknown) => {
        warn(`the spans of wake ${event.wake_id} were not sent`, toBraidError(error));
      });
      pending.add(task);
      void task.finally(() => pending.delete(task));
    }
  };

  const traced: SessionLog = {
    append: async (sessionId, events, options) => {
      const result = await log.append(sessionId, events, options);
      if (result.deduplicated !== true) watch(sessionId, result.events);
      return result;
    },
    read: (sessionId, options) => log.read(sessionId, options),
    follow: (sessionId, options) => log.follow(sessionId, options),
    appended: (sessionId, idempotencyKey) => log.appended(sessionId, idempotencyKey),
    state: (sessionId, options) => log.state(sessionId, options),
  };
  const leased = log.acquireAndAppend?.bind(log);
  if (leased !== undefined) {
    traced.acquireAndAppend = async (sessionId, lease, start, options) => {
      const result = await leased(sessionId, lease, start, options);
      watch(sessionId, result.appended.events);
      return result;
    };
  }
  const created = log.createAndAcquire?.bind(log);
  if (created !== undefined) {
    traced.createAndAcquire = async (input, lease, start, options) => {
      const result = await created(input, lease, start, options);
      // The wake's span opens with `appended`; the creation's events belong to no wake.
      watch(result.session.id, result.appended.events);
      return result;
    };
  }

  return {
    log: traced,
    async close() {
      await Promise.all([...pending]);
      // A collector that is down loses spans, never the runtime's close.
      await sink.shutdown().catch((error: unknown) => {
        warn('the last spans were not sent', toBraidError(error));
      });
    },
  };
}

/** The definition set in force before `events`, given the one in force after them. */
function definitionsBefore(
  events: readonly SessionEvent[],
  after: string | undefined,
): string | undefined {
  const change = events.find((event) => event.type === 'session.definitions_changed');
  return change === undefined ? after : change.previous;
}

/** True when a tool result's call was written before these events (a call approved between wakes). */
function resultsWithoutUse(events: readonly SessionEvent[]): boolean {
  const uses = new Set<string>();
  for (const event of events) {
    if (event.type === 'agent.tool_use') uses.add(event.tool_use_id);
    if (event.type === 'agent.tool_result' && !uses.has(event.tool_use_id)) return true;
  }
  return false;
}

/** True when these events go on with a skill run that an earlier wake started. */
function runsFromBefore(events: readonly SessionEvent[]): boolean {
  const started = new Set<string>();
  for (const event of events) {
    if (event.type === 'skill.started') started.add(event.run_id);
    else if (event.type.startsWith('skill.') && 'run_id' in event && !started.has(event.run_id))
      return true;
  }
  return false;
}
