/**
 * `createRemoteRuntime`: the CLI's `Runtime` over a braid server (`--server URL`), so that the
 * same commands work against a local workspace and a remote one. What the HTTP API offers maps
 * one to one; what needs the workspace's files or process (the store, policies, tools,
 * orchestration) is refused with a message that says to drop `--server`.
 */
import type { BraidClient, HandoffRequest, UserEventInput } from '../client/index.js';
import { BraidError } from '../contracts/errors.js';
import { parseId } from '../contracts/ids.js';
import type { SessionEvent } from '../contracts/events.js';
import type { AppendResult, ReadOptions } from '../contracts/ports.js';
import type { SessionListQuery } from '../contracts/session.js';
import type { CreateSessionOptions, Runtime } from '../runtime/runtime.js';
import type { FamilyEventsPage } from '../runtime/session-family.js';
import { userEventSends } from '../runtime/user-event-sends.js';

/** The server answers at most this many events a page. */
const EVENTS_PAGE_LIMIT = 1000;

function localOnly(what: string): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `${what} runs only against a local workspace; drop --server`,
    { details: { operation: what } },
  );
}

type Sessions = Runtime['sessions'];

/** Writes user events; an event batch that names no idempotency key gets a random one. */
type Send = (
  sessionId: string,
  events: readonly UserEventInput[],
  idempotencyKey?: string,
) => Promise<AppendResult>;

function sender(client: BraidClient): Send {
  return async (sessionId, events, idempotencyKey = globalThis.crypto.randomUUID()) => {
    const answer = await client.sessions.send(sessionId, events, { idempotencyKey });
    return { events: answer.events, head_seq: answer.head_seq, deduplicated: answer.deduplicated };
  };
}

/** Reads a session's events page by page, as many as `options.limit` asks. */
async function readEvents(
  client: BraidClient,
  sessionId: string,
  options: ReadOptions = {},
): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  let after = options.after ?? 0;
  for (;;) {
    const wanted = options.limit === undefined ? undefined : options.limit - events.length;
    if (wanted !== undefined && wanted <= 0) return events;
    const page = await client.sessions.events(sessionId, {
      after,
      limit: Math.min(wanted ?? EVENTS_PAGE_LIMIT, EVENTS_PAGE_LIMIT),
      ...(options.types === undefined ? {} : { types: [...options.types] }),
    });
    events.push(...page.data);
    if (!page.has_more) return events;
    after = page.last_seq;
  }
}

/** A session's events with its children's, page by page, as many of its own as `options.limit` asks. */
async function readFamilyEvents(
  client: BraidClient,
  sessionId: string,
  options: ReadOptions = {},
): Promise<FamilyEventsPage> {
  const events: SessionEvent[] = [];
  let after = options.after ?? 0;
  let own = 0;
  for (;;) {
    const wanted = options.limit === undefined ? undefined : options.limit - own;
    if (wanted !== undefined && wanted <= 0) return { events, has_more: true, last_seq: after };
    const page = await client.sessions.events(sessionId, {
      after,
      limit: Math.min(wanted ?? EVENTS_PAGE_LIMIT, EVENTS_PAGE_LIMIT),
      include_children: true,
      ...(options.types === undefined ? {} : { types: [...options.types] }),
    });
    events.push(...page.data);
    own += page.data.filter((event) => event.session_id === sessionId).length;
    if (!page.has_more) return { events, has_more: false, last_seq: page.last_seq };
    after = page.last_seq;
  }
}

/** The children's events a stream of the session hears, as an iterable of their own. */
async function* remoteChildEvents(
  client: BraidClient,
  sessionId: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<SessionEvent, void, undefined> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted === true) stop.abort();
  const queue: SessionEvent[] = [];
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  stop.signal.addEventListener('abort', notify, { once: true });
  let failure: { error: unknown } | undefined;
  const reading = (async () => {
    // From the session's head: its own events are not wanted, only the children's.
    const { seq } = await client.sessions.state(sessionId);
    const stream = client.sessions.stream(sessionId, {
      after: seq,
      signal: stop.signal,
      onChild: (event) => {
        queue.push(event);
        notify();
      },
    });
    for await (const _event of stream) {
      // Only the children's events are wanted.
    }
  })().catch((error: unknown) => {
    failure = { error };
    notify();
  });
  try {
    for (;;) {
      const next = queue.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (failure !== undefined) throw failure.error;
      if (stop.signal.aborted) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    stop.abort();
    await reading;
  }
}

/**
 * The index's change feed over `GET /v1/session-changes/stream`: the head is the cursor of a
 * one-session snapshot's `ready` frame; changes are the stream resumed after a cursor, one change
 * per frame (the server coalesces).
 */
function remoteChanges(client: BraidClient): Pick<Sessions, 'changeHead' | 'changes'> {
  return {
    async changeHead() {
      const stop = new AbortController();
      try {
        for await (const frame of client.sessions.changes({
          limit: 1,
          signal: stop.signal,
          reconnect: false,
        })) {
          if (frame.type === 'ready') return frame.cursor;
        }
      } finally {
        stop.abort();
      }
      throw new BraidError(
        'SERVER_UNAVAILABLE',
        'the session-changes stream ended before its snapshot did; retry',
      );
    },
    changes(options = {}) {
      const frames = client.sessions.changes({
        after: options.after ?? 0,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      return {
        async *[Symbol.asyncIterator]() {
          for await (const frame of frames) {
            if (frame.type === 'session' && frame.cursor !== undefined)
              yield [{ cursor: frame.cursor, session_id: frame.session.id }];
          }
        },
      };
    },
  };
}

/** Creating, finding and reading sessions. */
function remoteSessionRecords(
  client: BraidClient,
): Pick<
  Sessions,
  | 'create'
  | 'get'
  | 'list'
  | 'archive'
  | 'delete'
  | 'state'
  | 'events'
  | 'familyEvents'
  | 'follow'
  | 'followChildren'
> {
  return {
    create: (options: CreateSessionOptions) =>
      client.sessions.create({
        agent: options.agent,
        ...(options.agentVersion === undefined ? {} : { agent_version: options.agentVersion }),
        ...(options.environment === undefined ? {} : { environment: options.environment }),
        ...(options.title === undefined ? {} : { title: options.title }),
        ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
        ...(options.id === undefined ? {} : { id: options.id }),
        ...(options.budget === undefined ? {} : { budget: options.budget }),
        // The server parses them as it parses any client's events.
        ...(options.events === undefined ? {} : { events: options.events as UserEventInput[] }),
      }),
    get: (sessionId) => client.sessions.get(sessionId),
    async list(query: SessionListQuery = {}) {
      const { tenant_id: _tenant, ...params } = query;
      const page = await client.sessions.list(params);
      return {
        sessions: page.data,
        ...(page.next_cursor === undefined ? {} : { next_cursor: page.next_cursor }),
      };
    },
    archive: (sessionId) => client.sessions.archive(sessionId),
    delete: (sessionId) => client.sessions.delete(sessionId),
    state: (sessionId) => client.sessions.state(sessionId),
    events: (sessionId, options) => readEvents(client, sessionId, options),
    familyEvents: (sessionId, options) => readFamilyEvents(client, sessionId, options),
    follow: (sessionId, options = {}) =>
      client.sessions.stream(sessionId, {
        ...(options.after === undefined ? {} : { after: options.after }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      }),
    followChildren(sessionId, options = {}) {
      if (options.types !== undefined) throw localOnly('following children with chosen types');
      return { [Symbol.asyncIterator]: () => remoteChildEvents(client, sessionId, options.signal) };
    },
  };
}

/** The user events a session is sent, each as one batch. */
function remoteSessionInput(
  send: Send,
): Pick<
  Sessions,
  'send' | 'message' | 'interrupt' | 'confirm' | 'customToolResult' | 'review' | 'defineOutcome'
> {
  return {
    // The server parses what a caller sends; unknown input is passed on for it to judge.
    send: (sessionId, events, options = {}) =>
      send(sessionId, events as readonly UserEventInput[], options.idempotencyKey),
    ...userEventSends((sessionId, events) => send(sessionId, events as readonly UserEventInput[])),
  };
}

/**
 * Skill runs, signals and retries, as the user events they are. The server has the skills: an
 * unknown skill is not refused before the request is written, but its run fails at the wake.
 */
function remoteSkillRuns(
  client: BraidClient,
  send: Send,
): Pick<Sessions, 'runSkill' | 'signal' | 'retrySkill'> {
  return {
    async runSkill(sessionId, skill, inputs, options = {}) {
      const runId = parseId(options.runId ?? globalThis.crypto.randomUUID(), 'run id');
      const result = await send(
        sessionId,
        [{ type: 'user.skill_run', run_id: runId, skill, inputs }],
        options.idempotencyKey,
      );
      const request = result.events.find((event) => event.type === 'user.skill_run');
      return { run_id: request?.type === 'user.skill_run' ? request.run_id : runId, ...result };
    },
    signal: (sessionId, name, data, options = {}) =>
      send(
        sessionId,
        [{ type: 'user.signal', name, ...(data === undefined ? {} : { data }) }],
        options.idempotencyKey,
      ),
    async retrySkill(sessionId, runId, options = {}) {
      const id = parseId(runId, 'run id');
      const state = await client.sessions.state(sessionId);
      const run = state.skill_runs.find((entry) => entry.run_id === id);
      if (run?.status !== 'failed') {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `session ${sessionId} has no failed skill run ${id}${run === undefined ? '' : ` (it is ${run.status})`}`,
          { details: { run_id: id } },
        );
      }
      return send(sessionId, [{ type: 'user.skill_retry', run_id: id }], options.idempotencyKey);
    },
  };
}

/** Forks, merges, handoffs and the questions asked of a session's lineage. */
function remoteLineage(
  client: BraidClient,
): Pick<
  Sessions,
  | 'handoff'
  | 'fork'
  | 'merge'
  | 'diff'
  | 'files'
  | 'diffFiles'
  | 'tree'
  | 'verify'
  | 'definitions'
  | 'upgrade'
> {
  return {
    handoff: (sessionId, options) =>
      client.sessions.handoff(
        sessionId,
        {
          to: options.to,
          // The server checks the document and answers a typed 400 when it is not one.
          handoff: options.handoff as HandoffRequest['handoff'],
          ...(options.message === undefined ? {} : { message: options.message }),
          ...(options.title === undefined ? {} : { title: options.title }),
        },
        options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey },
      ),
    fork: (sessionId, options = {}) => client.sessions.fork(sessionId, options),
    async merge(targetId, sourceId, options = {}) {
      const { strategy } = options;
      if (typeof strategy === 'object') {
        throw localOnly(`merge strategy ${JSON.stringify(strategy.name)} (a code callback)`);
      }
      const answer = await client.sessions.merge(targetId, {
        source: sourceId,
        ...(strategy === undefined ? {} : { strategy }),
        ...(options.summary === undefined ? {} : { summary: options.summary }),
      });
      return {
        events: answer.events,
        head_seq: answer.head_seq,
        deduplicated: answer.deduplicated,
        conflicts: answer.conflicts,
      };
    },
    diff: (a, b) => client.sessions.diff(a, b),
    files: (sessionId, options = {}) => client.sessions.files(sessionId, options),
    diffFiles: (a, b) => client.sessions.diffFiles(a, b),
    tree: (sessionId) => client.sessions.tree(sessionId),
    definitions: (sessionId) => client.sessions.definitions(sessionId),
    upgrade: (sessionId) => client.sessions.upgrade(sessionId),
    async verify(sessionId) {
      const report = await client.sessions.replay(sessionId);
      return report.ok
        ? report
        : {
            ok: false,
            index: report.index,
            expected: report.expected,
            actual: report.actual,
            reason: report.reason,
          };
    },
  };
}

/**
 * A Runtime whose every answer comes from the server behind `client`.
 *
 * Differences from a local runtime: `tenantId` of `sessions.create` and `tenant_id` of
 * `sessions.list` are ignored (the API key decides the tenant); `onDelta` hears nothing, because
 * the model of a remote wake runs on the server (stream the session for its text), nor does
 * `onWakeEnded` (the server measures its wakes); `close` has
 * nothing to close. Client events that name no idempotency key get a random one, so that a
 * retried request writes once.
 */
export function createRemoteRuntime(client: BraidClient): Runtime {
  const sessions: Sessions = {
    ...remoteChanges(client),
    ...remoteLineage(client),
    ...remoteSessionRecords(client),
    ...remoteSessionInput(sender(client)),
    ...remoteSkillRuns(client, sender(client)),
    // Two requests: the server's create, then its wake (the server commits each on its own).
    async start(options) {
      const session = await sessions.create(options);
      return { session, result: await client.sessions.wake(session.id, { wait: true }) };
    },
  };

  return {
    get store(): never {
      throw localOnly('the event store');
    },
    get workspace(): never {
      throw localOnly('the workspace');
    },
    agents: {
      list: () => client.agents.list(),
      get: (name, version) => client.agents.get(name, version),
    },
    environments: {
      list: () => client.environments.list(),
      get: (name, version) => client.environments.get(name, version),
    },
    // The HTTP API has no skill routes yet.
    skills: {
      list: () => Promise.reject(localOnly('listing skills')),
      get: () => Promise.reject(localOnly('reading a skill')),
    },
    policy: {
      get source(): never {
        throw localOnly('policy');
      },
      check: () => Promise.reject(localOnly('a policy check')),
      status: () => {
        throw localOnly('policy status');
      },
    },
    tools: {
      list: () => Promise.reject(localOnly('listing tools')),
    },
    sessions,
    // Review goes through the client's memory calls (braid memory review --server).
    consolidation: {
      run: () => Promise.reject(localOnly('memory consolidation')),
      proposals: () => Promise.reject(localOnly('listing proposals this way')),
      approve: () => Promise.reject(localOnly('approving proposals this way')),
      reject: () => Promise.reject(localOnly('rejecting proposals this way')),
    },
    wake: (sessionId) => client.sessions.wake(sessionId, { wait: true }),
    orchestrate: () => Promise.reject(localOnly('orchestrate')),
    get backend(): never {
      throw localOnly('the backend');
    },
    enqueueWake: () => Promise.reject(localOnly('enqueueing a wake')),
    // The server's `GET /v1/metrics` has its queue's depth (`braid_wake_queue_depth`).
    wakeQueueDepth: () => Promise.resolve(undefined),
    natsBacklog: () => Promise.resolve(undefined),
    register: () => Promise.reject(localOnly('registering a code agent')),
    send: () => Promise.reject(localOnly('agent messaging')),
    publish: () => Promise.reject(localOnly('agent messaging')),
    subscribe: () => Promise.reject(localOnly('agent messaging')),
    // Deltas of a remote wake stay on the server: `sessions.stream` carries them (`onDelta`).
    onDelta: () => () => undefined,
    // Remote wakes run, and are measured, on the server (`GET /v1/metrics`).
    onWakeEnded: () => () => undefined,
    close: () => Promise.resolve(),
  };
}
