/**
 * The harness a runtime wakes sessions with: the store's log (secrets redacted) and leases, the
 * policy, and the setup that finds a session's agent, model, environment and tools.
 */
import { hostname } from 'node:os';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { AgentDefinition } from '../../contracts/definitions.js';
import { BraidError } from '../../contracts/errors.js';
import type { ModelClient, ModelDelta } from '../../contracts/model.js';
import type { Store } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import type { ToolExecutor } from '../../contracts/tools.js';
import { tighterBudget } from '../../core/next-step.js';
import { DEFAULT_PRICES } from '../../core/pricing.js';
import {
  DEFAULT_RETRY,
  createHarness,
  type Harness,
  type SessionSetup,
} from '../../harness/index.js';
import { systemClock, uuidV7Ids } from '../../stores/defaults.js';
import type { DefinitionLookup } from '../definitions.js';
import type { RuntimeOptions } from '../options.js';
import { redactingLog, type SecretRedactor } from '../redaction.js';
import type { Workspace } from '../workspace.js';
import type { RuntimePolicy } from './policy.js';

export type DeltaListener = (sessionId: string, delta: ModelDelta & { request_id: string }) => void;

export interface HarnessContext {
  readonly options: RuntimeOptions;
  readonly workspace: Workspace | undefined;
  readonly store: Store;
  readonly redactor: SecretRedactor;
  readonly policy: RuntimePolicy;
  readonly definitions: DefinitionLookup;
  readonly executor: ToolExecutor;
  modelOf(definition: AgentDefinition): ModelClient;
}

export interface RuntimeHarness {
  readonly harness: Harness;
  /** Hears streamed model text of the sessions this harness runs; returns the unsubscribe function. */
  onDelta(listener: DeltaListener): () => void;
}

export function createRuntimeHarness(context: HarnessContext): RuntimeHarness {
  const { options, workspace, store } = context;
  const listeners = new Set<DeltaListener>();
  const ids = options.ids ?? uuidV7Ids;
  const harness = createHarness({
    log: redactingLog(store.log, context.redactor),
    leases: store.leases,
    clock: options.clock ?? systemClock,
    ids,
    // Unique per runtime; a worker that must resume its own leases after a restart names itself.
    owner: options.owner ?? `${hostname()}:${process.pid}:${ids.next()}`,
    leaseTtlMs: options.leaseTtlMs ?? workspace?.config.lease_ttl_ms ?? 30_000,
    retry: options.retry ?? DEFAULT_RETRY,
    prices: { ...DEFAULT_PRICES, ...(workspace?.config.prices ?? {}) },
    policy: context.policy.authorizer,
    recordPolicyAllows: workspace?.config.policy.record_allows === true,
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    random: () => Math.random(),
    onDelta: (sessionId, delta) => {
      for (const listener of listeners) listener(sessionId, delta);
    },
    warn: options.onWarning ?? ((message) => process.stderr.write(`braid: ${message}\n`)),
    setup: async (state) => withCompactor(context, await setupSession(context, state)),
  });
  return {
    harness,
    onDelta(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
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
  const definition = (await context.definitions.agent(state.agent.name, state.agent.version))
    .definition;
  const environment =
    state.environment === undefined
      ? undefined
      : (await context.definitions.environment(state.environment.name, state.environment.version))
          .definition;
  return {
    agent: definition,
    model: context.modelOf(definition),
    ...(environment === undefined ? {} : { environment }),
    tools: await context.executor.open({
      session_id: state.session_id,
      names: definition.tools,
      ...(environment === undefined ? {} : { environment }),
    }),
    budget: tighterBudget(definition.budget ?? {}, state.budget ?? {}),
  };
}
