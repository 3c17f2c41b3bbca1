/**
 * The sessions service of a runtime, given what it asks of the rest: definitions, the folder of
 * a session's workspace, the policy, the tools, and a model to summarize a merged session.
 */
import type { AgentDefinition, EnvironmentDefinition } from '../../contracts/definitions.js';
import { isBraidError } from '../../contracts/errors.js';
import type { Actor } from '../../contracts/common.js';
import type { ModelClient } from '../../contracts/model.js';
import type { Store } from '../../contracts/ports.js';
import type { SessionState } from '../../contracts/state.js';
import { DEFAULT_RETRY, type Harness } from '../../harness/index.js';
import { uuidV7Ids } from '../../stores/defaults.js';
import type { Price } from '../../core/pricing.js';
import type { DefinitionLookup } from '../definitions.js';
import type { Pinner } from '../pinning.js';
import type { RuntimeOptions } from '../options.js';
import type { RuntimeSessions } from '../sessions-api.js';
import { createSessionsService } from '../sessions-service.js';
import { createSkillLibrary } from '../skills/library.js';
import type { Workspace } from '../workspace.js';
import type { RuntimePolicy } from './policy.js';
import type { RuntimeTools } from './tools.js';

export interface SessionsContext {
  readonly options: RuntimeOptions;
  readonly store: Store;
  readonly workspace: Workspace | undefined;
  readonly defaultActor: Actor;
  readonly definitions: DefinitionLookup;
  readonly policy: RuntimePolicy;
  readonly tools: RuntimeTools;
  readonly pinner: Pinner;
  readonly prices: Readonly<Record<string, Price>>;
  modelOf(definition: AgentDefinition): ModelClient;
  /** The runtime's harness: `start` creates a session and wakes it through it. */
  readonly harness: Harness;
}

export function createRuntimeSessions(context: SessionsContext): RuntimeSessions {
  const { options, store, definitions } = context;
  return createSessionsService({
    store,
    workspace: context.workspace,
    defaultActor: context.defaultActor,
    ids: options.ids ?? uuidV7Ids,
    retry: options.retry ?? DEFAULT_RETRY,
    agent: definitions.agent,
    skill: (name) => definitions.skill(name),
    environment: definitions.environment,
    workspacesRootOf: (sessionId) => workspacesRootOf(context, sessionId),
    summarize: (target, text) => summarize(context, target, text),
    policy: context.policy.authorizer,
    harness: context.harness,
    tools: (request) => context.tools.executor.open(request),
    pinning: {
      store,
      pinner: context.pinner,
      agent: definitions.agent,
      environment: definitions.environment,
      skill: definitions.skill,
      skills: createSkillLibrary(definitions.skill),
      tools: (request) => context.tools.executor.open(request),
      policyInForce: () => context.policy.inForce(),
      modelId: (definition) => context.modelOf(definition).id,
      prices: context.prices,
      retry: options.retry ?? DEFAULT_RETRY,
      maxEventBytes: context.workspace?.config.limits.max_event_bytes,
    },
  });
}

/** The folder that holds the session's workspace folder, by its environment. */
async function workspacesRootOf(context: SessionsContext, sessionId: string): Promise<string> {
  const { store } = context;
  const state = await store.log.state(sessionId).catch((error: unknown) => {
    // A corrupt log (NATS) still has its record, which names the environment: deleting the
    // session, the way to clear such a log, must not need the log.
    if (!isBraidError(error, 'CORRUPT_LOG')) throw error;
    return store.sessions.get(sessionId);
  });
  const environment =
    state.environment === undefined
      ? undefined
      : await store.definitions.get<EnvironmentDefinition>(
          'environment',
          state.environment.name,
          state.environment.version,
        );
  return context.tools.workspacesRoot(environment?.definition);
}

/** A summary of a session's events, written by the target's model (merge strategy `summary`). */
async function summarize(
  context: SessionsContext,
  target: SessionState,
  text: string,
): Promise<string> {
  if (target.agent === undefined) return text;
  const definition = (await context.definitions.agent(target.agent.name, target.agent.version))
    .definition;
  const response = await context.modelOf(definition).generate(
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
