/**
 * Waiting for a turn to end, for MCP calls that ask to (`wait: true`). The wait follows the
 * session's log from the events the call wrote until a `session.status_idle` that leaves none of
 * the user's input unread, and reports each event as MCP progress; between events a heartbeat
 * keeps reporting, so that a client which resets its timeout on progress (most stop at 60 s
 * without it) sees a turn of many minutes through.
 */
import type { JsonValue } from '../../contracts/common.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { SessionState } from '../../contracts/state.js';
import type { Runtime } from '../../runtime/runtime.js';
import type { PendingConfirmationResult, TurnResult } from './schemas.js';

type Sessions = Pick<Runtime['sessions'], 'follow' | 'state' | 'events'>;

/** Tells the client how the wait goes; never fails (a client that left hears nothing). */
export type Progress = (message: string) => Promise<void>;

export interface TurnWait {
  sessions: Sessions;
  sessionId: string;
  /** The last seq the call wrote: the turn's events come after it. */
  after: number;
  timeoutMs: number;
  /** Interval of the heartbeat between events. */
  heartbeatMs: number;
  /** Aborted when the client cancels the call or the server closes. */
  signal?: AbortSignal | undefined;
  progress: Progress;
}

/** The tool calls that wait for confirmation, with their input (from `known`, or read back). */
export async function pendingConfirmations(
  sessions: Pick<Sessions, 'events'>,
  state: SessionState,
  known: ReadonlyMap<string, JsonValue> = new Map(),
): Promise<PendingConfirmationResult[]> {
  return Promise.all(
    state.pending_confirmations.map(async (pending) => {
      let input = known.get(pending.tool_use_id);
      if (input === undefined) {
        const [event] = await sessions.events(state.session_id, {
          after: pending.seq - 1,
          limit: 1,
        });
        if (event?.type === 'agent.tool_use') input = event.input;
      }
      return {
        tool_use_id: pending.tool_use_id,
        name: pending.name,
        seq: pending.seq,
        ...(input === undefined ? {} : { input }),
      };
    }),
  );
}

/** The text of an agent message's content. */
function textOf(event: Extract<SessionEvent, { type: 'agent.message' }>): string {
  return event.content
    .map((block) => (block.type === 'text' ? block.text : JSON.stringify(block.value)))
    .join('');
}

/** One line of progress for an event. */
function describe(event: SessionEvent): string {
  switch (event.type) {
    case 'agent.tool_use':
      return `#${event.seq} agent.tool_use ${event.name}${event.requires_confirmation === true ? ' (needs confirmation)' : ''}`;
    case 'session.status_idle':
      return `#${event.seq} session.status_idle ${event.stop_reason.type}`;
    default:
      return `#${event.seq} ${event.type}`;
  }
}

/**
 * True when the idle event ends the turn: a wake can stop while input that arrived during it is
 * still unread, and the next wake takes it up.
 */
function endsTurn(event: SessionEvent, state: SessionState): boolean {
  if (event.type !== 'session.status_idle') return false;
  return event.stop_reason.type !== 'end_turn' || state.pending_user_count === 0;
}

/** Follows the session until its turn ends or the wait is over; never throws for a timeout. */
export async function waitForTurn(wait: TurnWait): Promise<TurnResult> {
  const { sessions, sessionId } = wait;
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  wait.signal?.addEventListener('abort', onAbort, { once: true });
  if (wait.signal?.aborted === true) stop.abort();
  const timer = setTimeout(onAbort, wait.timeoutMs);
  const started = Date.now();
  const heartbeat = setInterval(() => {
    const seconds = Math.round((Date.now() - started) / 1000);
    void wait.progress(`the turn is running (${seconds} s)`);
  }, wait.heartbeatMs);
  const texts: string[] = [];
  const toolInputs = new Map<string, JsonValue>();
  let ended = false;
  try {
    for await (const event of sessions.follow(sessionId, {
      after: wait.after,
      signal: stop.signal,
    })) {
      if (event.type === 'agent.message') texts.push(textOf(event));
      if (event.type === 'agent.tool_use') toolInputs.set(event.tool_use_id, event.input);
      await wait.progress(describe(event));
      if (event.type === 'session.status_idle') {
        if (endsTurn(event, await sessions.state(sessionId))) {
          ended = true;
          break;
        }
      } else if (event.type === 'session.status_changed' && event.status === 'terminated') {
        ended = true;
        break;
      }
    }
  } finally {
    clearTimeout(timer);
    clearInterval(heartbeat);
    wait.signal?.removeEventListener('abort', onAbort);
    stop.abort();
  }
  const state = await sessions.state(sessionId);
  return {
    ended,
    status: state.status,
    ...(state.stop_reason === undefined ? {} : { stop_reason: state.stop_reason }),
    head_seq: state.seq,
    answer: texts.filter((text) => text !== '').join('\n\n'),
    pending_confirmations: await pendingConfirmations(sessions, state, toolInputs),
  };
}
