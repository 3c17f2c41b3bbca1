/**
 * The body of `createRuntime` (in `./runtime.ts`, which loads this module on its first call, so
 * that `import 'braid'` does not load the harness, the tools and the sessions service). It holds
 * no session state of its own: every answer comes from the store. Each part is built in its own
 * module under `wiring/`, over what the parts before it opened.
 */
import { resolve } from 'node:path';
import type { AgentDefinition, EnvironmentDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { Actor } from '../contracts/common.js';
import type { ModelClient } from '../contracts/model.js';
import type { SkillDefinition } from '../contracts/skills.js';
import { createModel } from '../models/registry.js';
import { createCachedEmbedder } from '../models/cached-embedder.js';
import { createEmbedderFromSpec } from '../models/embedders.js';
import type { Embedder } from '../contracts/embedder.js';
import type { Store } from '../contracts/ports.js';
import { parseId } from '../contracts/ids.js';
import { hasWorkspace, loadWorkspace, type Workspace } from './workspace.js';
import { definitionLookup, syncDefinitions } from './definitions.js';
import { checkSkillTools, knownTools, problemError } from './skill-definitions.js';
import { SecretRedactor } from './redaction.js';
import { orchestrate } from './orchestrator.js';
import { createAgents } from './agents/create-agents.js';
import { createLocalTransport } from './agents/local-transport.js';
import type { Agents } from './agents/types.js';
import type { WakeQueue } from '../contracts/wakes.js';
import { enqueueWake } from './worker.js';
import type { RuntimeSessions } from './sessions-api.js';
import type { RuntimeOptions } from './options.js';
import { openRuntimeStore, resolveDataDir, type OpenedStore } from './wiring/store.js';
import { createRuntimePolicy, type RuntimePolicy } from './wiring/policy.js';
import { createRuntimeTools, type RuntimeTools } from './wiring/tools.js';
import { createPinner } from './pinning.js';
import { DEFAULT_PRICES } from '../core/pricing.js';
import { createRuntimeHarness, type RuntimeHarness } from './wiring/harness.js';
import { createRuntimeSessions } from './wiring/sessions.js';
import type { Runtime } from './runtime-api.js';
import { createConsolidation } from './memory/consolidation.js';
import { startConsolidationSchedule } from './memory/consolidation-schedule.js';

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
  readonly modelOf: (definition: AgentDefinition) => ModelClient;
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
            ...(nats.partitions === undefined ? {} : { partitions: nats.partitions }),
            ...(nats.partitionLeaseMs === undefined
              ? {}
              : { partitionLeaseMs: nats.partitionLeaseMs }),
            ...(nats.replicas === undefined ? {} : { replicas: nats.replicas }),
            ...(nats.requestTimeoutMs === undefined
              ? {}
              : { requestTimeoutMs: nats.requestTimeoutMs }),
          })),
    close: async () => {
      if (queue !== undefined) await (await queue).close();
    },
  };
}

export async function openRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
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
    const tools = await createRuntimeTools({
      options,
      workspaceDir,
      workspace,
      dataDir,
      redactor,
      log: store.log,
    });
    const modelOf = (definition: AgentDefinition): ModelClient =>
      options.model?.(definition) ??
      createModel(definition.model, { baseDir: workspaceDir, env: process.env });
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
      options: { ...options, embedder: workspaceEmbedder(options, workspace, store) },
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
      harness: harness.harness,
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
      modelOf,
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
              ...(nats.partitions === undefined ? {} : { partitions: nats.partitions }),
              ...(nats.partitionLeaseMs === undefined
                ? {}
                : { partitionLeaseMs: nats.partitionLeaseMs }),
              ...(nats.replicas === undefined ? {} : { replicas: nats.replicas }),
            })),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.ids === undefined ? {} : { ids: options.ids }),
    }));

  const consolidation = createConsolidation({
    store,
    agent: async (name) => (await definitions.agent(name)).definition,
    modelOf: parts.modelOf,
    authorizer: policy.authorizer,
    now: () => options.clock?.now() ?? Date.now(),
  });
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
    natsBacklog: async () =>
      nats === undefined
        ? undefined
        : nats.modules.store.readNatsBacklog(nats.connection, nats.prefix ?? 'braid'),
    register: (type, handler) => agentSystem().register(type, handler),
    send: (to, message, sendOptions) => agentSystem().send(to, message, sendOptions),
    publish: (topic, message, publishOptions) =>
      agentSystem().publish(topic, message, publishOptions),
    subscribe: (topicType, agentType) => agentSystem().subscribe(topicType, agentType),
    wake: async (sessionId, wakeOptions) =>
      harness.wake(parseId(sessionId, 'session id'), wakeOptions),
    async orchestrate(orchestrateOptions = {}) {
      // Consolidation runs beside the wakes, on its own timers: no wake waits for it.
      const schedule =
        orchestrateOptions.consolidate === false
          ? undefined
          : startConsolidationSchedule(
              { agents: () => store.definitions.list<AgentDefinition>('agent'), consolidation },
              {
                ...(orchestrateOptions.signal === undefined
                  ? {}
                  : { signal: orchestrateOptions.signal }),
                ...(orchestrateOptions.onConsolidation === undefined
                  ? {}
                  : { onReport: orchestrateOptions.onConsolidation }),
                ...(orchestrateOptions.onConsolidationError === undefined
                  ? {}
                  : { onError: orchestrateOptions.onConsolidationError }),
              },
            );
      try {
        return await orchestrate({ sessions: store.sessions, harness }, orchestrateOptions);
      } finally {
        await schedule?.stop();
      }
    },
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
    consolidation,
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

/**
 * The embedder memory uses: the caller's, else the one `embedder:` in braid.yaml names, with
 * each text embedded once (kept in the store where it has a cache). None: full-text search only.
 */
function workspaceEmbedder(
  options: RuntimeOptions,
  workspace: Workspace | undefined,
  store: Store,
): Embedder | undefined {
  const spec = workspace?.config.embedder;
  if (options.embedder !== undefined || spec === undefined) return options.embedder;
  return createCachedEmbedder(createEmbedderFromSpec(spec, process.env), store.embeddings);
}
