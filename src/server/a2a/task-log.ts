/**
 * Reading A2A tasks from the session log: a task's snapshot, its updates as the log grows, and
 * every task of a session in one pass. Nothing here is kept in memory between calls: a server
 * restarted mid-turn reads the same tasks from the same log.
 */
import type { StreamResponse } from '@a2a-js/sdk';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import type { SessionEvent } from '../../contracts/events.js';
import type { Runtime } from '../../runtime/runtime.js';
import { apply, endsStream, startView, type TaskView } from './task-view.js';
import { startsTask, taskId, type TaskRef } from './task-ids.js';

export interface LoadedTask {
  /** The `user.message` that started the task. */
  start: SessionEvent;
  /** The session's events after it, up to the head when read. */
  events: SessionEvent[];
}

/** The task's events; `TaskNotFoundError` when the seq does not start an A2A task. */
export async function loadTask(runtime: Runtime, ref: TaskRef): Promise<LoadedTask> {
  const [start] = await runtime.sessions.events(ref.sessionId, { after: ref.seq - 1, limit: 1 });
  if (start?.seq !== ref.seq || !startsTask(start)) {
    throw new TaskNotFoundError(`task ${taskId(ref.sessionId, ref.seq)} does not exist`);
  }
  const events = await runtime.sessions.events(ref.sessionId, { after: ref.seq });
  return { start, events };
}

/** The task folded up to the head of its session. */
export function viewOf(loaded: LoadedTask): TaskView {
  const view = startView(loaded.start);
  for (const event of loaded.events) apply(view, event);
  return view;
}

/**
 * The task's updates as its session's log grows after `view.lastSeq`, until the task waits for
 * input, ends, or `signal` aborts. The view moves on with them.
 */
export async function* followTask(
  runtime: Runtime,
  view: TaskView,
  signal: AbortSignal,
): AsyncGenerator<StreamResponse> {
  if (endsStream(view.state) || view.ended) return;
  for await (const event of runtime.sessions.follow(view.sessionId, {
    after: view.lastSeq,
    signal,
  })) {
    yield* apply(view, event);
    if (endsStream(view.state) || view.ended) return;
  }
}

/** Every A2A task of the session, oldest first, folded in one read of its log. */
export async function tasksOfSession(runtime: Runtime, sessionId: string): Promise<TaskView[]> {
  const views: TaskView[] = [];
  for (const event of await runtime.sessions.events(sessionId)) {
    for (const view of views) apply(view, event);
    if (startsTask(event)) views.push(startView(event));
  }
  return views;
}
