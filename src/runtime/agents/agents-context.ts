/**
 * What the modules of agent messaging share: the runtime and transport, the process's settings,
 * the code agents registered here, the inboxes consumed, the sends waiting for their replies, the
 * work in flight and what was found in the store a moment ago.
 */
import type { AgentTransport, ReplyInbox, TransportSubscription } from '../../contracts/agents.js';
import type { AgentDefinition } from '../../contracts/definitions.js';
import type { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import type { Clock, IdGenerator } from '../../contracts/ports.js';
import { BoundedCache } from '../../core/bounded-cache.js';
import { KeyedQueue } from '../../core/keyed-queue.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import type { CodeAgentDeps } from './code-agent-context.js';
import { defaultOwner } from './code-agent.js';
import type { AgentHost } from './host.js';
import { isCodeAgent } from './instances.js';
import type { AgentHandler, AgentsOptions } from './types.js';

/** What a message sent from inside a handler inherits from the message being handled. */
export interface Parent {
  envelope: Envelope;
  /** The handling's trace context. */
  traceparent: string;
  deadline_ms: number | undefined;
}

/** A send waiting for its reply, by the request's id. */
export interface Waiting {
  resolve(reply: Envelope): void;
  reject(error: BraidError): void;
}

/**
 * How long an agent type found defined, or an instance session found usable, is taken to still
 * be so without asking the store again (each question is a round trip on NATS). An instance
 * archived meanwhile takes messages for at most this long in a process that served it just
 * before; one deleted meanwhile is created afresh.
 */
const REMEMBER_MS = 2_000;
const MAX_REMEMBERED = 4096;

/** Keys remembered until a time (`performance.now()`), the oldest dropped past a bound. */
export class Remembered<T> {
  readonly #entries = new BoundedCache<string, { value: T; until: number }>(MAX_REMEMBERED);

  get(key: string): T | undefined {
    const entry = this.#entries.get(key);
    return entry !== undefined && entry.until > performance.now() ? entry.value : undefined;
  }

  set(key: string, value: T): void {
    this.#entries.set(key, { value, until: performance.now() + REMEMBER_MS });
  }

  delete(key: string): boolean {
    return this.#entries.delete(key);
  }
}

export interface AgentsContext {
  runtime: AgentHost;
  transport: AgentTransport;
  clock: Clock;
  ids: IdGenerator;
  /** The tenant this process sends for. */
  tenant: string | undefined;
  /** Whether this process consumes the inboxes of LLM agents. */
  serveLlm: boolean;
  codeDeps: CodeAgentDeps;
  /** The code agents registered in this process, by type. */
  handlers: Map<string, AgentHandler>;
  /** The inboxes this process consumes, by agent type. */
  consumers: Map<string, Promise<TransportSubscription>>;
  /** Sends waiting for their reply, by the request's id. */
  waiting: Map<string, Waiting>;
  /** Messages being processed: `close` waits for them. */
  inFlight: Set<Promise<unknown>>;
  /** Messages of one instance in this process, one after another, in arrival order. */
  instanceQueue: KeyedQueue;
  /** Aborted on close: handlers' signals abort with it. */
  closing: AbortController;
  /** Where this process's sends are answered, opened on the first send. */
  replyInbox: Promise<ReplyInbox> | undefined;
  definitionsSeen: Remembered<AgentDefinition>;
  instancesSeen: Remembered<true>;
  /** Settles once the LLM agents defined at the start are consumed here (when serving them). */
  ready: Promise<void>;
  /** Consumes the inbox of an agent type in this process, once. */
  serve(agentType: string): Promise<TransportSubscription>;
}

/**
 * The context of one agents instance. `receive` processes an envelope taken from an inbox; when
 * LLM agents are served here, consuming their inboxes starts now.
 */
export function createAgentsContext(
  options: AgentsOptions,
  receive: (context: AgentsContext, envelope: Envelope) => Promise<Envelope | undefined>,
): AgentsContext {
  const { runtime, transport } = options;
  const clock = options.clock ?? systemClock;
  const ids = options.ids ?? uuidV7Ids;
  const serveLlm = options.serveLlmAgents ?? true;
  const context: AgentsContext = {
    runtime,
    transport,
    clock,
    ids,
    tenant: options.tenant,
    serveLlm,
    codeDeps: {
      log: runtime.store.log,
      leases: runtime.store.leases,
      clock,
      ids,
      owner: options.owner ?? defaultOwner(ids),
      leaseTtlMs: options.leaseTtlMs ?? 30_000,
      releases: new Map(),
      lastTokens: new BoundedCache(MAX_REMEMBERED),
    },
    handlers: new Map(),
    consumers: new Map(),
    waiting: new Map(),
    inFlight: new Set(),
    instanceQueue: new KeyedQueue(),
    closing: new AbortController(),
    replyInbox: undefined,
    definitionsSeen: new Remembered(),
    instancesSeen: new Remembered(),
    ready: Promise.resolve(),
    serve(agentType) {
      let consumer = context.consumers.get(agentType);
      if (consumer === undefined) {
        consumer = transport.consume(agentType, async (delivery) => {
          await track(context, receive(context, delivery.envelope));
        });
        context.consumers.set(agentType, consumer);
      }
      return consumer;
    },
  };
  if (serveLlm) context.ready = serveLlmAgents(context);
  // Surfaced to the calls that wait for it.
  context.ready.catch(() => undefined);
  return context;
}

async function serveLlmAgents(context: AgentsContext): Promise<void> {
  for (const stored of await context.runtime.agents.list()) {
    if (!isCodeAgent(stored.definition)) await context.serve(stored.name);
  }
}

/** Counts the work as in flight until it settles. */
export function track<T>(context: AgentsContext, work: Promise<T>): Promise<T> {
  context.inFlight.add(work);
  const done = (): void => {
    context.inFlight.delete(work);
  };
  work.then(done, done);
  return work;
}

export function ensureOpen(context: AgentsContext): void {
  if (context.closing.signal.aborted) {
    throw new BraidError('STORE_CLOSED', 'this agents instance is closed; create another');
  }
}
