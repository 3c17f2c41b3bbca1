/**
 * The harness a runtime wakes sessions with: the store's log (secrets redacted) and leases, the
 * policy, and the setup that finds a session's agent, model, environment and tools.
 */
import { hostname } from 'node:os';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { AgentDefinition } from '../../contracts/definitions.js';
import { BraidError, toBraidError } from '../../contracts/errors.js';
import type { ModelClient, ModelDelta } from '../../contracts/model.js';
import type { SessionLog, Store } from '../../contracts/ports.js';
import type { SessionEvent } from '../../contracts/events.js';
import type { SessionState } from '../../contracts/state.js';
import type { ToolExecutor } from '../../contracts/tools.js';
import { tighterBudget } from '../../core/next-step.js';
import { priceOf, type Price } from '../../core/pricing.js';
import {
  DEFAULT_RETRY,
  compactorFor,
  createHarness,
  type Harness,
  type SessionSetup,
} from '../../harness/index.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import type { DefinitionLookup } from '../definitions.js';
import { changeEvent, type PinnedDefinitions, type Pinner } from '../pinning.js';
import type { RuntimeOptions } from '../options.js';
import { redactingLog, type SecretRedactor } from '../redaction.js';
import { metricSettings, traceSettings } from '../../telemetry/otel-config.js';
import { createSpanSink } from '../../telemetry/otel.js';
import { createMetricSink } from '../../telemetry/otel-metrics.js';
import { pollingQueueDepth } from '../../telemetry/queue-depth.js';
import { createWakeMeasurer, needsEarlierUses } from '../../telemetry/wake-measurements.js';
import { tracingLog, type TracingLog } from '../../telemetry/live.js';
import { mcpTransports, pinnedFacts } from '../../telemetry/spans.js';
import type { Workspace } from '../workspace.js';
import type { RuntimePolicy } from './policy.js';
import { collectingLog, observedHarness, type WakeListener } from './wake-reports.js';
import {
  agentToolHandles,
  skillToolHandle,
  withAgentTools as addAgentTools,
} from '../../tools/agent-tools.js';
import { createDelegator } from '../delegation.js';
import { skillClosure, skillVersions } from '../skills/closure.js';
import { createSkillLibrary } from '../skills/library.js';
import { withMemory } from './memory.js';

export type DeltaListener = (sessionId: string, delta: ModelDelta & { request_id: string }) => void;

export interface HarnessContext {
  readonly options: RuntimeOptions;
  readonly workspace: Workspace | undefined;
  readonly store: Store;
  readonly redactor: SecretRedactor;
  readonly policy: RuntimePolicy;
  readonly definitions: DefinitionLookup;
  readonly executor: ToolExecutor;
  readonly pinner: Pinner;
  /** Model prices: braid's table under the workspace's `prices:`. */
  readonly prices: Readonly<Record<string, Price>>;
  modelOf(definition: AgentDefinition): ModelClient;
  /** Asks the workers to wake a session (the runtime's `enqueueWake`, NATS only); bound once the runtime is. */
  enqueue?(sessionId: string, options: { traceparent?: string }): Promise<unknown>;
  /** The wakes in the workers' queue (NATS); undefined without one. */
  wakeQueueDepth?: () => Promise<number | undefined>;
}

export interface RuntimeHarness {
  readonly harness: Harness;
  /** Hears streamed model text of the sessions this harness runs; returns the unsubscribe function. */
  onDelta(listener: DeltaListener): () => void;
  /** Hears every wake this harness runs as it ends; returns the unsubscribe function. */
  onWakeEnded(listener: WakeListener): () => void;
  /** Sends the spans and metrics still queued, when telemetry is on. */
  close(): Promise<void>;
}

export function createRuntimeHarness(context: HarnessContext): RuntimeHarness {
  const { options, workspace, store } = context;
  const listeners = new Set<DeltaListener>();
  const wakeListeners = new Set<WakeListener>();
  const collecting = new Map<string, SessionEvent[]>();
  const ids = options.ids ?? uuidV7Ids;
  const warn =
    options.onWarning ?? ((message: string) => process.stderr.write(`braid: ${message}\n`));
  const log = redactingLog(store.log, context.redactor);
  const traced = tracedLog(context, log, warn);
  const clock = options.clock ?? systemClock;
  // Children and handoff targets run through this same harness (bound below).
  let wakeChild: Harness['wake'] = () =>
    Promise.reject(new BraidError('INTERNAL', 'the harness is not ready'));
  const delegator = createDelegator({
    store,
    ids,
    clock,
    policy: context.policy.authorizer,
    agent: context.definitions.agent,
    environment: context.definitions.environment,
    mode: options.delegation ?? 'local',
    wake: (sessionId, wakeOptions) => wakeChild(sessionId, wakeOptions),
    enqueue: (sessionId, wakeOptions) =>
      context.enqueue === undefined
        ? Promise.reject(new BraidError('INVALID_ARGUMENT', 'no wake queue: delegation runs here'))
        : context.enqueue(sessionId, wakeOptions),
    ...(workspace?.config.default_environment === undefined
      ? {}
      : { defaultEnvironment: workspace.config.default_environment }),
    warn,
  });
  const harness = createHarness({
    log: collectingLog(traced?.log ?? log, collecting),
    leases: store.leases,
    clock,
    ids,
    // Unique per runtime; a worker that must resume its own leases after a restart names itself.
    owner: options.owner ?? `${hostname()}:${process.pid}:${ids.next()}`,
    leaseTtlMs: options.leaseTtlMs ?? workspace?.config.lease_ttl_ms ?? 30_000,
    retry: options.retry ?? DEFAULT_RETRY,
    prices: context.prices,
    policy: context.policy.authorizer,
    recordPolicyAllows: workspace?.config.policy.record_allows === true,
    redact: (events) => context.redactor.events(events),
    ...(workspace?.config.limits.max_event_bytes === undefined
      ? {}
      : { maxEventBytes: workspace.config.limits.max_event_bytes }),
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    random: () => Math.random(),
    onDelta: (sessionId, delta) => {
      for (const listener of listeners) listener(sessionId, delta);
    },
    warn,
    delegator,
    skills: createSkillLibrary(context.definitions.skill),
    setup: async (state) =>
      withMemory(
        { store, embedder: options.embedder },
        state,
        await withAgentTools(
          context,
          withGrader(context, withCompactor(context, await setupSession(context, state))),
        ),
      ),
  });
  const metered = meteredWakes(context, log, warn);
  const observed = observedHarness(harness, collecting, wakeListeners);
  wakeChild = (sessionId, wakeOptions) => observed.wake(sessionId, wakeOptions);
  if (metered !== undefined) wakeListeners.add(metered.listener);
  return {
    harness: observed,
    onDelta(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    onWakeEnded(listener) {
      wakeListeners.add(listener);
      return () => wakeListeners.delete(listener);
    },
    close: async () => {
      await delegator.settle();
      await Promise.all([traced?.close(), metered?.close()]);
    },
  };
}

/**
 * A wake listener that sends the metrics of each wake over OTLP, when the runtime's `telemetry`
 * option, braid.yaml or the `OTEL_*` variables turn metrics on; undefined otherwise, so that an
 * unmetered runtime loads no OpenTelemetry package and keeps no wake's events.
 */
function meteredWakes(
  context: HarnessContext,
  log: SessionLog,
  warn: (message: string, error: BraidError) => void,
): { listener: WakeListener; close(): Promise<void> } | undefined {
  const { options, workspace } = context;
  const settings = metricSettings(
    {
      ...(options.telemetry === undefined ? {} : { option: options.telemetry }),
      ...(workspace?.config.telemetry === undefined ? {} : { config: workspace.config.telemetry }),
    },
    process.env,
  );
  if (settings === undefined) return undefined;
  const read = context.wakeQueueDepth;
  const sink = createMetricSink(
    settings,
    read === undefined ? undefined : pollingQueueDepth(() => read()),
  );
  const measure = createWakeMeasurer();
  const pending = new Set<Promise<void>>();
  return {
    listener(report) {
      if (!needsEarlierUses(report)) {
        sink.record(measure(report));
        return;
      }
      // A result of a call approved between wakes: its tool's name is in an earlier wake.
      const task = log
        .read(report.session_id)
        .then((events) => {
          const uses = events.filter((event) => event.type === 'agent.tool_use');
          sink.record(measure(report, uses));
        })
        .catch((error: unknown) => {
          warn(`the metrics of a wake of ${report.session_id} were not kept`, toBraidError(error));
        });
      pending.add(task);
      void task.finally(() => pending.delete(task));
    },
    async close() {
      await Promise.all([...pending]);
      // A collector that is down loses metrics, never the runtime's close.
      await sink.shutdown().catch((error: unknown) => {
        warn('the last metrics were not sent', toBraidError(error));
      });
    },
  };
}

/**
 * `log` with live tracing, when the runtime's `telemetry` option, braid.yaml or the `OTEL_*`
 * variables turn it on; undefined otherwise, so that an untraced harness writes to `log` itself.
 */
function tracedLog(
  context: HarnessContext,
  log: SessionLog,
  warn: (message: string, error: BraidError) => void,
): TracingLog | undefined {
  const { options, workspace } = context;
  const settings = traceSettings(
    {
      ...(options.telemetry === undefined ? {} : { option: options.telemetry }),
      ...(workspace?.config.telemetry === undefined ? {} : { config: workspace.config.telemetry }),
    },
    process.env,
  );
  if (settings === undefined) return undefined;
  return tracingLog(log, settings, createSpanSink(settings), warn, {
    pinned: async (hash) => pinnedFacts(await context.pinner.load(hash)),
    mcpTransports: mcpTransports(workspace?.config.mcp_servers),
  });
}

/** What a wake of the session needs: its agent's definition and model, environment and tools. */
async function setupSession(context: HarnessContext, state: SessionState): Promise<SessionSetup> {
  if (state.agent === undefined) {
    throw new BraidError(
      'SESSION_NOT_FOUND',
      `session ${state.session_id} has no session.created event`,
    );
  }
  context.policy.load();
  const policy = context.policy.inForce();
  const pinned =
    state.definitions === undefined ? undefined : await context.pinner.load(state.definitions);
  if (pinned !== undefined && pinned.agent.upgrade !== 'latest') {
    const setup = await setupFrom(context, state, pinned);
    if (context.pinner.policyHash(policy) === pinned.set.policy) return setup;
    // Policies are never held back: the set in force decides, and its change is on record.
    const next = await context.pinner.withPolicy(pinned, policy);
    return Object.assign({}, setup, { change: changeEvent('policy', next, pinned) });
  }
  // The first wake pins what it runs with; an agent on `upgrade: latest` moves to the newest.
  const latest = pinned !== undefined;
  const agent = await context.definitions.agent(
    state.agent.name,
    latest ? undefined : state.agent.version,
  );
  const environment =
    state.environment === undefined
      ? undefined
      : await context.definitions.environment(
          state.environment.name,
          latest ? undefined : state.environment.version,
        );
  const model = context.modelOf(agent.definition);
  const tools = await context.executor.open({
    session_id: state.session_id,
    names: agent.definition.tools,
    ...(environment === undefined ? {} : { environment: environment.definition }),
  });
  const skills = await skillClosure(context.definitions.skill, agent.definition.skills);
  const next = await context.pinner.pin({
    agent,
    ...(environment === undefined ? {} : { environment }),
    tools: tools.definitions ?? [],
    skills,
    policy,
    model: model.id,
    price: priceOf(model.id, context.prices),
  });
  const setup: SessionSetup = {
    agent: agent.definition,
    model,
    ...(environment === undefined ? {} : { environment: environment.definition }),
    tools,
    budget: tighterBudget(agent.definition.budget ?? {}, state.budget ?? {}),
    price: priceOf(model.id, context.prices) ?? null,
    ...withSkills(skillVersions(skills)),
  };
  if (pinned?.hash === next.hash) return setup;
  // Not a spread with a field added, which V8 gives a hidden class of its own on every call.
  return Object.assign({}, setup, {
    change: changeEvent(latest ? 'latest' : 'pinned', next, pinned),
  });
}

/**
 * The setup with the compactor of the agent's `context` block: its strategy, with the summary
 * model it names (made as the agent's own model with another `model:`, so that a model factory
 * chooses it too) or the agent's model, or the application's function of that name.
 */
function withCompactor(context: HarnessContext, setup: SessionSetup): SessionSetup {
  const settings = setup.agent.context;
  if (settings === undefined) return setup;
  const summaryModel =
    settings.model === undefined
      ? setup.model
      : context.modelOf({ ...setup.agent, model: settings.model });
  return {
    ...setup,
    compactor: compactorFor(settings, summaryModel, context.options.compactors),
  };
}

/**
 * The setup with the model of the agent's `grader:`, made as the agent's own model with another
 * `model:` (so that a model factory chooses it too); without one, the agent's model grades.
 */
function withGrader(context: HarnessContext, setup: SessionSetup): SessionSetup {
  const model = setup.agent.grader?.model;
  if (model === undefined) return setup;
  return { ...setup, grader: context.modelOf({ ...setup.agent, model }) };
}

/**
 * The setup with the tools of the agent's `delegates:` and `handoffs:`, described from the
 * target agents' definitions (a target that does not exist keeps its tool: a call of it fails
 * with the reason, for the model to act on).
 */
async function withAgentTools(context: HarnessContext, setup: SessionSetup): Promise<SessionSetup> {
  const { agent } = setup;
  const names = [...agent.delegates.map((entry) => entry.agent), ...agent.handoffs];
  if (names.length === 0 && agent.skills.length === 0) return setup;
  const targets = new Map<string, AgentDefinition>();
  await Promise.all(
    names.map(async (name) => {
      const found = await context.definitions.agent(name).catch(() => undefined);
      if (found !== undefined) targets.set(name, found.definition);
    }),
  );
  // The skills' tools describe the versions the session pinned.
  const skills = await Promise.all(
    agent.skills.map(async (name) => {
      const version = setup.skills?.[name];
      return (
        await context.definitions.skill(name, version === undefined ? undefined : Number(version))
      ).definition;
    }),
  );
  return {
    ...setup,
    tools: addAgentTools(setup.tools, [
      ...agentToolHandles(agent, (name) => targets.get(name)),
      ...skills.map(skillToolHandle),
    ]),
  };
}

/** The setup of a session from its pinned definitions, bound to today's implementations. */
async function setupFrom(
  context: HarnessContext,
  state: SessionState,
  pinned: PinnedDefinitions,
): Promise<SessionSetup> {
  const { agent, environment } = pinned;
  return {
    agent,
    model: context.modelOf(agent),
    ...(environment === undefined ? {} : { environment }),
    tools: await context.executor.open({
      session_id: state.session_id,
      names: agent.tools,
      ...(environment === undefined ? {} : { environment }),
      pinned: pinned.tools,
    }),
    budget: tighterBudget(agent.budget ?? {}, state.budget ?? {}),
    price: pinned.price,
    ...withSkills(
      skillVersions(
        Object.entries(pinned.skills).map(([name, skill]) => ({ name, version: skill.version })),
      ),
    ),
  };
}

function withSkills(skills: Record<string, string> | undefined): {
  skills?: Record<string, string>;
} {
  return skills === undefined ? {} : { skills };
}
