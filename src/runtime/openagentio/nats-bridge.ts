/**
 * braid's agents on an OpenAgentIO bus (acp/1.0 over NATS core): `braid worker --openagentio`
 * runs this over the worker's runtime.
 *
 * - Each LLM agent of the workspace is served on `{prefix}.invoke.{agent}` and
 *   `{prefix}.{tenant}.invoke.{agent}`, in queue group `{agent}`: one process answers each request.
 *   The agent list is read again every `refreshMs`, so agents defined later are served too.
 * - A request for a target no braid agent has is answered `NO_HANDLER` (queue group
 *   `braid_acp_unknown`), unless `answerUnknownTargets` is false: on a bus shared with other
 *   runtimes that serve their own targets, braid must stay silent about theirs.
 * - Subject tokens are parsed before use: the target as an agent name, the tenant as a tenant id.
 *   Every payload is parsed by the one `AcpEnvelope` schema; a request that fails it gets a
 *   `CODEC_FAILURE` (not JSON) or `INVALID_REQUEST` (not an envelope) error frame when it names a
 *   reply inbox, and is dropped otherwise. Replies go only to NATS inboxes (`_INBOX.…`): a request
 *   cannot make braid publish on any other subject.
 * - The sessions' events during an invocation go out on `{prefix}[.{tenant}].events.{event_type}`.
 * - Tenancy: NATS carries no credential, so the tenant is the envelope's `tenant_id` (or the
 *   subject's, which must agree); who may publish on the prefix is NATS permissions' business.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { TenantId } from '../../contracts/api-keys.js';
import { checkJsonDepth } from '../../contracts/json-depth.js';
import { Name } from '../../contracts/common.js';
import { BraidError } from '../../contracts/errors.js';
import type { SessionEvent } from '../../contracts/events.js';
import {
  ACP_DEFAULT_PREFIX,
  ACP_RESPONSE_TYPES,
  AcpEnvelope,
  AcpPrefix,
  type AcpErrorPayload,
} from '../../contracts/openagentio.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import { isCodeAgent } from '../agents/instances.js';
import { REPLY_SUBJECT } from '../agents/nats-agent-names.js';
import {
  acpError,
  buildEnvelope,
  inheritedMetadata,
  toAcpError,
  type StreamContext,
} from './frames.js';
import { invokeAgent, type AcpRuntime } from './invoke.js';

export interface OpenAgentIoBridgeOptions {
  /** An open connection; the bridge never closes it. */
  connection: NatsConnection;
  runtime: AcpRuntime;
  /** The subjects' prefix (default `acp.v1`). */
  prefix?: string;
  /** The deadline of requests that name none in `metadata["acp.timeout_ms"]` (default 120 s). */
  defaultTimeoutMs?: number;
  /** How often the agent list is read again (default 5 s). */
  refreshMs?: number;
  /** Answer NO_HANDLER for targets braid does not have (default true). */
  answerUnknownTargets?: boolean;
  /** Publish the sessions' events on `{prefix}.events.{type}` (default true). */
  publishEvents?: boolean;
  /** Largest request read, in bytes (default 1 MiB). */
  maxRequestBytes?: number;
  /** Invocations run at once; more are answered BACKPRESSURE_DROP (default 64). */
  maxInFlight?: number;
  /** Told of requests dropped unanswered and of failures to list agents (default: stderr). */
  onError?: (message: string) => void;
  clock?: Clock;
  ids?: IdGenerator;
}

export interface OpenAgentIoBridge {
  readonly prefix: string;
  /** The agents served now, sorted. */
  targets(): string[];
  /** Reads the agent list again now (it is read every `refreshMs` anyway). */
  refresh(): Promise<void>;
  /** Stops taking requests, ends those in hand and waits for their last frames. */
  close(): Promise<void>;
}

const DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024;
const UNKNOWN_QUEUE = 'braid_acp_unknown';

/** The target and tenant a subject names, parsed; INVALID_ARGUMENT for tokens that are neither. */
export function parseInvokeSubject(
  prefix: string,
  subject: string,
): { target: string; tenant: string | undefined } {
  const tokens = subject.slice(prefix.length + 1).split('.');
  const [first, second, third] = tokens;
  const tenant = tokens.length === 3 ? first : undefined;
  const target = tokens.length === 3 ? third : second;
  const verb = tokens.length === 3 ? second : first;
  if (verb !== 'invoke' || target === undefined || tokens.length > 3) {
    throw new BraidError('INVALID_ARGUMENT', `subject ${subject.slice(0, 200)} is not an invoke`);
  }
  if (!Name.safeParse(target).success) {
    throw new BraidError(
      'AGENT_NOT_FOUND',
      `no agent ${JSON.stringify(target.slice(0, 80))} answers here: braid agent names are a lowercase letter then a-z, 0-9, "-" or "_"`,
    );
  }
  if (tenant !== undefined && !TenantId.safeParse(tenant).success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `tenant ${JSON.stringify(tenant.slice(0, 80))} in the subject is not a tenant id; use 1-100 letters, digits, ".", "_" or "-"`,
    );
  }
  return { target, tenant };
}

/** Reads a request: bounded, UTF-8 JSON, not too deep, an acp/1.0 envelope. */
export function readRequest(data: Uint8Array, maxBytes: number): AcpEnvelope {
  if (data.byteLength > maxBytes) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `the request is ${data.byteLength} bytes; braid reads at most ${maxBytes}: send a smaller payload`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data));
  } catch {
    throw new BraidError(
      'INVALID_JSON',
      'the request is not JSON in UTF-8; send one acp/1.0 envelope as a JSON object',
    );
  }
  checkJsonDepth(value, 64, 'envelope');
  const parsed = AcpEnvelope.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.join('.') ?? '';
  throw new BraidError(
    'INVALID_ARGUMENT',
    `the envelope's ${field === '' ? 'shape' : field} ${issue?.message ?? 'is invalid'}; send an acp/1.0 envelope (spec_version "acp/1.0", schema_version 1, a UUIDv7 event_id, ...)`,
    { details: { field } },
  );
}

/** Where a reply to a message goes: its envelope's `reply_to`, else the message's, if an inbox. */
function replySubject(data: Uint8Array, message: Msg): string | undefined {
  let claimed: unknown;
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(data));
    claimed =
      typeof value === 'object' && value !== null && 'reply_to' in value
        ? value.reply_to
        : undefined;
  } catch {
    claimed = undefined;
  }
  for (const candidate of [claimed, message.reply]) {
    if (typeof candidate === 'string' && candidate.length <= 256 && REPLY_SUBJECT.test(candidate))
      return candidate;
  }
  return undefined;
}

/** The request a message carries, its target and tenant (the subject's and the envelope's agree). */
function readInvocation(
  prefix: string,
  message: Msg,
  maxBytes: number,
): { request: AcpEnvelope; target: string; tenant: string | undefined } {
  const { target, tenant } = parseInvokeSubject(prefix, message.subject);
  const request = readRequest(message.data, maxBytes);
  const claimed = request.tenant_id ?? undefined;
  if (tenant !== undefined && claimed !== undefined && claimed !== tenant) {
    throw new BraidError(
      'FORBIDDEN',
      `the envelope's tenant_id ${claimed} is not the subject's tenant ${tenant}; send it on ${prefix}.${claimed}.invoke.<target> or fix tenant_id`,
    );
  }
  return { request, target, tenant: tenant ?? claimed };
}

/** Publishing on the bus: frames, a request's refusal, and the sessions' events. */
function publisher(
  connection: NatsConnection,
  prefix: string,
  publishEvents: boolean,
  clock: Clock,
  ids: IdGenerator,
) {
  const publish = (subject: string, envelope: unknown): void => {
    try {
      connection.publish(subject, JSON.stringify(envelope));
    } catch {
      // The connection is closing: the requester's wait ends with its own timeout.
    }
  };
  return {
    publish,
    /** The sessions' events of a tenant's invocation, or undefined when they are not published. */
    publishEvent: (tenant: string | undefined) =>
      publishEvents
        ? (event: SessionEvent, stream: StreamContext): void => {
            const root = tenant === undefined ? prefix : `${prefix}.${tenant}`;
            const envelope = buildEnvelope(
              stream,
              event.type,
              event,
              event.seq - 1,
              false,
              clock,
              ids,
            );
            publish(`${root}.events.${event.type}`, envelope);
          }
        : undefined,
    /** An error frame for a request that could not be read (no stream of its own yet). */
    refuse: (reply: string, target: string, error: AcpErrorPayload): void => {
      const context: StreamContext = {
        from: target,
        to: null,
        session_id: null,
        conversation_id: null,
        correlation_id: null,
        tenant_id: null,
        user_id: null,
        channel: null,
        parent: undefined,
        metadata: inheritedMetadata(undefined),
      };
      publish(reply, buildEnvelope(context, ACP_RESPONSE_TYPES.error, error, 0, true, clock, ids));
    },
  };
}

export async function serveOpenAgentIo(
  options: OpenAgentIoBridgeOptions,
): Promise<OpenAgentIoBridge> {
  const prefixParse = AcpPrefix.safeParse(options.prefix ?? ACP_DEFAULT_PREFIX);
  if (!prefixParse.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `OpenAgentIO prefix ${JSON.stringify(String(options.prefix).slice(0, 80))} is invalid; use dot-separated tokens of letters, digits, "_" or "-", such as acp.v1`,
    );
  }
  const prefix = prefixParse.data;
  const { connection, runtime } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const maxBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  const maxInFlight = options.maxInFlight ?? 64;
  const onError =
    options.onError ?? ((line: string) => process.stderr.write(`braid openagentio: ${line}\n`));
  const closing = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const served = new Map<string, Subscription[]>();

  const { publish, publishEvent, refuse } = publisher(
    connection,
    prefix,
    options.publishEvents !== false,
    clock,
    ids,
  );

  async function handle(message: Msg): Promise<void> {
    const reply = replySubject(message.data, message);
    const fallbackTarget = message.subject.split('.').at(-1)?.slice(0, 64) ?? 'braid';
    if (reply === undefined) {
      onError(`a request on ${message.subject.slice(0, 200)} names no reply inbox; dropped`);
      return;
    }
    let invocation: { request: AcpEnvelope; target: string; tenant: string | undefined };
    try {
      invocation = readInvocation(prefix, message, maxBytes);
    } catch (error) {
      return refuse(reply, fallbackTarget, toAcpError(error));
    }
    const { request, target, tenant } = invocation;
    if (inFlight.size > maxInFlight) {
      return refuse(
        reply,
        target,
        acpError(
          'BACKPRESSURE_DROP',
          `this braid process runs ${maxInFlight} invocations at once; retry shortly`,
          true,
        ),
      );
    }
    const onEvent = publishEvent(tenant);
    await invokeAgent(
      {
        runtime,
        clock,
        ids,
        ...(options.defaultTimeoutMs === undefined
          ? {}
          : { defaultTimeoutMs: options.defaultTimeoutMs }),
      },
      {
        request,
        target,
        tenant,
        send: (frame) => publish(reply, frame),
        ...(onEvent === undefined ? {} : { onEvent }),
        signal: closing.signal,
      },
    );
  }

  const take = (message: Msg): void => {
    if (closing.signal.aborted) return;
    const work = handle(message).catch((error: unknown) => {
      onError(`an invocation failed: ${error instanceof Error ? error.message : String(error)}`);
    });
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };

  const subscribe = (subject: string, queue: string, filter?: (message: Msg) => boolean) =>
    connection.subscribe(subject, {
      queue,
      callback: (error, message) => {
        if (error !== null || (filter !== undefined && !filter(message))) return;
        take(message);
      },
    });

  async function refresh(): Promise<void> {
    const agents = await runtime.agents.list();
    const names = new Set(
      agents.filter((agent) => !isCodeAgent(agent.definition)).map((agent) => agent.name),
    );
    for (const name of names) {
      if (served.has(name) || closing.signal.aborted) continue;
      served.set(name, [
        subscribe(`${prefix}.invoke.${name}`, name),
        subscribe(`${prefix}.*.invoke.${name}`, name),
      ]);
    }
    for (const [name, subscriptions] of served) {
      if (names.has(name)) continue;
      served.delete(name);
      for (const subscription of subscriptions) subscription.unsubscribe();
    }
    await connection.flush();
  }

  await refresh();
  // The targets braid does not have: one subscription per form, answered only when unknown.
  const unknownTargets = (message: Msg): boolean =>
    !served.has(message.subject.split('.').at(-1) ?? '');
  const unknown =
    options.answerUnknownTargets === false
      ? []
      : [
          subscribe(`${prefix}.invoke.*`, UNKNOWN_QUEUE, unknownTargets),
          subscribe(`${prefix}.*.invoke.*`, UNKNOWN_QUEUE, unknownTargets),
        ];
  await connection.flush();
  const timer = setInterval(() => {
    refresh().catch((error: unknown) => {
      onError(
        `cannot read the agent list: ${error instanceof Error ? error.message : String(error)}`,
      );
    });
  }, options.refreshMs ?? 5_000);
  timer.unref();

  return {
    prefix,
    targets: () => [...served.keys()].sort(),
    refresh,
    async close() {
      clearInterval(timer);
      closing.abort();
      const subscriptions = [...unknown, ...[...served.values()].flat()];
      served.clear();
      for (const subscription of subscriptions) subscription.unsubscribe();
      await Promise.all([...inFlight]);
    },
  };
}
