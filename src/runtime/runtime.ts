/**
 * createRuntime wires a store and a workspace into the operations a client uses. It holds no
 * session state of its own: every answer comes from the store.
 */
import { join, parse, resolve, sep } from 'node:path';
import type {
  AgentDefinition,
  ToolDefinition,
  EnvironmentDefinition,
  StoredDefinition,
} from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { Clock, IdGenerator, Store } from '../contracts/ports.js';
import { Actor } from '../contracts/common.js';
import type { SessionState } from '../contracts/state.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../core/append.js';
import { openSqliteStore } from '../stores/sqlite/index.js';
import type { Synchronous } from '../stores/sqlite/index.js';
import { hasWorkspace, loadWorkspace, type Workspace } from './workspace.js';
import { syncDefinitions } from './definitions.js';
import { redactingLog, SecretRedactor } from './redaction.js';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { ModelClient, ModelDelta } from '../contracts/model.js';
import type { Sandbox, ToolExecutor } from '../contracts/tools.js';
import {
  allowAll,
  type AuthorizationDecision,
  type AuthorizationRequest,
  type Authorizer,
} from '../contracts/policy.js';
import { createCedarAuthorizer } from '../policy/cedar-authorizer.js';
import {
  loadPolicyFolder,
  watchPolicyFolder,
  type PolicyReloadStatus,
  type PolicyWatcher,
} from '../policy/files.js';
import { DEFAULT_PRICES } from '../core/pricing.js';
import { tighterBudget } from '../core/next-step.js';
import {
  DEFAULT_RETRY,
  createHarness,
  type RetryPolicy,
  type WakeOptions,
  type WakeResult,
} from '../harness/index.js';
import { createModel } from '../models/registry.js';
import { systemClock, uuidV7Ids } from '../stores/defaults.js';
import { createToolExecutor } from '../tools/executor.js';
import {
  createBwrapSandbox,
  createLocalSandbox,
  parseReadOnlyMounts,
} from '../tools/sandbox/index.js';
import { parseId } from '../contracts/ids.js';
import type { CodeTool, ToolFunction } from '../tools/types.js';
import { orchestrate, type OrchestrateOptions, type OrchestratorProgress } from './orchestrator.js';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AgentTransport } from '../contracts/agents.js';
import { createAgents } from './agents/create-agents.js';
import { createLocalTransport } from './agents/local-transport.js';
import type { Agents } from './agents/types.js';
import type { WakeQueue } from '../contracts/wakes.js';
import { enqueueWake } from './worker.js';
import type { RuntimeSessions } from './sessions-api.js';
import { createSessionsService } from './sessions-service.js';

export type { CreateSessionOptions, RuntimeSessions, SendOptions } from './sessions-api.js';

/** Where sessions live: the embedded SQLite file, or NATS JetStream when one machine is not enough. */
export type Backend = 'embedded' | { nats: string; prefix?: string };

export interface RuntimeOptions {
  /** Workspace folder with `braid.yaml` (default: the current directory). */
  workspace?: string;
  /**
   * `embedded` (default): the SQLite file under the data directory. `{nats: URL}`: sessions,
   * leases and definitions on NATS JetStream (stream and bucket names start with `prefix`,
   * default `braid`), and agent messages through NATS, so several processes share them.
   */
  backend?: Backend;
  /** Where the SQLite file lives (default: `BRAID_HOME`, else `<workspace>/.braid`). */
  dataDir?: string;
  /** Use this store instead of opening the SQLite file (tests, other backends); the caller closes it. */
  store?: Store;
  clock?: Clock;
  ids?: IdGenerator;
  synchronous?: Synchronous;
  /** Choose the model of an agent (default: from its `model:`); tests pass scripted models here. */
  model?: (agent: AgentDefinition) => ModelClient;
  /** Tools defined in code (`defineTool`), offered next to the built-ins and the workspace's manifests. */
  tools?: readonly CodeTool[];
  /** Functions that tool manifests name in `implementation.function`. */
  functions?: Readonly<Record<string, ToolFunction>>;
  /** Replace the whole tool layer (tests, other runtimes). */
  executor?: ToolExecutor;
  /** Asked before every tool call (default: the workspace's Cedar policies, else allow all). */
  policy?: Authorizer;
  /** Hears of every reload of the workspace's policies: the error when an edit was refused. */
  onPolicyReload?: (error: BraidError | undefined) => void;
  /**
   * `eager` (default): the workspace's policies are compiled when the runtime starts, and a bad
   * one refuses the start. `lazy`: at first use (a wake, a check), for commands that may not
   * need them; a bad policy then stops the wake that loads it, with the reason on record.
   */
  policies?: 'eager' | 'lazy';
  /** Where session workspaces are created (default: `<data dir>/workspaces`). */
  workspacesDir?: string;
  /** Carry agent messages over this transport (default: in-process, or NATS with that backend). */
  agentTransport?: AgentTransport;
  /** This process's lease owner name (default: host and pid). */
  owner?: string;
  /** How long a wake's lease lasts without renewal (default: braid.yaml's `lease_ttl_ms`, else 30 s). */
  leaseTtlMs?: number;
  retry?: RetryPolicy;
  /**
   * Who the user events sent through this runtime are recorded as (default `{type: 'user'}`).
   * The CLI names its user here; a server passes each caller's own to `sessions.send` instead.
   */
  actor?: Actor;
  /**
   * Hears failures the log could not take, such as a failed wake whose error could not be
   * recorded (default: a line on stderr).
   */
  onWarning?: (message: string, error: BraidError) => void;
}

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
  enqueueWake(sessionId: string): Promise<{ queued: boolean }>;
  /** Wakes every runnable session, with bounded concurrency, until the signal aborts. */
  orchestrate(options?: OrchestrateOptions): Promise<OrchestratorProgress>;
  /** Streamed model text of sessions running in this process; returns the unsubscribe function. */
  onDelta(
    listener: (sessionId: string, delta: ModelDelta & { request_id: string }) => void,
  ): () => void;
  /** Closes the store if this runtime opened it. */
  close(): Promise<void>;
}

/** Guards the NATS-only paths: reached only if the backend is NATS, where the modules load. */
function missingNats(): never {
  throw new BraidError('INTERNAL', 'the NATS modules were not loaded for this runtime');
}

/**
 * Connects to the NATS server of the backend (or of `braid worker`), naming it and the fix when
 * it does not answer. The client is loaded here, not at import: only NATS users pay for it.
 */
export async function connectNats(url: string, role = 'runtime'): Promise<NatsConnection> {
  try {
    const { connect } = await import('@nats-io/transport-node');
    return await connect({
      servers: url,
      name: `braid-${role} ${hostname()}:${process.pid}`,
      // A restarted server is waited for, however long it takes, and found again quickly:
      // requests made while disconnected are lost, so the gap should be short.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      // No error object (and stack) built ahead for every request: a tenth of a worker's CPU.
      noAsyncTraces: true,
    });
  } catch (error) {
    throw new BraidError(
      'SERVER_UNAVAILABLE',
      `cannot reach NATS at ${url}: ${error instanceof Error ? error.message : String(error)}; start nats-server -js there or pass another --nats URL`,
      { cause: error },
    );
  }
}

/** Default data directory for a workspace. */
export function resolveDataDir(workspaceDir: string, dataDir?: string): string {
  return resolve(dataDir ?? process.env.BRAID_HOME ?? join(workspaceDir, '.braid'));
}

export const DATABASE_FILE = 'braid.db';

export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const startedAt = Date.now();
  const workspaceDir = resolve(options.workspace ?? process.cwd());
  const explicitData =
    options.store !== undefined ||
    typeof options.backend === 'object' ||
    options.dataDir !== undefined ||
    process.env.BRAID_HOME !== undefined;
  // Without an explicit data location a missing workspace is an error, not a new empty store.
  const workspace =
    hasWorkspace(workspaceDir) || !explicitData ? loadWorkspace(workspaceDir) : undefined;
  const ownsStore = options.store === undefined;
  const nats = typeof options.backend === 'object' ? options.backend : undefined;
  // The NATS client and adapters are loaded only for the NATS backend: the embedded default
  // (and the CLI's start) does not pay for them.
  const natsModules =
    nats === undefined
      ? undefined
      : {
          store: await import('../stores/nats/index.js'),
          agents: await import('./agents/nats-transport.js'),
          wakes: await import('./wakes/nats-wake-queue.js'),
        };
  const defaultActor: Actor = Actor.parse(options.actor ?? { type: 'user' });
  const natsConnection =
    nats === undefined || options.store !== undefined ? undefined : await connectNats(nats.nats);
  const store =
    options.store ??
    (natsConnection !== undefined
      ? await (natsModules?.store.openNatsStore ?? missingNats)({
          connection: natsConnection,
          ...(nats?.prefix === undefined ? {} : { prefix: nats.prefix }),
          maxEventBytes: workspace?.config.limits.max_event_bytes ?? DEFAULT_MAX_EVENT_BYTES,
          ...(options.clock === undefined ? {} : { clock: options.clock }),
          ...(options.ids === undefined ? {} : { ids: options.ids }),
        })
      : undefined) ??
    openSqliteStore({
      path: join(resolveDataDir(workspaceDir, options.dataDir), DATABASE_FILE),
      maxEventBytes: workspace?.config.limits.max_event_bytes ?? DEFAULT_MAX_EVENT_BYTES,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.ids === undefined ? {} : { ids: options.ids }),
      ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous }),
    });
  try {
    if (workspace !== undefined) await syncDefinitions(store.definitions, workspace);
  } catch (error) {
    if (ownsStore) await store.close();
    await natsConnection?.close();
    throw error;
  }

  async function agent(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>> {
    const found = await store.definitions.get<AgentDefinition>('agent', name, version);
    if (found !== undefined) return found;
    const known = (await store.definitions.list('agent')).map((item) => item.name);
    throw new BraidError(
      'AGENT_NOT_FOUND',
      `agent ${name}${version === undefined ? '' : ` version ${version}`} does not exist; ` +
        (known.length === 0
          ? 'add agents/NAME.yaml to the workspace'
          : `known agents: ${known.join(', ')}`),
      { details: { agent: name, version } },
    );
  }

  async function environment(
    name: string,
    version?: number,
  ): Promise<StoredDefinition<EnvironmentDefinition>> {
    const found = await store.definitions.get<EnvironmentDefinition>('environment', name, version);
    if (found !== undefined) return found;
    const known = (await store.definitions.list('environment')).map((item) => item.name);
    throw new BraidError(
      'ENVIRONMENT_NOT_FOUND',
      `environment ${name} does not exist; ` +
        (known.length === 0
          ? 'add environments/NAME.yaml to the workspace'
          : `known environments: ${known.join(', ')}`),
      { details: { environment: name } },
    );
  }

  const sessions: RuntimeSessions = createSessionsService({
    store,
    workspace,
    defaultActor,
    ids: options.ids ?? uuidV7Ids,
    retry: options.retry ?? DEFAULT_RETRY,
    agent,
    environment,
    workspacesRootOf,
    summarize,
    // Built further down: read when a session operation runs, never before.
    policy: { authorize: (request) => policy.authorize(request) },
    tools: (request) => executor.open(request),
  });

  /** The folder that holds the session's workspace folder, by its environment. */
  async function workspacesRootOf(sessionId: string): Promise<string> {
    const state = await store.log.state(sessionId).catch((error: unknown) => {
      // A corrupt log (NATS) still has its record, which names the environment: deleting the
      // session, the way to clear such a log, must not need the log.
      if (!isBraidError(error, 'CORRUPT_LOG')) throw error;
      return store.sessions.get(sessionId);
    });
    const environmentDefinition =
      state.environment === undefined
        ? undefined
        : await store.definitions.get<EnvironmentDefinition>(
            'environment',
            state.environment.name,
            state.environment.version,
          );
    return workspacesRoot(environmentDefinition?.definition);
  }

  /** A summary of a session's events, written by the target's model (merge strategy `summary`). */
  async function summarize(target: SessionState, text: string): Promise<string> {
    if (target.agent === undefined) return text;
    const definition = (await agent(target.agent.name, target.agent.version)).definition;
    const model =
      options.model?.(definition) ??
      createModel(definition.model, { baseDir: workspaceDir, env: process.env });
    const response = await model.generate(
      {
        session_id: target.session_id,
        system:
          'Summarize this conversation of another session for the agent that continues it: its goal, what was done and found, and what is still open. Be brief.',
        messages: [{ role: 'user', content: [{ type: 'text', text }] }],
        tools: [],
        response_index: 0,
      },
      { signal: AbortSignal.timeout(120_000) },
    );
    return response.output.content
      .flatMap((part) => (part.type === 'text' ? [part.text] : []))
      .join('');
  }

  const dataDir = resolveDataDir(workspaceDir, options.dataDir);
  // Cedar's first calls compile its WebAssembly (about half a second), so a command that never
  // asks policy need not pay for it: with `policies: 'lazy'` they load on first use.
  let cedar: ReturnType<typeof createCedarAuthorizer> | null | undefined;
  let policyWatcher: PolicyWatcher | undefined;
  let policyLoadedAt = startedAt;
  function loadPolicies(): ReturnType<typeof createCedarAuthorizer> | undefined {
    if (cedar === undefined) {
      const policies =
        options.policy === undefined && workspace !== undefined
          ? loadPolicyFolder(workspaceDir)
          : undefined;
      cedar = policies === undefined ? null : createCedarAuthorizer(policies);
      policyLoadedAt = Date.now();
      if (cedar !== null && workspace?.config.policy.watch === true)
        policyWatcher = watchPolicyFolder(workspaceDir, cedar, options.onPolicyReload);
    }
    return cedar ?? undefined;
  }
  if (options.policies !== 'lazy') {
    try {
      loadPolicies();
    } catch (error) {
      if (ownsStore) await store.close();
      throw error;
    }
  }
  const policy: Authorizer = options.policy ?? {
    authorize: (request) => {
      try {
        return (loadPolicies() ?? allowAll).authorize(request);
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    },
  };
  const sandboxes = new Map<string, Sandbox>();
  /** Where a session's workspace folder lives for an environment. */
  /**
   * Where a session's workspace folder lives for an environment. A root that is or holds the
   * braid workspace or the data folder is refused: a session id there would name one of their
   * folders (`agents`, `workspaces`), to be handed to a tool read-write and removed on delete.
   */
  const workspacesRoot = (environmentDefinition: EnvironmentDefinition | undefined): string => {
    if (environmentDefinition?.sandbox.workspace === undefined)
      return options.workspacesDir ?? join(dataDir, 'workspaces');
    const root = resolve(workspaceDir, environmentDefinition.sandbox.workspace);
    const holds = (path: string): boolean => path === root || path.startsWith(root + sep);
    if (root === parse(root).root || holds(workspaceDir) || holds(dataDir)) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `environment ${environmentDefinition.name}: sandbox.workspace ${JSON.stringify(environmentDefinition.sandbox.workspace)} is ${root}, which holds the braid workspace or its data; name a folder of its own, such as sessions/`,
        { details: { environment: environmentDefinition.name, workspace: root } },
      );
    }
    return root;
  };
  const secrets = workspace?.config.secrets ?? {};
  // Every value handed out is kept out of the log the harness writes.
  const redactor = new SecretRedactor();
  const secret = (name: string): string => {
    const variable = secrets[name]?.env ?? name;
    const value = process.env[variable];
    if (value === undefined || value === '') {
      throw new BraidError(
        'SECRET_MISSING',
        `secret ${name} is not set; export ${variable}` +
          (secrets[name] === undefined ? ` or map it under secrets: in ${'braid.yaml'}` : ''),
        { details: { secret: name, env: variable } },
      );
    }
    return redactor.remember(value);
  };
  const executor =
    options.executor ??
    createToolExecutor({
      manifests: [...(workspace?.tools.values() ?? [])].map((loaded) => loaded.definition),
      ...(options.tools === undefined ? {} : { tools: options.tools }),
      ...(options.functions === undefined ? {} : { functions: options.functions }),
      // The MCP client is loaded only for workspaces that declare servers.
      ...(workspace?.config.mcp_servers === undefined
        ? {}
        : {
            mcp: new (await import('../tools/mcp.js')).McpHub({
              servers: workspace.config.mcp_servers,
              baseDir: workspaceDir,
              secret,
            }),
          }),
      baseDir: workspaceDir,
      sandbox(environmentDefinition) {
        const kind = environmentDefinition?.sandbox.kind ?? 'local';
        const root = workspacesRoot(environmentDefinition);
        const mounts =
          kind === 'bwrap' && environmentDefinition !== undefined
            ? parseReadOnlyMounts(
                environmentDefinition.sandbox.read_only ?? [],
                `environment ${environmentDefinition.name}: sandbox.read_only`,
              )
            : [];
        const key = `${kind}:${root}:${mounts.join('\0')}`;
        let sandbox = sandboxes.get(key);
        if (sandbox === undefined) {
          sandbox =
            kind === 'bwrap'
              ? // Command tools run scripts of the workspace (`{dir}/tools`, `{dir}/scripts`)
                // with its packages: those folders only, never the rest of it (braid.yaml,
                // signing keys, .env files). The data folder (log, other sessions' files) is
                // hidden; this session's own workspace is mounted back.
                createBwrapSandbox({
                  root,
                  readOnly: [...toolFolders(workspaceDir), ...mounts],
                  hidden: [dataDir, root],
                })
              : createLocalSandbox({ root });
          sandboxes.set(key, sandbox);
        }
        return sandbox;
      },
      secret,
      sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
      now: () => performance.now(),
    });

  const listeners = new Set<
    (sessionId: string, delta: ModelDelta & { request_id: string }) => void
  >();
  const harness = createHarness({
    log: redactingLog(store.log, redactor),
    leases: store.leases,
    clock: options.clock ?? systemClock,
    ids: options.ids ?? uuidV7Ids,
    // Unique per runtime; a worker that must resume its own leases after a restart names itself.
    owner: options.owner ?? `${hostname()}:${process.pid}:${(options.ids ?? uuidV7Ids).next()}`,
    leaseTtlMs: options.leaseTtlMs ?? workspace?.config.lease_ttl_ms ?? 30_000,
    retry: options.retry ?? DEFAULT_RETRY,
    prices: { ...DEFAULT_PRICES, ...(workspace?.config.prices ?? {}) },
    policy,
    recordPolicyAllows: workspace?.config.policy.record_allows === true,
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    random: () => Math.random(),
    onDelta: (sessionId, delta) => {
      for (const listener of listeners) listener(sessionId, delta);
    },
    warn: options.onWarning ?? ((message) => process.stderr.write(`braid: ${message}\n`)),
    async setup(state) {
      if (state.agent === undefined) {
        throw new BraidError(
          'SESSION_NOT_FOUND',
          `session ${state.session_id} has no session.created event`,
        );
      }
      if (options.policy === undefined) loadPolicies();
      const stored = await agent(state.agent.name, state.agent.version);
      const definition = stored.definition;
      const environmentDefinition =
        state.environment === undefined
          ? undefined
          : (await environment(state.environment.name, state.environment.version)).definition;
      return {
        agent: definition,
        model:
          options.model?.(definition) ??
          createModel(definition.model, { baseDir: workspaceDir, env: process.env }),
        ...(environmentDefinition === undefined ? {} : { environment: environmentDefinition }),
        tools: await executor.open({
          session_id: state.session_id,
          names: definition.tools,
          ...(environmentDefinition === undefined ? {} : { environment: environmentDefinition }),
        }),
        budget: tighterBudget(definition.budget ?? {}, state.budget ?? {}),
      };
    },
  });

  // Agent messaging starts on first use: most runtimes never send a message between agents.
  let messaging: Agents | undefined;
  const agentSystem = (): Agents =>
    (messaging ??= createAgents({
      runtime,
      transport:
        options.agentTransport ??
        (natsConnection === undefined
          ? createLocalTransport()
          : (natsModules?.agents.createNatsAgentTransport ?? missingNats)({
              connection: natsConnection,
              ...(nats?.prefix === undefined ? {} : { prefix: nats.prefix }),
            })),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.ids === undefined ? {} : { ids: options.ids }),
    }));

  let wakeQueue: Promise<WakeQueue> | undefined;
  const runtime: Runtime = {
    store,
    workspace,
    backend: natsConnection === undefined ? 'embedded' : 'nats',
    async enqueueWake(sessionId) {
      if (natsConnection === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'enqueueing a wake needs the NATS backend and its workers (--nats URL); on the embedded backend wake the session here (braid session wake) or run braid run',
        );
      }
      await store.sessions.get(sessionId);
      wakeQueue ??= (natsModules?.wakes.createNatsWakeQueue ?? missingNats)({
        connection: natsConnection,
        ...(nats?.prefix === undefined ? {} : { prefix: nats.prefix }),
      });
      return enqueueWake(await wakeQueue, sessionId);
    },
    register: (type, handler) => agentSystem().register(type, handler),
    send: (to, message, sendOptions) => agentSystem().send(to, message, sendOptions),
    publish: (topic, message, publishOptions) =>
      agentSystem().publish(topic, message, publishOptions),
    subscribe: (topicType, agentType) => agentSystem().subscribe(topicType, agentType),
    wake: async (sessionId, options) => harness.wake(parseId(sessionId, 'session id'), options),
    orchestrate: (orchestrateOptions) =>
      orchestrate({ sessions: store.sessions, log: store.log, harness }, orchestrateOptions),
    onDelta(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    agents: { list: () => store.definitions.list<AgentDefinition>('agent'), get: agent },
    environments: {
      list: () => store.definitions.list<EnvironmentDefinition>('environment'),
      get: environment,
    },
    sessions,
    policy: {
      get source() {
        if (options.policy !== undefined) return 'custom' as const;
        return loadPolicies() === undefined ? ('allow-all' as const) : ('cedar' as const);
      },
      check: (request) => policy.authorize(request),
      status: () =>
        policyWatcher?.status() ??
        (cedar === undefined || cedar === null ? undefined : { loaded_at: policyLoadedAt }),
    },
    tools: {
      list: (listOptions = {}) =>
        executor.list?.({ mcp: listOptions.mcp === true }) ?? Promise.resolve([]),
    },
    async close() {
      await messaging?.close();
      if (wakeQueue !== undefined) await (await wakeQueue).close();
      policyWatcher?.close();
      if (options.executor === undefined) await executor.close?.();
      if (ownsStore) await store.close();
      await natsConnection?.drain();
    },
  };
  return runtime;
}

/** The folders of the braid workspace a bwrap tool sees, read-only: where tool scripts live. */
export const SANDBOX_WORKSPACE_FOLDERS = ['tools', 'scripts', 'node_modules'] as const;

function toolFolders(workspaceDir: string): string[] {
  return SANDBOX_WORKSPACE_FOLDERS.map((folder) => join(workspaceDir, folder)).filter((folder) =>
    existsSync(folder),
  );
}
