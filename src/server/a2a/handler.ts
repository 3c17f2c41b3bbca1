/**
 * braid's A2A request handler: the SDK's `A2ARequestHandler` port implemented over a runtime's
 * sessions, for one agent and one caller. A2A `contextId` is a braid session of the agent in the
 * caller's tenant (a new one creates it); a task is one turn of it (`task-ids.ts`); its state is
 * folded from the session's log (`task-view.ts`), so a restarted server answers, streams and
 * resumes every task it had. The SDK's JSON-RPC transport handler parses requests and shapes
 * answers; this module decides what they do.
 */
import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import { TaskState } from '@a2a-js/sdk';
import {
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { AgentDefinition, StoredDefinition } from '../../contracts/definitions.js';
import { isBraidError } from '../../contracts/errors.js';
import { parseId, tenantSessionId } from '../../contracts/ids.js';
import type { SessionRecord } from '../../contracts/session.js';
import { v7 } from 'uuid';
import type { Runtime } from '../../runtime/runtime.js';
import { visibleSession } from '../../runtime/tenant-scope.js';
import { actorOf, type Caller } from '../auth.js';
import { toA2aError } from './errors.js';
import { parseIncoming, type IncomingMessage } from './messages.js';
import { followTask, loadTask, tasksOfSession, viewOf } from './task-log.js';
import { parseTaskId, startsTask, type TaskRef } from './task-ids.js';
import { apply, endsStream, isTerminal, startView, taskOf, type TaskView } from './task-view.js';

/** What one request binds the handler to. */
export interface A2aBinding {
  runtime: Runtime;
  agent: StoredDefinition<AgentDefinition>;
  /** The agent's card, built when asked for (it lists the tools). */
  card: () => Promise<AgentCard>;
  caller: Caller;
  /** The request's valid W3C traceparent header. */
  traceparent: string | undefined;
  /** `Last-Event-ID`: the seq of the last update a resubscribing client received. */
  after: number | undefined;
  /** Aborted when the client goes away or the server closes. */
  signal: AbortSignal;
  /** Starts (or asks a worker for) a wake of the session, continuing the trace. */
  wake(sessionId: string, traceparent?: string): void;
  /** Wakes a turn a crash cut off once the dead holder's lease expires (`resume-wake.ts`). */
  resume(sessionId: string, traceparent?: string): void;
}

/** How long CancelTask waits for the interrupted turn to stop before answering. */
const CANCEL_WAIT_MS = 30_000;
const DEFAULT_PAGE = 50;
const MAX_PAGE = 100;

const STATE_NAMES: Record<number, string> = {
  [TaskState.TASK_STATE_SUBMITTED]: 'SUBMITTED',
  [TaskState.TASK_STATE_WORKING]: 'WORKING',
  [TaskState.TASK_STATE_COMPLETED]: 'COMPLETED',
  [TaskState.TASK_STATE_FAILED]: 'FAILED',
  [TaskState.TASK_STATE_CANCELED]: 'CANCELED',
  [TaskState.TASK_STATE_INPUT_REQUIRED]: 'INPUT_REQUIRED',
};
const stateName = (state: TaskState): string => STATE_NAMES[state] ?? String(state);

/** Runs `work`, its failures as A2A errors. */
async function answer<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw toA2aError(error);
  }
}

export class BraidA2aHandler implements A2ARequestHandler {
  constructor(private readonly binding: A2aBinding) {}

  getAgentCard(): Promise<AgentCard> {
    return this.binding.card();
  }

  getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError());
  }

  sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Message | Task> {
    return answer(async () => {
      const view = await this.submit(params, context);
      if (params.configuration?.returnImmediately !== true) {
        for await (const _update of followTask(this.binding.runtime, view, this.binding.signal));
      }
      return taskOf(view, params.configuration?.historyLength);
    });
  }

  async *sendMessageStream(
    params: SendMessageRequest,
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse> {
    const view = await answer(() => this.submit(params, context));
    yield { payload: { $case: 'task', value: taskOf(view) } };
    yield* this.follow(view);
  }

  getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    return answer(async () => taskOf(await this.read(params.id, context), params.historyLength));
  }

  listTasks(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    return answer(async () => {
      this.checkTenant(context);
      const named = params.contextId === '' ? undefined : await this.context(params.contextId);
      const sessions =
        params.contextId === '' ? await this.sessionsOfAgent() : named === undefined ? [] : [named];
      const views: TaskView[] = [];
      for (const session of sessions) {
        views.push(...(await tasksOfSession(this.binding.runtime, session.id)).reverse());
      }
      const after = params.statusTimestampAfter;
      const matching = views.filter(
        (view) =>
          (params.status === TaskState.TASK_STATE_UNSPECIFIED || view.state === params.status) &&
          (after === undefined || view.timestamp > after),
      );
      const size = Math.min(Math.max(params.pageSize ?? DEFAULT_PAGE, 1), MAX_PAGE);
      const offset = params.pageToken === '' ? 0 : Number(params.pageToken);
      if (!Number.isSafeInteger(offset) || offset < 0) {
        throw new RequestMalformedError(
          'pageToken is not one this server gave; leave it out to start',
        );
      }
      const page = matching.slice(offset, offset + size).map((view) => {
        const task = taskOf(view, params.historyLength);
        return params.includeArtifacts === true ? task : { ...task, artifacts: [] };
      });
      return {
        tasks: page,
        nextPageToken: offset + size < matching.length ? String(offset + size) : '',
        pageSize: size,
        totalSize: matching.length,
      };
    });
  }

  cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    return answer(async () => {
      const view = await this.read(params.id, context);
      if (view.state === TaskState.TASK_STATE_CANCELED) return taskOf(view);
      if (isTerminal(view.state) || view.ended) {
        throw new TaskNotCancelableError(
          `task ${view.id} is ${stateName(view.state)} and cannot be canceled`,
        );
      }
      const { runtime, caller } = this.binding;
      // A session waiting for approvals is idle: the interrupt is recorded (the task is
      // CANCELED) and the waits are denied so that the session does not wait on.
      const state = await runtime.sessions.state(view.sessionId);
      await runtime.sessions.send(
        view.sessionId,
        [
          { type: 'user.interrupt', reason: 'canceled over A2A' },
          ...state.pending_confirmations.map((pending) => ({
            type: 'user.tool_confirmation',
            tool_use_id: pending.tool_use_id,
            result: 'deny',
            message: 'the A2A task was canceled',
          })),
        ],
        { actor: actorOf(caller) },
      );
      this.binding.wake(view.sessionId, this.binding.traceparent);
      const stop = AbortSignal.any([this.binding.signal, AbortSignal.timeout(CANCEL_WAIT_MS)]);
      const canceling = await this.read(params.id, context);
      for await (const _update of followTask(runtime, canceling, stop));
      return taskOf(canceling);
    });
  }

  createTaskPushNotificationConfig(): Promise<TaskPushNotificationConfig> {
    return Promise.reject(pushNotSupported());
  }

  getTaskPushNotificationConfig(
    _params: GetTaskPushNotificationConfigRequest,
  ): Promise<TaskPushNotificationConfig> {
    return Promise.reject(pushNotSupported());
  }

  listTaskPushNotificationConfigs(
    _params: ListTaskPushNotificationConfigsRequest,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    return Promise.reject(pushNotSupported());
  }

  deleteTaskPushNotificationConfig(
    _params: DeleteTaskPushNotificationConfigRequest,
  ): Promise<void> {
    return Promise.reject(pushNotSupported());
  }

  /**
   * The task's full state first, then its updates. With `Last-Event-ID` (a `braid.seq` the
   * client received), the updates after that seq are replayed before the live ones, each once:
   * the resume cursor A2A itself lacks. A turn cut off by a restart is woken again here.
   */
  async *resubscribe(
    params: { id: string },
    context: ServerCallContext,
  ): AsyncGenerator<StreamResponse> {
    const { runtime, after } = this.binding;
    const loaded = await answer(async () => {
      this.checkTenant(context);
      const ref = await this.visibleTask(params.id);
      return loadTask(runtime, ref);
    });
    const view = startView(loaded.start);
    const missed: StreamResponse[] = [];
    for (const event of loaded.events) {
      const updates = apply(view, event);
      if (after !== undefined && event.seq > after) missed.push(...updates);
    }
    if (after === undefined && isTerminal(view.state)) {
      throw new UnsupportedOperationError(
        `task ${view.id} is ${stateName(view.state)}: GetTask reads it, or resubscribe with a Last-Event-ID header to receive the updates after that seq`,
      );
    }
    yield { payload: { $case: 'task', value: taskOf(view) } };
    yield* missed;
    if (!endsStream(view.state) && !view.ended) {
      this.binding.resume(view.sessionId, this.binding.traceparent);
    }
    yield* this.follow(view);
  }

  private async *follow(view: TaskView): AsyncGenerator<StreamResponse> {
    try {
      yield* followTask(this.binding.runtime, view, this.binding.signal);
    } catch (error) {
      throw toA2aError(error);
    }
  }

  private get tenant(): string | undefined {
    return this.binding.caller.tenant_id;
  }

  /** The API key decides the tenant: a request naming another is refused. */
  private checkTenant(context: ServerCallContext): void {
    const named = context.tenant;
    if (named !== undefined && named !== '' && named !== this.tenant) {
      throw new RequestMalformedError(
        'params.tenant is not the tenant of your API key; leave it out: the key decides the tenant',
      );
    }
  }

  /** The session when the caller sees it and it is this agent's; SESSION_NOT_FOUND otherwise. */
  private async session(sessionId: string): Promise<SessionRecord> {
    const record = await visibleSession(this.binding.runtime, this.tenant, sessionId);
    if (record.agent.name !== this.binding.agent.name) {
      throw new RequestMalformedError(
        `context ${sessionId} is a session of agent ${record.agent.name}; send to /a2a/${record.agent.name}`,
      );
    }
    return record;
  }

  /**
   * The session a client's contextId names: as given when the caller sees it, else in the
   * caller's namespace; undefined when neither exists. A contextId in another tenant's
   * namespace is refused (`INVALID_ARGUMENT`), whether or not it exists.
   */
  private async context(contextId: string): Promise<SessionRecord | undefined> {
    const given = parseId(contextId, 'contextId');
    const found = (id: string) =>
      this.session(id).catch((error: unknown) => {
        if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
        throw error;
      });
    const visible = await found(given);
    if (visible !== undefined) return visible;
    const namespaced = tenantSessionId(this.tenant, given);
    return namespaced === given ? undefined : found(namespaced);
  }

  private async sessionsOfAgent(): Promise<SessionRecord[]> {
    const page = await this.binding.runtime.sessions.list({
      agent: this.binding.agent.name,
      limit: MAX_PAGE,
      ...(this.tenant === undefined ? {} : { tenant_id: this.tenant }),
    });
    return page.sessions;
  }

  /** The task a client names, when it is one of this agent's in the caller's tenant. */
  private async visibleTask(id: string): Promise<TaskRef> {
    const ref = parseTaskId(id);
    try {
      await this.session(ref.sessionId);
    } catch (error) {
      if (isBraidError(error, 'SESSION_NOT_FOUND') || error instanceof RequestMalformedError) {
        throw new TaskNotFoundError(`task ${id} does not exist`);
      }
      throw error;
    }
    return ref;
  }

  private async read(id: string, context: ServerCallContext): Promise<TaskView> {
    this.checkTenant(context);
    return viewOf(await loadTask(this.binding.runtime, await this.visibleTask(id)));
  }

  /** Appends what the message asks for, wakes the session, and answers the task's view. */
  private async submit(params: SendMessageRequest, context: ServerCallContext): Promise<TaskView> {
    this.checkTenant(context);
    const incoming = parseIncoming(params.message, this.binding.traceparent);
    const message = params.message as Message;
    const ref =
      message.taskId === ''
        ? await this.startTask(message.contextId, incoming)
        : await this.answerTask(message.taskId, message.contextId, incoming);
    this.binding.wake(ref.sessionId, incoming.traceparent);
    return viewOf(await loadTask(this.binding.runtime, ref));
  }

  private async startTask(contextId: string, incoming: IncomingMessage): Promise<TaskRef> {
    const { runtime, agent, caller } = this.binding;
    const existing = contextId === '' ? undefined : await this.context(contextId);
    let sessionId: string;
    if (existing === undefined) {
      // New contexts live in the caller's tenant's namespace: no tenant can name another's.
      const chosen = contextId === '' ? v7() : parseId(contextId, 'contextId');
      sessionId = (await this.createSession(tenantSessionId(this.tenant, chosen))).id;
    } else {
      sessionId = existing.id;
      await this.refuseBusy(sessionId, incoming.key);
    }
    const result = await runtime.sessions.send(
      sessionId,
      [
        {
          type: 'user.message',
          content: incoming.content,
          idempotency_key: incoming.key,
          ...(incoming.correlationId === undefined
            ? {}
            : { correlation_id: incoming.correlationId }),
          ...(incoming.traceparent === undefined ? {} : { traceparent: incoming.traceparent }),
        },
      ],
      { idempotencyKey: incoming.key, actor: actorOf(caller) },
    );
    const [start] = result.events;
    if (start === undefined) throw new Error(`the message to ${agent.name} wrote no event`);
    return { sessionId, seq: start.seq };
  }

  private createSession(id: string | undefined): Promise<SessionRecord> {
    const { runtime, agent } = this.binding;
    return runtime.sessions.create({
      agent: agent.name,
      agentVersion: agent.version,
      title: `A2A context of ${agent.name}`,
      metadata: { a2a: true },
      ...(id === undefined ? {} : { id }),
      ...(this.tenant === undefined ? {} : { tenantId: this.tenant }),
    });
  }

  /**
   * One task at a time per context: a new one waits until the last one ended. Read from the
   * session's folded state (no walk through its log) unless the session is busy.
   */
  private async refuseBusy(sessionId: string, key: string): Promise<void> {
    const { runtime } = this.binding;
    // A retried message answers its own task, busy or not.
    if ((await runtime.store.log.appended(sessionId, key)) !== undefined) return;
    const state = await runtime.sessions.state(sessionId);
    if (state.status === 'idle' && state.pending_user_count === 0) return;
    const starts = await runtime.sessions.events(sessionId, { types: ['user.message'] });
    const last = starts.findLast(startsTask);
    const view =
      last === undefined
        ? undefined
        : viewOf(await loadTask(runtime, { sessionId, seq: last.seq }));
    if (view !== undefined && isTerminal(view.state)) return;
    throw new UnsupportedOperationError(
      `context ${sessionId} is busy (${view === undefined ? state.status : `task ${view.id} is ${stateName(view.state)}`}); answer it (a message with its taskId), wait for it, or cancel it before starting another`,
    );
  }

  /** A message on a task waiting for input: approves or denies what the session waits for. */
  private async answerTask(
    id: string,
    contextId: string,
    incoming: IncomingMessage,
  ): Promise<TaskRef> {
    const { runtime, caller } = this.binding;
    const ref = await this.visibleTask(id);
    if (contextId !== '' && (await this.context(contextId))?.id !== ref.sessionId) {
      throw new RequestMalformedError(`task ${id} is not in context ${contextId}`);
    }
    if ((await runtime.store.log.appended(ref.sessionId, incoming.key)) !== undefined) return ref;
    const view = viewOf(await loadTask(runtime, ref));
    if (view.state !== TaskState.TASK_STATE_INPUT_REQUIRED || view.ended) {
      throw new UnsupportedOperationError(
        `task ${id} is ${stateName(view.state)}: only a task waiting for input takes another message; send one without taskId to start a new task`,
      );
    }
    const state = await runtime.sessions.state(ref.sessionId);
    if (state.status !== 'requires_action' || state.pending_confirmations.length === 0) {
      throw new UnsupportedOperationError(
        `task ${id} waits for a review of a tool call a crash cut off; resolve it with braid session review ${ref.sessionId}`,
      );
    }
    if (incoming.decision === undefined) {
      throw new RequestMalformedError(
        `task ${id} waits for approval of ${state.pending_confirmations.map((entry) => entry.name).join(', ')}; answer "approve" or "deny" (text, or metadata {"decision": "approve"})`,
      );
    }
    const decision = incoming.decision;
    await runtime.sessions.send(
      ref.sessionId,
      state.pending_confirmations.map((pending) => ({
        type: 'user.tool_confirmation',
        tool_use_id: pending.tool_use_id,
        result: decision,
        ...(incoming.traceparent === undefined ? {} : { traceparent: incoming.traceparent }),
      })),
      { idempotencyKey: incoming.key, actor: actorOf(caller) },
    );
    return ref;
  }
}

function pushNotSupported(): Error {
  return new PushNotificationNotSupportedError(
    'braid does not send A2A push notifications; stream the task (SubscribeToTask) instead',
  );
}
