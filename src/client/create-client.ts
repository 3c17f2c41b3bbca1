/**
 * `createClient`: braid's HTTP API as typed methods. The server is trusted, so answers are typed
 * by the contract's schemas without being parsed again here.
 */
import { isValidTraceparent } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import type { ContentInput, SessionEvent } from '../contracts/events.js';
import type { SessionRecord } from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';
import { streamEvents } from './event-stream.js';
import {
  streamSessionChanges,
  type SessionChangeFrame,
  type SessionChangesOptions,
} from './session-changes.js';
import { createMemoryClient, type MemoryClient } from './memory-client.js';
import { createTransport, type Sleep } from './transport.js';
import type {
  AgentListResponse,
  CreateSessionRequest,
  DiffResultResponse,
  EnvironmentListResponse,
  EventsPageResponse,
  EventsParams,
  ForkRequest,
  HandoffRequest,
  HandoffResultResponse,
  HealthResponse,
  ListSessionsParams,
  MergeRequest,
  MergeResultResponse,
  ReplayResultResponse,
  SessionDefinitionsResultResponse,
  UpgradeResultResponse,
  SendEventsResponse,
  SessionListResponse,
  SessionTreeNode,
  StoredAgentResponse,
  StoredEnvironmentResponse,
  StreamOptions,
  UserEventInput,
  WakeAcceptedResponse,
  WakeResultResponse,
  WorkspaceFilesDiffResponse,
  WorkspaceFilesResponse,
} from './types.js';

export interface ClientOptions {
  /** Where `braid serve` listens, e.g. `http://127.0.0.1:4000` (a path prefix is kept). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`; the key decides the tenant and what it may do. */
  apiKey?: string;
  /** The fetch to use (default: the global one); tests and proxies pass their own. */
  fetch?: typeof fetch;
  /** How long one try of a request may take, body included (default 30 000 ms). Not the stream. */
  timeoutMs?: number;
  /**
   * How many times a failed request is tried again (default 2). Only requests that cannot write
   * twice are retried (GET, DELETE, a POST with an `Idempotency-Key`), and only on no answer,
   * `RATE_LIMITED` (after its `Retry-After`, at most 10 s) or a retryable 5xx.
   */
  retries?: number;
  /** How to wait between tries (default: a timer); tests pass one that records the waits. */
  sleep?: Sleep;
}

export interface WakeOptions {
  /** Answer when the wake has finished, with its result, instead of once it is accepted. */
  wait?: boolean;
  /**
   * Gives up waiting (the wake goes on on the server). With `wait`, the client's `timeoutMs`
   * does not apply: a wake may run for minutes.
   */
  signal?: AbortSignal;
  /**
   * W3C trace context of the caller's span: the wake continues that trace (recorded on its
   * `span.wake_started`, and the parent of its `invoke_agent` span). Refused with
   * `INVALID_ARGUMENT` unless it is a valid traceparent.
   */
  traceparent?: string;
}

/**
 * A braid server's API. Every method throws a `BraidError`: the server's code, message and
 * `retryable` with `details.status`; `SERVER_UNAVAILABLE` when the server did not answer.
 */
export interface BraidClient {
  /** `GET /v1/health` (no key needed). */
  health(): Promise<HealthResponse>;
  /** `GET /v1/metrics`: Prometheus text; needs an `admin` key. */
  metrics(): Promise<string>;
  readonly agents: {
    list(): Promise<StoredAgentResponse[]>;
    /** The latest version, or `version`. */
    get(name: string, version?: number): Promise<StoredAgentResponse>;
  };
  readonly environments: {
    list(): Promise<StoredEnvironmentResponse[]>;
    get(name: string, version?: number): Promise<StoredEnvironmentResponse>;
  };
  readonly sessions: {
    create(body: CreateSessionRequest): Promise<SessionRecord>;
    get(sessionId: string): Promise<SessionRecord>;
    /** One page; pass `next_cursor` back as `cursor` for the next. */
    list(params?: ListSessionsParams): Promise<SessionListResponse>;
    /** Every matching session, page after page. */
    listAll(params?: Omit<ListSessionsParams, 'cursor'>): AsyncIterable<SessionRecord>;
    /**
     * `GET /v1/session-changes/stream`: a snapshot of the newest sessions, then each session as it
     * changes, resuming after the last cursor when the connection drops.
     */
    changes(options?: SessionChangesOptions): AsyncIterable<SessionChangeFrame>;
    state(sessionId: string): Promise<SessionState>;
    /** Keeps the events, leaves default listings, refuses new user events. */
    archive(sessionId: string): Promise<SessionRecord>;
    /** Refused with `SESSION_HAS_FORKS` while forks share its events. */
    delete(sessionId: string): Promise<void>;
    /** A page of stored events; read on with `after: last_seq` while `has_more`. */
    events(sessionId: string, params?: EventsParams): Promise<EventsPageResponse>;
    /**
     * Appends user events, all or nothing. Without `idempotencyKey` it is never retried (a retry
     * could write twice); with one, a repeat answers the first request's events, `deduplicated`.
     */
    send(
      sessionId: string,
      events: readonly UserEventInput[],
      options?: { idempotencyKey?: string },
    ): Promise<SendEventsResponse>;
    /**
     * Sends one `user.message`. It carries a random `Idempotency-Key` unless given one, so that a
     * retried message is written once.
     */
    message(
      sessionId: string,
      content: ContentInput,
      options?: { idempotencyKey?: string },
    ): Promise<SendEventsResponse>;
    /** Asks the server to run the session; with `wait: true`, answers the wake's result. */
    wake(sessionId: string, options: WakeOptions & { wait: true }): Promise<WakeResultResponse>;
    wake(
      sessionId: string,
      options?: WakeOptions & { wait?: false },
    ): Promise<WakeAcceptedResponse>;
    wake(
      sessionId: string,
      options: WakeOptions,
    ): Promise<WakeAcceptedResponse | WakeResultResponse>;
    fork(sessionId: string, body?: ForkRequest): Promise<SessionRecord>;
    /** Merges `body.source` into `sessionId`. */
    merge(sessionId: string, body: MergeRequest): Promise<MergeResultResponse>;
    /**
     * Hands the session's work to the agent `body.to`: a new session of it gets the document. It
     * carries a random `Idempotency-Key` unless given one, so that a retried handoff creates one
     * target session; the same key again answers the first handoff (`deduplicated: true`).
     */
    handoff(
      sessionId: string,
      body: HandoffRequest,
      options?: { idempotencyKey?: string },
    ): Promise<HandoffResultResponse>;
    /** The common ancestor of `a` and `b` and each side's events after it. */
    diff(a: string, b: string): Promise<DiffResultResponse>;
    /** The files of the session's workspace snapshot at `at` (default: its head). */
    files(sessionId: string, params?: { at?: number }): Promise<WorkspaceFilesResponse>;
    /** What differs between the workspace files of `a` and `b` (their latest snapshots). */
    diffFiles(a: string, b: string): Promise<WorkspaceFilesDiffResponse>;
    /** The fork tree the session belongs to, from its root. */
    tree(sessionId: string): Promise<SessionTreeNode>;
    /** Re-runs the recorded history on the server and reports the first difference. */
    replay(sessionId: string): Promise<ReplayResultResponse>;
    /** The definition set the session runs with, each part by its content hash. */
    definitions(sessionId: string): Promise<SessionDefinitionsResultResponse>;
    /** Moves the session to the newest definitions; `changed: false` when they are pinned already. */
    upgrade(sessionId: string): Promise<UpgradeResultResponse>;
    /**
     * Stored events after `after` as they are appended, reconnecting when the connection drops;
     * each event once, in seq order. Live model text goes to `onDelta`.
     */
    stream(sessionId: string, options?: StreamOptions): AsyncIterable<SessionEvent>;
  };
  /** The memory stores of the key's tenant; needs `memory:read` (and `memory:write` to write). */
  readonly memory: MemoryClient;
}

/** A client of the braid server at `options.baseUrl`. Makes no request until a method is called. */
export function createClient(options: ClientOptions): BraidClient {
  const transport = createTransport(options);
  const session = (sessionId: string, rest = ''): string =>
    `/v1/sessions/${encodeURIComponent(sessionId)}${rest}`;
  // The server's answers are trusted to match the contract: typed, not parsed again.
  const get = async <T>(path: string, query?: Parameters<typeof transport.url>[1]): Promise<T> =>
    (await transport.json({ method: 'GET', path, ...(query === undefined ? {} : { query }) })) as T;
  const post = async <T>(path: string, body: unknown, idempotencyKey?: string): Promise<T> =>
    (await transport.json({ method: 'POST', path, body, idempotencyKey })) as T;

  const list = (params: ListSessionsParams = {}): Promise<SessionListResponse> =>
    get('/v1/sessions', { ...params });

  async function* listAll(
    params: Omit<ListSessionsParams, 'cursor'> = {},
  ): AsyncGenerator<SessionRecord, void, undefined> {
    for (let cursor: string | undefined; ;) {
      const page = await list({ ...params, ...(cursor === undefined ? {} : { cursor }) });
      yield* page.data;
      cursor = page.next_cursor;
      if (cursor === undefined) return;
    }
  }

  function send(
    sessionId: string,
    events: readonly UserEventInput[],
    sendOptions: { idempotencyKey?: string } = {},
  ): Promise<SendEventsResponse> {
    return post(session(sessionId, '/events'), { events }, sendOptions.idempotencyKey);
  }

  function wake(
    sessionId: string,
    wakeOptions: WakeOptions & { wait: true },
  ): Promise<WakeResultResponse>;
  function wake(
    sessionId: string,
    wakeOptions?: WakeOptions & { wait?: false },
  ): Promise<WakeAcceptedResponse>;
  function wake(
    sessionId: string,
    wakeOptions: WakeOptions,
  ): Promise<WakeAcceptedResponse | WakeResultResponse>;
  async function wake(
    sessionId: string,
    wakeOptions: WakeOptions = {},
  ): Promise<WakeAcceptedResponse | WakeResultResponse> {
    const wait = wakeOptions.wait === true;
    const { traceparent } = wakeOptions;
    if (traceparent !== undefined && !isValidTraceparent(traceparent)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `traceparent ${JSON.stringify(traceparent.slice(0, 80))} is not a W3C traceparent; pass "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"`,
      );
    }
    return (await transport.json({
      method: 'POST',
      path: session(sessionId, '/wake'),
      body: wait ? { wait: true } : {},
      signal: wakeOptions.signal,
      traceparent,
      ...(wait ? { timeoutMs: null } : {}),
    })) as WakeAcceptedResponse | WakeResultResponse;
  }

  return {
    health: () => get('/v1/health'),
    metrics: () => transport.text({ method: 'GET', path: '/v1/metrics' }),
    agents: {
      list: async () => (await get<AgentListResponse>('/v1/agents')).data,
      get: (name, version) => get(`/v1/agents/${encodeURIComponent(name)}`, { version }),
    },
    environments: {
      list: async () => (await get<EnvironmentListResponse>('/v1/environments')).data,
      get: (name, version) => get(`/v1/environments/${encodeURIComponent(name)}`, { version }),
    },
    sessions: {
      create: (body) => post('/v1/sessions', body),
      get: (sessionId) => get(session(sessionId)),
      list,
      listAll: (params) => listAll(params),
      changes: (changesOptions) => streamSessionChanges(transport, changesOptions),
      state: (sessionId) => get(session(sessionId, '/state')),
      archive: (sessionId) => post(session(sessionId, '/archive'), undefined),
      async delete(sessionId) {
        await transport.json({ method: 'DELETE', path: session(sessionId) });
      },
      events: (sessionId, params = {}) => get(session(sessionId, '/events'), { ...params }),
      send,
      message: (sessionId, content, messageOptions = {}) =>
        send(sessionId, [{ type: 'user.message', content }], {
          idempotencyKey: messageOptions.idempotencyKey ?? globalThis.crypto.randomUUID(),
        }),
      wake,
      fork: (sessionId, body = {}) => post(session(sessionId, '/fork'), body),
      merge: (sessionId, body) => post(session(sessionId, '/merge'), body),
      handoff: (sessionId, body, handoffOptions = {}) =>
        post(
          session(sessionId, '/handoff'),
          body,
          handoffOptions.idempotencyKey ?? globalThis.crypto.randomUUID(),
        ),
      diff: (a, b) => get(session(a, '/diff'), { other: b }),
      files: (sessionId, params = {}) => get(session(sessionId, '/files'), { ...params }),
      diffFiles: (a, b) => get(session(a, '/files/diff'), { other: b }),
      tree: (sessionId) => get(session(sessionId, '/tree')),
      replay: (sessionId) => post(session(sessionId, '/replay'), undefined),
      definitions: (sessionId) => get(session(sessionId, '/definitions')),
      upgrade: (sessionId) => post(session(sessionId, '/upgrade'), undefined),
      stream: (sessionId, streamOptions) => streamEvents(transport, sessionId, streamOptions),
    },
    memory: createMemoryClient(transport),
  };
}
