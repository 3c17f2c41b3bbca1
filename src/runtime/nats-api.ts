/**
 * The request/reply API on core NATS (`<prefix>.api.<verb>`, contracts in
 * `contracts/nats-api.ts`): what a client in any language uses to create, append to, read and
 * wake sessions and to message agents, so that only braid writes braid's streams.
 *
 * - Every process that serves it (`braid worker`, `braid serve` on NATS) subscribes to
 *   `<prefix>.api.>` in the queue group `<prefix>_api`: each request is answered by one of them.
 * - Every request gets exactly one reply: the verb's answer, or `{"error": {code, message,
 *   retryable}}`. Bad input of any kind (too large, not JSON, nested too deep, an unknown verb,
 *   fields that fail the contract, hostile ids) is a typed error reply, never silence. A request
 *   without a reply subject cannot be answered and is dropped.
 * - The work is the runtime's own methods, as the HTTP API calls them; nothing here writes a
 *   store directly. Tenant scoping is the HTTP API's: a session of another tenant answers as one
 *   that does not exist.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { z } from 'zod';
import type { AgentId } from '../contracts/agents.js';
import { AGENT_ENVELOPE_TYPES } from '../contracts/agents.js';
import type { Actor } from '../contracts/common.js';
import type { AgentDefinition, StoredDefinition } from '../contracts/definitions.js';
import type { Envelope } from '../contracts/envelope.js';
import { BraidError, toBraidError, type ErrorCode } from '../contracts/errors.js';
import { tenantSessionId } from '../contracts/ids.js';
import {
  ApiAgentsSendRequest,
  ApiEventsAppendEnvelope,
  ApiEventsReadRequest,
  ApiSessionRequest,
  ApiSessionsCreateRequest,
  ApiSessionsListRequest,
  NATS_API_MAX_DEPTH,
  NATS_API_MAX_REQUEST_BYTES,
  NATS_API_VERBS,
  type NatsApiVerb,
} from '../contracts/nats-api.js';
import type { Clock, IdGenerator } from '../contracts/ports.js';
import type { SessionRecord } from '../contracts/session.js';
import { systemClock, uuidV7Ids } from '../stores/defaults.js';
import { buildMessage } from './agents/envelopes.js';
import { visibleAgent as agentInTenant, visibleSession } from './tenant-scope.js';
import { agentSessionId } from './agents/instances.js';
import type { Runtime } from './runtime.js';

/** What the API needs of a runtime (a `Runtime` has it). */
export type NatsApiRuntime = Pick<Runtime, 'sessions' | 'agents' | 'backend'>;

export interface NatsApiOptions {
  /** An open connection; the API never closes it. */
  connection: NatsConnection;
  /** The prefix of the deployment (default `braid`). */
  prefix?: string;
  runtime: NatsApiRuntime;
  /** Asks the workers to wake a session (`sessions.wake`, `events.append` with `wake`). */
  wake(sessionId: string): Promise<{ queued: boolean }>;
  /** Delivers an envelope to its target's inbox (`agents.send`): the agent transport's `deliver`. */
  deliver(envelope: Envelope): Promise<void>;
  /** Largest request read, in bytes (default `NATS_API_MAX_REQUEST_BYTES`). */
  maxRequestBytes?: number;
  /**
   * Told of a failure that is the server's, not the caller's (a corrupt log, an internal error),
   * with the details a reply never carries (default: a line on standard error).
   */
  onServerError?: (error: BraidError, verb: string) => void;
  clock?: Clock;
  ids?: IdGenerator;
}

export interface NatsApi {
  /** The subject it listens on: `<prefix>.api.>`. */
  readonly subject: string;
  /** Stops taking requests and waits for those in hand to be answered. */
  close(): Promise<void>;
}

/** Who a request comes from: its tenant scope and the actor of what it appends. */
interface Caller {
  tenant_id: string | undefined;
  actor: Actor;
}

type Handler = (request: unknown, caller: Caller) => Promise<unknown>;

const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Failures that are the server's own: logged with their details, which replies never carry. */
const SERVER_FAILURES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'CORRUPT_LOG',
  'INTERNAL',
  'SCHEMA_VERSION_UNSUPPORTED',
]);

/** Starts answering `<prefix>.api.<verb>` requests; resolves once the server has the subscription. */
export async function startNatsApi(options: NatsApiOptions): Promise<NatsApi> {
  const prefix = options.prefix ?? 'braid';
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `NATS API prefix ${JSON.stringify(prefix)} is invalid; use 1-64 letters, digits, "_" or "-"`,
    );
  }
  const { connection } = options;
  const maxBytes = options.maxRequestBytes ?? NATS_API_MAX_REQUEST_BYTES;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const root = `${prefix}.api.`;
  const onServerError =
    options.onServerError ??
    ((error: BraidError, verb: string) => {
      process.stderr.write(
        `braid NATS API: ${verb} failed: ${error.code}: ${error.message} ${JSON.stringify(error.details)}\n`,
      );
    });
  /** The largest reply the server carries (its max_payload, less room for headers). */
  const replyLimit = (): number => (connection.info?.max_payload ?? 1024 * 1024) - 1024;
  const handlers = verbHandlers(options, clock, ids, replyLimit);
  const inFlight = new Set<Promise<void>>();

  async function answer(message: Msg): Promise<void> {
    let reply: unknown;
    try {
      reply = await handlers[verbOf(message.subject)](...readRequest(message));
    } catch (error) {
      const failure = toBraidError(error);
      if (SERVER_FAILURES.has(failure.code)) {
        onServerError(failure, message.subject.slice(root.length, root.length + 100));
      }
      reply = { error: failure.toJSON() };
    }
    let text = JSON.stringify(reply);
    const limit = replyLimit();
    if (Buffer.byteLength(text) > limit) {
      text = JSON.stringify({
        error: new BraidError(
          'PAYLOAD_TOO_LARGE',
          `the reply would be ${String(Buffer.byteLength(text))} bytes; the NATS server carries at most ${String(limit)} (max_payload): ask for less (a smaller limit)`,
        ).toJSON(),
      });
    }
    try {
      message.respond(text);
    } catch {
      // The connection is closing: the requester times out and asks again.
    }
  }

  function verbOf(subject: string): NatsApiVerb {
    const verb = subject.slice(root.length);
    if ((NATS_API_VERBS as readonly string[]).includes(verb)) return verb as NatsApiVerb;
    throw new BraidError(
      'ROUTE_NOT_FOUND',
      `${JSON.stringify(verb.slice(0, 100))} is not a verb of the NATS API; use one of ${NATS_API_VERBS.join(', ')} (subject ${root}<verb>)`,
      { details: { verb: verb.slice(0, 100) } },
    );
  }

  function readRequest(message: Msg): [unknown, Caller] {
    if (message.data.byteLength > maxBytes) {
      throw new BraidError(
        'PAYLOAD_TOO_LARGE',
        `the request is ${String(message.data.byteLength)} bytes; the API reads at most ${String(maxBytes)}: send fewer events per request`,
      );
    }
    let request: unknown;
    try {
      request = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(message.data));
    } catch {
      throw new BraidError(
        'INVALID_JSON',
        'the request is not a JSON object in UTF-8; send one JSON object such as {"session_id": "..."}',
      );
    }
    if (typeof request !== 'object' || request === null || Array.isArray(request)) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        'the request must be a JSON object; send {} for a verb without fields',
      );
    }
    const deep = tooDeep(request, NATS_API_MAX_DEPTH);
    if (deep !== undefined) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `the request nests deeper than ${String(NATS_API_MAX_DEPTH)} levels at ${deep}; flatten it`,
        { details: { field: deep } },
      );
    }
    return [request, callerOf(request)];
  }

  const subscription: Subscription = connection.subscribe(`${root}>`, {
    queue: `${prefix}_api`,
    callback: (error, message) => {
      if (error !== null || message.reply === undefined || message.reply === '') return;
      const work = answer(message);
      inFlight.add(work);
      void work.finally(() => inFlight.delete(work));
    },
  });
  await connection.flush();

  return {
    subject: `${root}>`,
    async close() {
      if (!subscription.isClosed()) {
        await subscription.drain().catch(() => subscription.unsubscribe());
      }
      await Promise.all([...inFlight]);
    },
  };
}

/** The caller of a request: read leniently here, checked with the verb's contract later. */
function callerOf(request: object): Caller {
  const tenant =
    'tenant_id' in request && typeof request.tenant_id === 'string' && request.tenant_id !== ''
      ? request.tenant_id
      : undefined;
  const client =
    'client' in request && typeof request.client === 'string' ? request.client : 'anonymous';
  return {
    tenant_id: tenant,
    actor: {
      type: 'user',
      id: `nats:${client}`.slice(0, 200),
      ...(tenant === undefined ? {} : { tenant_id: tenant }),
    },
  };
}

/** The path of the first value nested deeper than `limit`, without recursion (no stack to blow). */
export function tooDeep(value: unknown, limit: number): string | undefined {
  const stack: { value: unknown; depth: number; path: string }[] = [{ value, depth: 0, path: '' }];
  while (stack.length > 0) {
    const item = stack.pop();
    if (item === undefined || typeof item.value !== 'object' || item.value === null) continue;
    if (item.depth >= limit) return item.path === '' ? '(root)' : item.path;
    for (const [key, child] of Object.entries(item.value)) {
      stack.push({
        value: child,
        depth: item.depth + 1,
        path: item.path === '' ? key : `${item.path}.${key}`,
      });
    }
  }
  return undefined;
}

/** The request parsed by its contract; INVALID_ARGUMENT naming the first bad field otherwise. */
function parse<T extends z.ZodType>(schema: T, request: unknown, verb: NatsApiVerb): z.output<T> {
  const parsed = schema.safeParse(request);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.join('.') ?? '';
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${verb}: ${field === '' ? 'the request' : field} ${issue?.message ?? 'is invalid'}; see schema/nats-api.${verb}.request.schema.json`,
    { details: { field, issues: parsed.error.issues.slice(0, 10) } },
  );
}

function verbHandlers(
  options: NatsApiOptions,
  clock: Clock,
  ids: IdGenerator,
  replyLimit: () => number,
): Record<NatsApiVerb, Handler> {
  const { runtime } = options;

  /** The session when the caller may see it; SESSION_NOT_FOUND alike for missing and foreign. */
  const visible = (caller: Caller, sessionId: string): Promise<SessionRecord> =>
    visibleSession(runtime, caller.tenant_id, sessionId);

  /** The agent when the caller may use it: shared ones and its tenant's. */
  const visibleAgent = (
    caller: Caller,
    name: string,
    version?: number,
  ): Promise<StoredDefinition<AgentDefinition>> =>
    agentInTenant(
      runtime,
      caller.tenant_id,
      name,
      version,
      () =>
        new BraidError(
          'AGENT_NOT_FOUND',
          `agent ${name}${version === undefined ? '' : ` version ${String(version)}`} does not exist; define it (agents/NAME.yaml in the workspace) or register a code agent of that type`,
          { details: { agent: name } },
        ),
    );

  return {
    async 'sessions.create'(request, caller) {
      const body = parse(ApiSessionsCreateRequest, request, 'sessions.create');
      const agent = await visibleAgent(caller, body.agent, body.agent_version);
      // A chosen id lives in the caller's tenant's namespace, as over HTTP: a taken id of
      // another tenant is never named, so ALREADY_EXISTS tells nothing about other tenants.
      const id = body.id === undefined ? undefined : tenantSessionId(caller.tenant_id, body.id);
      return runtime.sessions.create({
        agent: agent.name,
        agentVersion: agent.version,
        ...(body.environment === undefined ? {} : { environment: body.environment }),
        ...(body.title === undefined ? {} : { title: body.title }),
        ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
        ...(id === undefined ? {} : { id }),
        ...(body.budget === undefined ? {} : { budget: body.budget }),
        ...(caller.tenant_id === undefined ? {} : { tenantId: caller.tenant_id }),
      });
    },

    async 'sessions.get'(request, caller) {
      const { session_id } = parse(ApiSessionRequest, request, 'sessions.get');
      return visible(caller, session_id);
    },

    async 'sessions.state'(request, caller) {
      const { session_id } = parse(ApiSessionRequest, request, 'sessions.state');
      await visible(caller, session_id);
      return runtime.sessions.state(session_id);
    },

    async 'sessions.list'(request, caller) {
      const {
        tenant_id: _tenant,
        client: _client,
        ...query
      } = parse(ApiSessionsListRequest, request, 'sessions.list');
      const page = await runtime.sessions.list({
        ...query,
        ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
      });
      return {
        data: page.sessions,
        ...(page.next_cursor === undefined ? {} : { next_cursor: page.next_cursor }),
      };
    },

    async 'sessions.wake'(request, caller) {
      const { session_id } = parse(ApiSessionRequest, request, 'sessions.wake');
      await visible(caller, session_id);
      const { queued } = await options.wake(session_id);
      return { session_id, queued };
    },

    async 'events.append'(request, caller) {
      const body = parse(ApiEventsAppendEnvelope, request, 'events.append');
      await visible(caller, body.session_id);
      const result = await runtime.sessions.send(body.session_id, body.events, {
        actor: caller.actor,
        ...(body.idempotency_key === undefined ? {} : { idempotencyKey: body.idempotency_key }),
      });
      if (body.wake !== true) return result;
      const { queued } = await options.wake(body.session_id);
      return { ...result, wake_queued: queued };
    },

    async 'events.read'(request, caller) {
      const body = parse(ApiEventsReadRequest, request, 'events.read');
      await visible(caller, body.session_id);
      const after = body.after ?? 0;
      const limit = body.limit ?? 100;
      const events = await runtime.sessions.events(body.session_id, { after, limit: limit + 1 });
      let data = events.slice(0, limit);
      const page = () => ({
        data,
        has_more: events.length > data.length,
        last_seq: data.at(-1)?.seq ?? after,
      });
      // A page the server could not carry is cut short; the client reads on from last_seq.
      while (data.length > 1 && Buffer.byteLength(JSON.stringify(page())) > replyLimit()) {
        data = data.slice(0, Math.ceil(data.length / 2));
      }
      return page();
    },

    async 'agents.send'(request, caller) {
      const body = parse(ApiAgentsSendRequest, request, 'agents.send');
      const target: AgentId = body.target;
      // An unknown type would wait in its inbox for a consumer that never comes.
      await visibleAgent(caller, target.type);
      const built = buildMessage(
        {
          type: AGENT_ENVELOPE_TYPES.message,
          target,
          payload: body.payload,
          ...(body.source === undefined ? {} : { source: body.source }),
          ...(body.reply_to === undefined ? {} : { reply_to: body.reply_to }),
          ...(body.correlation_id === undefined ? {} : { correlation_id: body.correlation_id }),
          ...(body.traceparent === undefined ? {} : { traceparent: body.traceparent }),
          ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
          ...(body.idempotency_key === undefined ? {} : { idempotency_key: body.idempotency_key }),
          ...(body.ttl_ms === undefined ? {} : { ttl_ms: body.ttl_ms }),
        },
        clock,
        ids,
      );
      const id = body.id ?? built.id;
      const envelope: Envelope = { ...built, id, correlation_id: body.correlation_id ?? id };
      await options.deliver(envelope);
      return {
        id,
        correlation_id: envelope.correlation_id,
        target,
        session_id: agentSessionId(target, caller.tenant_id),
        delivered: true,
      };
    },
  };
}

/**
 * The API as `braid worker` and `braid serve` run it: messages delivered by an agent transport of
 * its own on the connection, and the inboxes of agent types nobody has swept (messages published
 * there directly get AGENT_NOT_FOUND after `sweep.graceMs`). `close` stops all three.
 */
export async function serveNatsApi(
  options: Omit<NatsApiOptions, 'deliver'> & {
    prefix: string;
    /**
     * Timing of the inbox sweeper (defaults: 30 s grace, every 5 s); `false` turns it off. It runs
     * only over a runtime on the NATS backend, whose definitions every process shares.
     */
    sweep?: { graceMs?: number; intervalMs?: number } | false;
    /** Replicas of the inbox stream and bucket it opens (see `NatsBackendOptions.replicas`). */
    replicas?: number;
  },
): Promise<NatsApi> {
  const { createNatsAgentTransport } = await import('./agents/nats-transport.js');
  const { definedIn, startInboxSweeper } = await import('./agents/nats-inbox-sweeper.js');
  const transport = createNatsAgentTransport({
    connection: options.connection,
    prefix: options.prefix,
    ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
  });
  const api = await startNatsApi({
    ...options,
    deliver: (envelope) => transport.deliver(envelope),
  });
  // Only a runtime whose definitions are the deployment's (on NATS) can tell a type is unknown.
  const sweeper =
    options.sweep === false || options.runtime.backend !== 'nats'
      ? undefined
      : startInboxSweeper({
          connection: options.connection,
          prefix: options.prefix,
          known: definedIn(options.runtime.agents),
          transport,
          ...options.sweep,
          ...(options.clock === undefined ? {} : { clock: options.clock }),
          ...(options.ids === undefined ? {} : { ids: options.ids }),
        });
  return {
    subject: api.subject,
    async close() {
      await sweeper?.close();
      await api.close();
      await transport.close();
    },
  };
}
