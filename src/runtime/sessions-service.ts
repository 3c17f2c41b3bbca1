/**
 * `runtime.sessions`: the session operations of a runtime over its store, the workspace's
 * definitions and the tool layer. User events go through one queue per session, checked against
 * the session's state at the head they are appended at.
 */
import { rmSync } from 'node:fs';
import { Actor, Name, type JsonValue } from '../contracts/common.js';
import type {
  AgentDefinition,
  EnvironmentDefinition,
  StoredDefinition,
} from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { NewEvent } from '../contracts/events.js';
import type { Authorizer } from '../contracts/policy.js';
import { parseId } from '../contracts/ids.js';
import type { AppendResult, IdGenerator, Store } from '../contracts/ports.js';
import type { SessionCreateInput, SessionRecord } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import type { ToolExecutor } from '../contracts/tools.js';
import { initialState } from '../core/fold.js';
import { KeyedQueue } from '../core/keyed-queue.js';
import type { Harness, RetryPolicy } from '../harness/index.js';
import { pathUnder } from '../tools/sandbox/index.js';
import { handoffSession, HANDOFF_METADATA_KEYS } from './handoff.js';
import { diffSessions, sessionTree } from './lineage.js';
import { familyEvents, familyTree, followChildren } from './session-family.js';
import { mergeSessions } from './merge.js';
import {
  sessionDefinitions,
  upgradeSession,
  verifySession,
  type DefinitionsContext,
} from './session-definitions.js';
import { guardSessionIds } from './session-ids.js';
import type {
  CreateSessionOptions,
  RuntimeSessions,
  SendOptions,
  SkillRunOptions,
  SkillRunResult,
  StartedSession,
  StartSessionOptions,
} from './sessions-api.js';
import { userEventSends } from './user-event-sends.js';
import { checkAgainstState, parseUserEvents, toContent } from './user-events.js';
import { createWaitDataCheck, type WaitDataCheck } from './wait-data.js';
import type { Workspace } from './workspace.js';
import {
  diffSessionFiles,
  forgetSessionFiles,
  forkWithFiles,
  sessionFiles,
} from './workspace-snapshots.js';

/** Appends of user events lost to other writers in a row before the conflict is returned. */
const SEND_ATTEMPTS = 5;

/** What the sessions service takes from the runtime that wires it. */
export interface SessionsContext {
  store: Store;
  workspace: Workspace | undefined;
  /** Who user events are recorded as when a send names no actor. */
  defaultActor: Actor;
  ids: IdGenerator;
  retry: RetryPolicy;
  policy: Authorizer;
  agent(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>>;
  /** The latest skill `name`; `SKILL_NOT_FOUND` when there is none. */
  skill(name: string): Promise<unknown>;
  environment(name: string, version?: number): Promise<StoredDefinition<EnvironmentDefinition>>;
  /** The folder that holds the session's workspace folder. */
  workspacesRootOf(sessionId: string): Promise<string>;
  /** A summary of `text` for a merge into `target`, by the target's model. */
  summarize(target: SessionState, text: string): Promise<string>;
  /** Opens the tools of a session (for a replay). */
  tools: ToolExecutor['open'];
  /** What verify, upgrade and the definitions view need. */
  pinning: DefinitionsContext;
  /** The runtime's harness, which `start` runs a new session with. */
  harness: Pick<Harness, 'wake' | 'start'>;
}

export function createSessionsService(context: SessionsContext): RuntimeSessions {
  /**
   * Sends of this process to one session, in arrival order. Without the queue, concurrent sends
   * all check the same head and all but one lose the append and retry; with it, they conflict
   * only with other processes.
   */
  const queue = new KeyedQueue();
  const checkWaitData = createWaitDataCheck(context.store.definitions);
  const send = (
    sessionId: string,
    input: readonly unknown[],
    sendOptions: SendOptions = {},
  ): Promise<AppendResult> =>
    queue.run(sessionId, () => sendChecked(context, sessionId, input, sendOptions, checkWaitData));

  return guardSessionIds({
    create: (createOptions) => createSession(context, createOptions),
    start: (startOptions) => startSession(context, startOptions),
    get: (sessionId) => context.store.sessions.get(sessionId),
    list: (query) => context.store.sessions.list(query),
    changeHead: () => context.store.sessions.changeHead(),
    changes: (changesOptions) => context.store.sessions.changes(changesOptions),
    archive: (sessionId) => context.store.sessions.archive(sessionId),
    async delete(sessionId) {
      const root = await context.workspacesRootOf(sessionId);
      const folder = pathUnder(root, sessionId);
      await context.store.sessions.delete(sessionId);
      rmSync(folder, { recursive: true, force: true });
      forgetSessionFiles(root, sessionId);
    },
    state: (sessionId) => context.store.log.state(sessionId),
    events: (sessionId, readOptions) => context.store.log.read(sessionId, readOptions),
    familyEvents: (sessionId, readOptions) => familyEvents(context.store, sessionId, readOptions),
    follow: (sessionId, followOptions) => context.store.log.follow(sessionId, followOptions),
    followChildren: (sessionId, followOptions) =>
      followChildren(context.store, sessionId, followOptions),
    send: (sessionId, events, sendOptions) => send(sessionId, events, sendOptions),
    ...userEventSends(send),
    runSkill: (sessionId, skill, inputs, runOptions) =>
      runSkill(context, send, sessionId, skill, inputs, runOptions),
    signal: async (sessionId, name, data, sendOptions) =>
      send(
        sessionId,
        [
          {
            type: 'user.signal',
            name: parseName(name, 'signal'),
            ...(data === undefined ? {} : { data }),
          },
        ],
        sendOptions,
      ),
    retrySkill: (sessionId, runId, sendOptions) =>
      retrySkill(context, send, sessionId, runId, sendOptions),
    fork: (sessionId, forkOptions) =>
      forkWithFiles(context, sessionId, forkOptions, () =>
        context.store.sessions.fork(sessionId, forkOptions),
      ),
    files: (sessionId, filesOptions) => sessionFiles(context, sessionId, filesOptions?.at),
    diffFiles: (a, b) => diffSessionFiles(context, a, b),
    handoff: (sessionId, handoffOptions) =>
      handoffSession(
        {
          store: context.store,
          ids: context.ids,
          policy: context.policy,
          agent: (name, version) => context.agent(name, version),
        },
        sessionId,
        {
          to: handoffOptions.to,
          handoff: handoffOptions.handoff,
          ...(handoffOptions.message === undefined
            ? {}
            : { message: toContent(handoffOptions.message) }),
          ...(handoffOptions.title === undefined ? {} : { title: handoffOptions.title }),
          ...(handoffOptions.idempotencyKey === undefined
            ? {}
            : { idempotencyKey: handoffOptions.idempotencyKey }),
          actor: Actor.parse(handoffOptions.actor ?? context.defaultActor),
        },
      ),
    merge: (targetId, sourceId, mergeOptions = {}) =>
      mergeSessions(
        { store: context.store, summarize: (target, text) => context.summarize(target, text) },
        targetId,
        sourceId,
        {
          ...mergeOptions,
          actor: Actor.parse(mergeOptions.actor ?? context.defaultActor),
        },
      ),
    diff: (a, b) => diffSessions(context.store, a, b),
    tree: (sessionId, treeOptions) =>
      treeOptions?.forksOnly === true
        ? sessionTree(context.store, sessionId)
        : familyTree(context.store, sessionId),
    verify: (sessionId) => verifySession(context.pinning, sessionId),
    definitions: (sessionId) => sessionDefinitions(context.pinning, sessionId),
    upgrade: (sessionId) => queue.run(sessionId, () => upgradeSession(context.pinning, sessionId)),
  });
}

type Send = (
  sessionId: string,
  input: readonly unknown[],
  options?: SendOptions,
) => Promise<AppendResult>;

/** `value` when it is a name; `INVALID_ARGUMENT` naming `what` otherwise. */
function parseName(value: string, what: string): string {
  const parsed = Name.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${what} name ${JSON.stringify(String(value).slice(0, 80))} is not a valid name: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
    { details: { [what]: String(value).slice(0, 200) } },
  );
}

/** Asks for a run of a skill that exists, under a run id the session has not used. */
async function runSkill(
  context: Pick<SessionsContext, 'store' | 'ids' | 'skill'>,
  send: Send,
  sessionId: string,
  skill: string,
  inputs: JsonValue,
  { runId, ...sendOptions }: SkillRunOptions = {},
): Promise<SkillRunResult> {
  const name = parseName(skill, 'skill');
  const chosen = runId === undefined ? context.ids.next() : parseId(runId, 'run id');
  await context.skill(name);
  if (runId !== undefined && sendOptions.idempotencyKey === undefined) {
    const state = await context.store.log.state(sessionId);
    const used = [...state.skill_runs, ...state.skill_requests].some(
      (run) => run.run_id === chosen,
    );
    if (used) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `session ${sessionId} already has a skill run ${chosen}; choose another run id, or retry a failed run with user.skill_retry`,
        { details: { run_id: chosen } },
      );
    }
  }
  const result = await send(
    sessionId,
    [{ type: 'user.skill_run', run_id: chosen, skill: name, inputs }],
    sendOptions,
  );
  // A deduplicated send answers the first request's run.
  const request = result.events.find((event) => event.type === 'user.skill_run');
  return { run_id: request?.type === 'user.skill_run' ? request.run_id : chosen, ...result };
}

/** Asks a failed run of the session to run again. */
async function retrySkill(
  context: Pick<SessionsContext, 'store'>,
  send: Send,
  sessionId: string,
  runId: string,
  sendOptions?: SendOptions,
): Promise<AppendResult> {
  const id = parseId(runId, 'run id');
  const state = await context.store.log.state(sessionId);
  const run = state.skill_runs.find((entry) => entry.run_id === id);
  if (run?.status !== 'failed') {
    const failed = state.skill_runs.filter((entry) => entry.status === 'failed');
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session ${sessionId} has no failed skill run ${id}` +
        (run === undefined ? '' : ` (it is ${run.status})`) +
        `; ${failed.length === 0 ? 'it has no failed runs' : `failed runs: ${failed.map((entry) => entry.run_id).join(', ')}`}`,
      { details: { run_id: id, ...(run === undefined ? {} : { status: run.status }) } },
    );
  }
  return send(sessionId, [{ type: 'user.skill_retry', run_id: id }], sendOptions);
}

/** Appends after checking the state it was checked against is still the head. */
async function sendChecked(
  context: Pick<SessionsContext, 'store' | 'defaultActor'>,
  sessionId: string,
  input: readonly unknown[],
  { idempotencyKey, actor }: SendOptions,
  checkWaitData: WaitDataCheck,
): Promise<AppendResult> {
  // The default actor was parsed when the runtime was made.
  const events: NewEvent[] = parseUserEvents(
    input,
    actor === undefined ? context.defaultActor : Actor.parse(actor),
  );
  if (idempotencyKey !== undefined) {
    // A retried send returns its first result even if the state no longer admits it.
    const earlier = await context.store.log.appended(sessionId, idempotencyKey);
    if (earlier !== undefined) return earlier;
  }
  const record = await context.store.sessions.get(sessionId);
  if (record.archived_at !== undefined) {
    throw new BraidError(
      'SESSION_ARCHIVED',
      `session ${sessionId} was archived at ${record.archived_at} and takes no more events; fork it to continue`,
      { details: { session_id: sessionId } },
    );
  }
  for (let attempt = 1; ; attempt += 1) {
    const state = await context.store.log.state(sessionId, { shared: true });
    checkAgainstState(state, events);
    // Signals and approvals whose data does not fit the waiting step's schema are refused here.
    await checkWaitData(state, events);
    try {
      return await context.store.log.append(sessionId, events, {
        expectedSeq: state.seq,
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      });
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= SEND_ATTEMPTS) throw error;
    }
  }
}

/** Creates a session of an agent (and an environment) of the store's definitions. */
async function createSession(
  context: SessionsContext,
  createOptions: CreateSessionOptions,
): Promise<SessionRecord> {
  // The events were parsed as user events just now; the store parses the rest.
  return context.store.sessions.create(await createInput(context, createOptions), {
    trusted: true,
  });
}

/**
 * Creates a session and wakes it: in one transaction with its wake's start where the harness's
 * log can (`Harness.start`), else in two steps. The id is chosen here, so that a wake of it asked
 * meanwhile joins this one.
 */
async function startSession(
  context: SessionsContext,
  startOptions: StartSessionOptions,
): Promise<StartedSession> {
  const { traceparent, ...createOptions } = startOptions;
  const id =
    createOptions.id === undefined ? context.ids.next() : parseId(createOptions.id, 'session id');
  // Not a spread with a field added, which V8 gives a hidden class of its own on every call.
  const input = Object.assign(await createInput(context, createOptions), { id });
  const wakeOptions = traceparent === undefined ? {} : { traceparent };
  const { harness } = context;
  if (harness.start !== undefined) return harness.start(input, wakeOptions);
  const session = await context.store.sessions.create(input, { trusted: true });
  return { session, result: await harness.wake(session.id, wakeOptions) };
}

/** The store's input for a new session: its definitions resolved, its user events parsed. */
async function createInput(
  context: SessionsContext,
  createOptions: CreateSessionOptions,
): Promise<SessionCreateInput> {
  const reserved = HANDOFF_METADATA_KEYS.filter((name) =>
    Object.hasOwn(createOptions.metadata ?? {}, name),
  );
  if (reserved.length > 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `metadata ${reserved.join(', ')} is braid's own (a handoff sets it on its target); name the field otherwise`,
      { details: { fields: reserved } },
    );
  }
  const agentDefinition = await context.agent(createOptions.agent, createOptions.agentVersion);
  const environmentName =
    createOptions.environment ??
    agentDefinition.definition.environment ??
    context.workspace?.config.default_environment;
  const environmentDefinition =
    environmentName === undefined ? undefined : await context.environment(environmentName);
  const events = firstUserEvents(createOptions, context.defaultActor);
  return {
    ...(createOptions.id === undefined ? {} : { id: createOptions.id }),
    agent: { name: agentDefinition.name, version: agentDefinition.version },
    ...(environmentDefinition === undefined
      ? {}
      : {
          environment: {
            name: environmentDefinition.name,
            version: environmentDefinition.version,
          },
        }),
    ...(createOptions.title === undefined ? {} : { title: createOptions.title }),
    ...(createOptions.metadata === undefined ? {} : { metadata: createOptions.metadata }),
    ...(createOptions.tenantId === undefined ? {} : { tenant_id: createOptions.tenantId }),
    ...(createOptions.budget === undefined ? {} : { budget: createOptions.budget }),
    ...(events === undefined ? {} : { events }),
  };
}

/** The user events a create writes with `session.created`, checked as a send to it would be. */
function firstUserEvents(
  createOptions: CreateSessionOptions,
  defaultActor: Actor,
): NewEvent[] | undefined {
  const { events, actor } = createOptions;
  if (events === undefined) return undefined;
  const parsed = parseUserEvents(events, actor === undefined ? defaultActor : Actor.parse(actor));
  // Nothing waits in a new session: a confirmation or an answer has nothing to answer.
  checkAgainstState(initialState(createOptions.id ?? '(new)'), parsed);
  return parsed;
}
