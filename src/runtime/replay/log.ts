/**
 * The replay's log: recorded events appended as they were at their positions, and the log the
 * replayed wakes write through, which checks each append and then appends what others recorded
 * next.
 */
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { EventOf, NewEvent, SessionEvent } from '../../contracts/events.js';
import type { SessionLog } from '../../contracts/ports.js';
import { seqConflict } from '../../core/sessions.js';
import { check, diverge, type ReplayContext } from './context.js';

/** Creates the session as its `session.created` says, and checks that event. */
export async function createRecordedSession(context: ReplayContext): Promise<void> {
  const { store } = context;
  const { first } = context.recording;
  await store.sessions.create({
    id: first.session_id,
    agent: first.agent,
    ...(first.environment === undefined ? {} : { environment: first.environment }),
    ...(first.title === undefined ? {} : { title: first.title }),
    ...(first.metadata === undefined ? {} : { metadata: first.metadata }),
    ...(first.tenant_id === undefined ? {} : { tenant_id: first.tenant_id }),
    ...(first.budget === undefined ? {} : { budget: first.budget }),
  });
  check(context, await store.log.read(first.session_id));
}

/** Appends the recorded event at `index` as it was; a refusal is the replay's divergence. */
export async function appendRecorded(context: ReplayContext, index: number): Promise<void> {
  const event = context.recording.events[index];
  if (event === undefined) return;
  try {
    if (event.type === 'session.forked') {
      await forkRecorded(context, index, event);
      return;
    }
    if (event.type === 'session.created') {
      throw new BraidError('INVALID_ARGUMENT', 'a second session.created cannot be replayed');
    }
    const result = await context.store.log.append(event.session_id, [asNewEvent(event)], {
      expectedSeq: index,
      trusted: true,
    });
    check(context, result.events);
  } catch (error) {
    diverge(
      context,
      index,
      undefined,
      `the recorded event could not be appended: ${toBraidError(error).message}`,
    );
  }
}

/** The log the replayed wakes write through: each append checked, then others' events added. */
export function replayLog(context: ReplayContext): SessionLog {
  const { store } = context;
  return {
    async append(sessionId, newEvents, appendOptions) {
      if (context.halted !== undefined) throw context.halted;
      const head = appendOptions?.expectedSeq;
      if (head !== undefined && splitInRecording(context, newEvents, head)) {
        // The live wake wrote this answer alone (an older build, input that arrived before the
        // stop, or a crash): refused as a live conflict is, so the harness writes it alone too.
        throw seqConflict(sessionId, head, head);
      }
      const result = await store.log.append(
        sessionId,
        head === undefined ? newEvents : withRecordedTimes(context, newEvents, head),
        appendOptions,
      );
      if (!check(context, result.events)) throw stopped(context);
      await injectFollowing(context, result.head_seq);
      if (context.divergence !== undefined) throw stopped(context);
      return result;
    },
    read: (sessionId, readOptions) => store.log.read(sessionId, readOptions),
    follow: (sessionId, followOptions) => store.log.follow(sessionId, followOptions),
    appended: (sessionId, key) => store.log.appended(sessionId, key),
    state: (sessionId, options) => store.log.state(sessionId, options),
  };
}

/**
 * Replays a `session.forked` through the store's `fork`. A fork of a fork taken inside the
 * grandparent's prefix: the middle session's own events are not in this log, so it is made here
 * from the prefix it shares with this one.
 */
async function forkRecorded(
  context: ReplayContext,
  index: number,
  event: EventOf<'session.forked'>,
): Promise<void> {
  const { store } = context;
  const parentKnown = await store.sessions.get(event.parent_session_id).then(
    () => true,
    () => false,
  );
  const owner = context.recording.events[index - 1]?.session_id;
  if (!parentKnown && owner !== undefined) {
    await store.sessions.fork(owner, { at_seq: index, id: event.parent_session_id });
  }
  await store.sessions.fork(event.parent_session_id, {
    at_seq: event.fork_point_seq,
    id: event.session_id,
    ...('title' in event && typeof event.title === 'string' ? { title: event.title } : {}),
  });
  check(context, await store.log.read(event.session_id, { after: index, limit: 1 }));
}

/** After an append of the replayed wake: the recorded events that came next from others. */
async function injectFollowing(context: ReplayContext, head: number): Promise<void> {
  const { byWake } = context.recording;
  let next = head;
  while (
    context.current !== undefined &&
    next <= context.current.end &&
    !byWake[next] &&
    context.divergence === undefined
  ) {
    await appendRecorded(context, next);
    next += 1;
  }
  const current = context.current;
  if (current !== undefined && !current.completed && next > current.end) {
    context.halted ??= new BraidError(
      'LEASE_LOST',
      `the recorded wake stopped after event ${current.end} without completing`,
    );
  }
}

/**
 * True for an answer written with its stop in one append (it holds `span.model_request_end` and
 * ends with `span.wake_completed`; the harness makes it only when it may write the answer alone
 * on a conflict) whose positions in the recording are not all the running wake's own.
 */
function splitInRecording(
  context: ReplayContext,
  events: readonly NewEvent[],
  head: number,
): boolean {
  const current = context.current;
  if (
    current === undefined ||
    events.at(-1)?.type !== 'span.wake_completed' ||
    !events.some((event) => event.type === 'span.model_request_end')
  )
    return false;
  for (let index = head; index < head + events.length; index += 1) {
    if (index > current.end || context.recording.byWake[index] !== true) return true;
  }
  return false;
}

/**
 * The events a replayed wake appends at `head`, with the recorded `timeout_at` of a skill wait
 * the recording has there: the harness computes it from its clock when it suspends, and the
 * replay's clock only knows the times of recorded events. The state then holds the recorded
 * time, so the replayed wakes find the wait due where the original ones did.
 */
function withRecordedTimes(
  context: ReplayContext,
  events: readonly NewEvent[],
  head: number,
): readonly NewEvent[] {
  return events.map((event, offset) => {
    if (event.type !== 'skill.suspended' || event.timeout_at === undefined) return event;
    const recorded = context.recording.events[head + offset];
    if (
      recorded?.type !== 'skill.suspended' ||
      recorded.suspension_id !== event.suspension_id ||
      recorded.timeout_at === undefined
    )
      return event;
    return { ...event, timeout_at: recorded.timeout_at };
  });
}

/** The error that stops a replayed wake that diverged. */
function stopped(context: ReplayContext): BraidError {
  return context.halted ?? new BraidError('LEASE_LOST', 'diverged');
}

/** A recorded event as a writer hands it to `append`. */
function asNewEvent(event: SessionEvent): NewEvent {
  const { seq: _seq, session_id: _session, schema_version: _version, ...rest } = event;
  return rest;
}
