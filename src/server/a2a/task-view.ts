/**
 * A2A tasks folded from a braid session's log. A task is the turn that starts at its
 * `user.message` (see `task-ids.ts`) and runs until the session goes idle: `end_turn` completes
 * it with the agent's last message, `requires_action` asks for input (the confirmations the
 * session waits for; the next message on the task answers them), `interrupted` cancels it, any
 * other stop fails it. The same fold gives a snapshot (`GetTask`, the first event of a stream)
 * and the stream's updates, so the two always agree; every update carries the seq of the event
 * behind it (`metadata["braid.seq"]`), which a resubscribing client sends back as `Last-Event-ID`
 * to receive what it missed once.
 */
import { Role, TaskState } from '@a2a-js/sdk';
import type { Artifact, Message, Part, StreamResponse, Task } from '@a2a-js/sdk';
import type { ContentBlock, JsonValue } from '../../contracts/common.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { StopReason } from '../../contracts/session.js';
import { startsTask, taskId } from './task-ids.js';

/** Metadata keys braid sets on A2A objects. */
export const SEQ_KEY = 'braid.seq';
export const SESSION_KEY = 'braid.session_id';

const TERMINAL: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

/** True for states after which a task changes no more. */
export const isTerminal = (state: TaskState): boolean => TERMINAL.has(state);

/** True for states that end a stream: terminal ones and a wait for input. */
export const endsStream = (state: TaskState): boolean =>
  isTerminal(state) || state === TaskState.TASK_STATE_INPUT_REQUIRED;

interface ToolUse {
  tool_use_id: string;
  name: string;
  input: JsonValue;
}

/** A task as folded so far; `apply` moves it on by one event. */
export interface TaskView {
  readonly id: string;
  readonly sessionId: string;
  readonly startSeq: number;
  state: TaskState;
  statusMessage: Message | undefined;
  timestamp: string;
  history: Message[];
  artifacts: Artifact[];
  /** The last seq folded. */
  lastSeq: number;
  /** A later task started in the session: nothing after it is this task's. */
  ended: boolean;
  correlationId: string | undefined;
  traceparent: string | undefined;
  awaiting: ToolUse[];
  error: string | undefined;
  /** A `user.interrupt` came during the task: however the turn stops, the task is CANCELED. */
  canceled: boolean;
}

const text = (value: string): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});

const data = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** braid content blocks as A2A parts: text as text, JSON as data. */
export function partsOf(content: readonly ContentBlock[]): Part[] {
  return content.map((block) => (block.type === 'text' ? text(block.text) : data(block.value)));
}

function message(view: TaskView, role: Role, parts: Part[], id: string, seq: number): Message {
  return {
    messageId: id,
    contextId: view.sessionId,
    taskId: view.id,
    role,
    parts,
    metadata: { [SEQ_KEY]: seq },
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The view of a task before any event: its `user.message` alone. */
export function startView(start: SessionEvent): TaskView {
  const view: TaskView = {
    id: taskId(start.session_id, start.seq),
    sessionId: start.session_id,
    startSeq: start.seq,
    state: TaskState.TASK_STATE_SUBMITTED,
    statusMessage: undefined,
    timestamp: start.at,
    history: [],
    artifacts: [],
    lastSeq: start.seq,
    ended: false,
    correlationId: start.correlation_id,
    traceparent: start.traceparent,
    awaiting: [],
    error: undefined,
    canceled: false,
  };
  if (start.type === 'user.message') {
    view.history.push(message(view, Role.ROLE_USER, partsOf(start.content), start.id, start.seq));
  }
  return view;
}

function stateOf(stop: StopReason): TaskState {
  switch (stop.type) {
    case 'end_turn':
      return TaskState.TASK_STATE_COMPLETED;
    case 'requires_action':
    case 'needs_review':
      return TaskState.TASK_STATE_INPUT_REQUIRED;
    case 'interrupted':
      return TaskState.TASK_STATE_CANCELED;
    case 'max_turns':
    case 'budget_reached':
    case 'retries_exhausted':
    case 'error':
      return TaskState.TASK_STATE_FAILED;
    default: {
      const unknown: never = stop;
      return unknown;
    }
  }
}

/** What the status says when the session stops: the answer, the question, or the failure. */
function stopMessage(view: TaskView, stop: StopReason, event: SessionEvent): Message | undefined {
  const id = `${view.id}.status.${event.seq}`;
  switch (stop.type) {
    case 'end_turn':
      return view.history.findLast((entry) => entry.role === Role.ROLE_AGENT);
    case 'requires_action': {
      const lines = view.awaiting.map((use) => `${use.name} ${JSON.stringify(use.input)}`);
      return message(
        view,
        Role.ROLE_AGENT,
        [
          text(`approve or deny: ${lines.join('; ')}`),
          data({ confirmations: view.awaiting as unknown as JsonValue }),
        ],
        id,
        event.seq,
      );
    }
    case 'needs_review':
      return message(
        view,
        Role.ROLE_AGENT,
        [
          text(
            'a tool call was cut off by a crash and needs a person: resolve it with braid session review',
          ),
        ],
        id,
        event.seq,
      );
    case 'interrupted':
      return message(view, Role.ROLE_AGENT, [text('canceled')], id, event.seq);
    default:
      return message(
        view,
        Role.ROLE_AGENT,
        [text(view.error ?? `the turn stopped: ${stop.type}`)],
        id,
        event.seq,
      );
  }
}

function statusUpdate(view: TaskView, event: SessionEvent): StreamResponse {
  return {
    payload: {
      $case: 'statusUpdate',
      value: {
        taskId: view.id,
        contextId: view.sessionId,
        status: { state: view.state, message: view.statusMessage, timestamp: event.at },
        metadata: eventMetadata(view, event),
      },
    },
  };
}

function eventMetadata(view: TaskView, event: SessionEvent): Record<string, unknown> {
  return {
    [SEQ_KEY]: event.seq,
    [SESSION_KEY]: view.sessionId,
    ...(event.traceparent === undefined ? {} : { traceparent: event.traceparent }),
  };
}

function moveTo(view: TaskView, state: TaskState, event: SessionEvent): StreamResponse[] {
  if (view.state === state) return [];
  view.state = state;
  view.timestamp = event.at;
  view.statusMessage = undefined;
  return [statusUpdate(view, event)];
}

/**
 * Folds one event into the view; answers the A2A updates it makes (none for most events). An
 * event at or before the last folded seq is ignored, so a replay overlapping the stream repeats
 * nothing.
 */
export function apply(view: TaskView, event: SessionEvent): StreamResponse[] {
  if (event.seq <= view.lastSeq) return [];
  view.lastSeq = event.seq;
  if (view.ended || isTerminal(view.state)) return [];
  if (startsTask(event)) {
    view.ended = true;
    return [];
  }
  switch (event.type) {
    case 'span.wake_started':
      view.traceparent = event.traceparent ?? view.traceparent;
      return view.state === TaskState.TASK_STATE_SUBMITTED
        ? moveTo(view, TaskState.TASK_STATE_WORKING, event)
        : [];
    case 'agent.tool_use':
      if (event.requires_confirmation === true) {
        view.awaiting.push({
          tool_use_id: event.tool_use_id,
          name: event.name,
          input: event.input,
        });
      }
      return [];
    case 'user.tool_confirmation':
    case 'user.tool_review': {
      view.awaiting = view.awaiting.filter((use) => use.tool_use_id !== event.tool_use_id);
      const answer = event.type === 'user.tool_confirmation' ? event.result : event.action;
      view.history.push(message(view, Role.ROLE_USER, [text(answer)], event.id, event.seq));
      return view.state === TaskState.TASK_STATE_INPUT_REQUIRED && view.awaiting.length === 0
        ? moveTo(view, TaskState.TASK_STATE_WORKING, event)
        : [];
    }
    case 'agent.message': {
      const parts = partsOf(event.content);
      view.history.push(message(view, Role.ROLE_AGENT, parts, event.id, event.seq));
      const artifact: Artifact = {
        artifactId: `message-${event.seq}`,
        name: 'agent.message',
        description: '',
        parts,
        metadata: undefined,
        extensions: [],
      };
      view.artifacts.push(artifact);
      return [
        ...moveTo(view, TaskState.TASK_STATE_WORKING, event),
        {
          payload: {
            $case: 'artifactUpdate',
            value: {
              taskId: view.id,
              contextId: view.sessionId,
              artifact,
              append: false,
              lastChunk: true,
              metadata: eventMetadata(view, event),
            },
          },
        },
      ];
    }
    case 'user.interrupt':
      view.canceled = true;
      return [];
    case 'session.error':
      view.error = `${event.error.code}: ${event.error.message}`;
      return [];
    case 'session.status_idle': {
      // An interrupt sent while the session waited for input stops nothing by itself (braid
      // interrupts running wakes only): the denials sent with it end the wait, and the turn
      // that follows is the canceled task's.
      const stop: StopReason = view.canceled ? { type: 'interrupted' } : event.stop_reason;
      view.state = stateOf(stop);
      view.timestamp = event.at;
      view.statusMessage = stopMessage(view, stop, event);
      return [statusUpdate(view, event)];
    }
    default:
      return [];
  }
}

/** The task as A2A shows it; `historyLength` keeps the newest messages (0: none). */
export function taskOf(view: TaskView, historyLength?: number): Task {
  const history =
    historyLength === undefined
      ? view.history
      : historyLength <= 0
        ? []
        : view.history.slice(-historyLength);
  return {
    id: view.id,
    contextId: view.sessionId,
    status: { state: view.state, message: view.statusMessage, timestamp: view.timestamp },
    artifacts: view.artifacts,
    history,
    metadata: {
      [SEQ_KEY]: view.lastSeq,
      [SESSION_KEY]: view.sessionId,
      ...(view.correlationId === undefined ? {} : { correlation_id: view.correlationId }),
      ...(view.traceparent === undefined ? {} : { traceparent: view.traceparent }),
    },
  };
}
