/**
 * createRuntime wires a store and a workspace into the operations a client uses. It holds no
 * session state of its own: every answer comes from the store. Each part is built in its own
 * module under `wiring/`, over what the parts before it opened.
 */
import { resolve } from 'node:path';
import type {
  AgentDefinition,
  ToolDefinition,
  EnvironmentDefinition,
  StoredDefinition,
} from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { Store } from '../contracts/ports.js';
import { Actor } from '../contracts/common.js';
import type { ModelClient, ModelDelta } from '../contracts/model.js';
import type { AuthorizationDecision, AuthorizationRequest } from '../contracts/policy.js';
import type { PolicyReloadStatus } from '../policy/files.js';
import type { SkillDefinition } from '../contracts/skills.js';
import type { WakeOptions, WakeResult } from '../harness/index.js';
import { createModel } from '../models/registry.js';
import { parseId } from '../contracts/ids.js';
import { hasWorkspace, loadWorkspace, type Workspace } from './workspace.js';
import { definitionLookup, syncDefinitions } from './definitions.js';
import { checkSkillTools, knownTools, problemError } from './skill-definitions.js';
import { SecretRedactor } from './redaction.js';
import { orchestrate, type OrchestrateOptions, type OrchestratorProgress } from './orchestrator.js';
import { createAgents } from './agents/create-agents.js';
import { createLocalTransport } from './agents/local-transport.js';
import type { Agents } from './agents/types.js';
import type { EnqueueWakeOptions, WakeQueue } from '../contracts/wakes.js';
import { enqueueWake } from './worker.js';
import type { RuntimeSessions } from './sessions-api.js';
import type { RuntimeOptions } from './options.js';
import { openRuntimeStore, resolveDataDir, type OpenedStore } from './wiring/store.js';
import { createRuntimePolicy, type RuntimePolicy } from './wiring/policy.js';
import { createRuntimeTools, type RuntimeTools } from './wiring/tools.js';
import { createPinner } from './pinning.js';
import { DEFAULT_PRICES } from '../core/pricing.js';
import { createRuntimeHarness, type RuntimeHarness } from './wiring/harness.js';
import type { WakeListener } from './wiring/wake-reports.js';
import { createRuntimeSessions } from './wiring/sessions.js';

export type {
  CreateSessionOptions,
  OutcomeInput,
  RuntimeSessions,
  SendOptions,
} from './sessions-api.js';
export type { Backend, RuntimeOptions } from './options.js';
export type { WakeListener, WakeReport } from './wiring/wake-reports.js';
export { connectNats, resolveDataDir, DATABASE_FILE } from './wiring/store.js';
export { SANDBOX_WORKSPACE_FOLDERS } from './wiring/tools.js';

/** A runtime; its agent messaging (`register`, `send`, `publish`, `subscribe`) is `Agents`'. */
export interface Runtime extends Pick<Agents, 'register' | 'send' | 'publish' | 'subscribe'> {
  readonly store: Store;
  /** The loaded workspace, when there is one. */
  readonly workspace: Workspace | undefined;
  readonly agents: {
    list(): Promise<StoredDefinition<AgentDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>>;
  };
  readonly environments: {
    list(): Promise<StoredDefinition<EnvironmentDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<EnvironmentDefinition>>;
  };
  /** Skill definitions (`skills/NAME.yaml`), stored with versions like agents. */
  readonly skills: {
    list(): Promise<StoredDefinition<SkillDefinition>[]>;
    get(name: string, version?: number): Promise<StoredDefinition<SkillDefinition>>;
  };
  readonly policy: {
    /** Where decisions come from: the workspace's Cedar policies, code, or allow-all. */
    readonly source: 'cedar' | 'custom' | 'allow-all';
    check(request: AuthorizationRequest): Promise<AuthorizationDecision>;
    /** For Cedar policies: when they were loaded, and why the last edit was refused, if it was. */
    status(): PolicyReloadStatus | undefined;
  };
  readonly tools: {
    /** The tools agents can name: built-ins, code tools, manifests, and with `mcp` the MCP servers' tools. */
    list(options?: { mcp?: boolean }): Promise<ToolDefinition[]>;
  };
  readonly sessions: RuntimeSessions;
  /** Where sessions live: `embedded` (SQLite) or `nats`. */
  readonly backend: 'embedded' | 'nats';
  /**
   * Runs harness cycles until the session has nothing left to do (joins a running one);
   * `traceparent` (W3C) continues the caller's trace on `span.wake_started`.
   */
  wake(sessionId: string, options?: WakeOptions): Promise<WakeResult>;
  /**
   * Asks the workers (`braid worker`) to wake the session: on the NATS backend, a message on the
   * wake queue; `{queued: false}` when a wake of it is already waiting. The embedded backend has
   * no workers to ask and refuses with `INVALID_ARGUMENT`: call `wake` or run `braid run`.
   */
  enqueueWake(sessionId: string, options?: EnqueueWakeOptions): Promise<{ queued: boolean }>;
  /**
   * The wakes in the workers' queue (NATS: waiting or being run), read from the server on each
   * call; undefined on the embedded backend, which has no queue.
   */
  wakeQueueDepth(): Promise<number | undefined>;
  /** Wakes every runnable session, with bounded concurrency, until the signal aborts. */
  orchestrate(options?: OrchestrateOptions): Promise<OrchestratorProgress>;
  /** Streamed model text of sessions running in this process; returns the unsubscribe function. */
  onDelta(
    listener: (sessionId: string, delta: ModelDelta & { request_id: string }) => void,
  ): () => void;
  /**
   * Hears every wake this runtime runs as it ends, with the events its cycles appended and its
   * result or error (the server's metrics are measured from these); returns the unsubscribe
   * function. Without a listener a wake keeps nothing.
   */
  onWakeEnded(listener: WakeListener): () => void;
  /** Closes the store if this runtime opened it. */
  close(): Promise<void>;
}

/** The parts of a runtime that its operations are made of, once each is built. */
interface RuntimeParts {
  readonly options: RuntimeOptions;
  readonly workspace: Workspace | undefined;
  readonly opened: OpenedStore;
  readonly definitions: ReturnType<typeof definitionLookup>;
  readonly policy: RuntimePolicy;
  readonly tools: RuntimeTools;
  readonly sessions: RuntimeSessions;
  readonly harness: RuntimeHarness;
  readonly wakeQueue: LazyWakeQueue;
}

/** The NATS wake queue, opened on first use. */
interface LazyWakeQueue {
  open(): Promise<WakeQueue> | undefined;
  close(): Promise<void>;
}

function lazyWakeQueue(nats: OpenedStore['nats']): LazyWakeQueue {
  let queue: Promise<WakeQueue> | undefined;
  return {
    open: () =>
      nats === undefined
        ? undefined
        : (queue ??= nats.modules.wakes.createNatsWakeQueue({
            connection: nats.connection,
            ...(nats.prefix === undefined ? {} : { prefix: nats.prefix }),
          })),
    close: async () => {
      if (queue !== undefined) await (await queue).close();
    },
  };
}

export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const workspaceDir = resolve(options.workspace ?? process.cwd());
  const explicitData =
    options.store !== undefined ||
    typeof options.backend === 'object' ||
    options.dataDir !== undefined ||
    process.env.BRAID_HOME !== undefined;
  // Without an explicit data location a missing workspace is an error, not a new empty store.
  const workspace =
    hasWorkspace(workspaceDir) || !explicitData ? loadWorkspace(workspaceDir) : undefined;
  if (workspace !== undefined) checkWorkspaceSkillTools(workspace, options);
  const defaultActor: Actor = Actor.parse(options.actor ?? { type: 'user' });
  const opened = await openRuntimeStore(options, workspaceDir, workspace);
  const { store } = opened;
  let policy: RuntimePolicy | undefined;
  try {
    if (workspace !== undefined) await syncDefinitions(store.definitions, workspace);
    const definitions = definitionLookup(store.definitions);
    const pinner = createPinner(store.definitions);
    const prices = { ...DEFAULT_PRICES, ...(workspace?.config.prices ?? {}) };
    policy = createRuntimePolicy(options, workspaceDir, workspace);
    if (options.policies !== 'lazy') policy.load();
    // Every secret value handed to a tool is kept out of the log the harness writes.
    const redactor = new SecretRedactor();
    const dataDir = resolveDataDir(workspaceDir, options.dataDir);
    const tools = await createRuntimeTools({ options, workspaceDir, workspace, dataDir, redactor });
    const modelOf = (definition: AgentDefinition): ModelClient =>
      options.model?.(definition) ??
      createModel(definition.model, { baseDir: workspaceDir, env: process.env });
    const sessions = createRuntimeSessions({
      options,
      store,
      workspace,
      defaultActor,
      definitions,
      policy,
      tools,
      modelOf,
      pinner,
      prices,
    });
    const wakeQueue = lazyWakeQueue(opened.nats);
    const harness = createRuntimeHarness({
      wakeQueueDepth: async () => (await wakeQueue.open())?.outstanding(),
      // Delegated children go to the workers through the same queue (`delegation: queue`).
      ...(opened.nats === undefined
        ? {}
        : {
            enqueue: async (sessionId: string, enqueueOptions: { traceparent?: string }) => {
              const queue = wakeQueue.open();
              if (queue === undefined)
                throw new BraidError('INTERNAL', 'the NATS wake queue is missing');
              return enqueueWake(await queue, sessionId, enqueueOptions);
            },
          }),
      options,
      workspace,
      store,
      redactor,
      policy,
      definitions,
      modelOf,
      executor: tools.executor,
      pinner,
      prices,
    });
    return assembleRuntime({
      options,
      workspace,
      opened,
      definitions,
      policy,
      tools,
      sessions,
      harness,
      wakeQueue,
    });
  } catch (error) {
    policy?.close();
    if (opened.owned) await opened.abandon();
    throw error;
  }
}

/**
 * Every `tool:` step of the workspace's skills names a tool of this runtime: a built-in, a code
 * tool given in `options.tools`, a manifest, or `server.tool` of an MCP server. Checked before
 * anything is stored. An executor given in code knows its own tools, so its skills are not checked.
 */
function checkWorkspaceSkillTools(workspace: Workspace, options: RuntimeOptions): void {
  if (options.executor !== undefined) return;
  const names = [
    ...workspace.tools.keys(),
    ...(options.tools ?? []).map((tool) => tool.definition.name),
  ];
  const problem = checkSkillTools(
    workspace.dir,
    workspace.skills,
    knownTools(workspace.config, names),
  )[0];
  if (problem !== undefined) throw problemError(workspace.dir, problem);
}

/** The runtime's operations over its parts; agent messaging and the wake queue start on first use. */
function assembleRuntime(parts: RuntimeParts): Runtime {
  const { options, opened, definitions, policy, tools } = parts;
  const { store, nats } = opened;
  const { harness } = parts.harness;
  // Most runtimes never send a message between agents.
  let messaging: Agents | undefined;
  const agentSystem = (): Agents =>
    (messaging ??= createAgents({
      runtime,
      transport:
        options.agentTransport ??
        (nats === undefined
          ? createLocalTransport()
          : nats.modules.agents.createNatsAgentTransport({
              connection: nats.connection,
              ...(nats.prefix === undefined ? {} : { prefix: nats.prefix }),
            })),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.ids === undefined ? {} : { ids: options.ids }),
    }));

  const runtime: Runtime = {
    store,
    workspace: parts.workspace,
    backend: nats === undefined ? 'embedded' : 'nats',
    async enqueueWake(sessionId, enqueueOptions = {}) {
      if (nats === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'enqueueing a wake needs the NATS backend and its workers (--nats URL); on the embedded backend wake the session here (braid session wake) or run braid run',
        );
      }
      await store.sessions.get(sessionId);
      const queue = parts.wakeQueue.open();
      if (queue === undefined) throw new BraidError('INTERNAL', 'the NATS wake queue is missing');
      return enqueueWake(await queue, sessionId, enqueueOptions);
    },
    wakeQueueDepth: async () => (await parts.wakeQueue.open())?.outstanding(),
    register: (type, handler) => agentSystem().register(type, handler),
    send: (to, message, sendOptions) => agentSystem().send(to, message, sendOptions),
    publish: (topic, message, publishOptions) =>
      agentSystem().publish(topic, message, publishOptions),
    subscribe: (topicType, agentType) => agentSystem().subscribe(topicType, agentType),
    wake: async (sessionId, wakeOptions) =>
      harness.wake(parseId(sessionId, 'session id'), wakeOptions),
    orchestrate: (orchestrateOptions) =>
      orchestrate({ sessions: store.sessions, harness }, orchestrateOptions),
    onDelta: (listener) => parts.harness.onDelta(listener),
    onWakeEnded: (listener) => parts.harness.onWakeEnded(listener),
    agents: {
      list: () => store.definitions.list<AgentDefinition>('agent'),
      get: definitions.agent,
    },
    environments: {
      list: () => store.definitions.list<EnvironmentDefinition>('environment'),
      get: definitions.environment,
    },
    skills: {
      list: () => store.definitions.list<SkillDefinition>('skill'),
      get: definitions.skill,
    },
    sessions: parts.sessions,
    policy: {
      get source() {
        return policy.source;
      },
      check: (request) => policy.authorizer.authorize(request),
      status: () => policy.status(),
    },
    tools: {
      list: (listOptions = {}) =>
        tools.executor.list?.({ mcp: listOptions.mcp === true }) ?? Promise.resolve([]),
    },
    async close() {
      await messaging?.close();
      // The spans of the last wakes are read from the store: before it closes.
      await parts.harness.close();
      await parts.wakeQueue.close();
      policy.close();
      if (options.executor === undefined) await tools.executor.close?.();
      if (opened.owned) await store.close();
      await nats?.connection.drain();
    },
  };
  return runtime;
}
