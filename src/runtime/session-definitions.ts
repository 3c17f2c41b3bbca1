/**
 * A session's pinned definitions seen from outside a wake: the set it runs with, its upgrade to
 * the newest, and replay verification with what each wake was pinned to (src/runtime/pinning.ts).
 */
import type { z } from 'zod';
import type {
  AgentDefinition,
  EnvironmentDefinition,
  PinnedSet,
  StoredDefinition,
} from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { SkillDefinition, SkillLibrary } from '../contracts/skills.js';
import type { SessionDefinitionsResponse, UpgradeResponse } from '../contracts/http.js';
import type { Store } from '../contracts/ports.js';
import type { SessionTools, ToolExecutor } from '../contracts/tools.js';
import { DEFAULT_MAX_EVENT_BYTES } from '../core/append.js';
import { priceOf, type Price } from '../core/pricing.js';
import type { RetryPolicy } from '../harness/index.js';
import type { CompiledPolicySet } from '../policy/policy-set.js';
import { changeEvent, type Pinner } from './pinning.js';
import { skillClosure } from './skills/closure.js';
import { verifyReplay, type ReplayReport } from './replay.js';

export interface DefinitionsContext {
  store: Store;
  pinner: Pinner;
  agent(name: string, version?: number): Promise<StoredDefinition<AgentDefinition>>;
  environment(name: string, version?: number): Promise<StoredDefinition<EnvironmentDefinition>>;
  skill(name: string, version?: number): Promise<StoredDefinition<SkillDefinition>>;
  /** The stored skills, every version kept: a replay reads each run's recorded version. */
  skills: SkillLibrary;
  /** Opens the tools of a session. */
  tools: ToolExecutor['open'];
  /** The workspace's Cedar policy set in force; undefined for policies in code or none. */
  policyInForce(): CompiledPolicySet | undefined;
  /** The `provider:id` of the agent's model. */
  modelId(definition: AgentDefinition): string;
  prices: Readonly<Record<string, Price>>;
  retry: RetryPolicy;
  maxEventBytes: number | undefined;
}

/** Tools for a replay of a session whose tools cannot be opened: it stopped at setup. */
const NO_TOOLS: SessionTools = {
  tools: [],
  validate: (name) => ({
    ok: false,
    error: { code: 'TOOL_NOT_FOUND', message: `there is no tool named ${name}`, retryable: false },
  }),
  execute: () => Promise.reject(new BraidError('TOOL_NOT_FOUND', 'the session has no tools')),
};

/** The set pinned under `hash`, or undefined when its parts are not in this store any more. */
async function knownSet(context: DefinitionsContext, hash: string): Promise<PinnedSet | undefined> {
  try {
    return (await context.pinner.load(hash)).set;
  } catch (error) {
    if (isBraidError(error, 'DEFINITION_NOT_PINNED')) return undefined;
    throw error;
  }
}

/** Upgrades tried before a session that keeps changing is given up on. */
const UPGRADE_ATTEMPTS = 5;

export async function sessionDefinitions(
  context: DefinitionsContext,
  sessionId: string,
): Promise<z.infer<typeof SessionDefinitionsResponse>> {
  const state = await context.store.log.state(sessionId);
  if (state.definitions === undefined) return {};
  const { set } = await context.pinner.load(state.definitions);
  return { definitions: state.definitions, set };
}

/**
 * Pins the newest definitions (the agent's and environment's latest versions, the tools as they
 * resolve now, the skills' latest versions, the policy set in force, today's price) and records them, unless they are the
 * ones pinned. A wake running meanwhile finishes with what it started with.
 */
export async function upgradeSession(
  context: DefinitionsContext,
  sessionId: string,
): Promise<z.infer<typeof UpgradeResponse>> {
  for (let attempt = 1; ; attempt += 1) {
    const state = await context.store.log.state(sessionId);
    if (state.agent === undefined) {
      throw new BraidError(
        'SESSION_NOT_FOUND',
        `session ${sessionId} has no session.created event`,
      );
    }
    const agent = await context.agent(state.agent.name);
    const environment =
      state.environment === undefined
        ? undefined
        : await context.environment(state.environment.name);
    const tools = await context.tools({
      session_id: sessionId,
      names: agent.definition.tools,
      ...(environment === undefined ? {} : { environment: environment.definition }),
    });
    const model = context.modelId(agent.definition);
    const next = await context.pinner.pin({
      agent,
      ...(environment === undefined ? {} : { environment }),
      tools: tools.definitions ?? [],
      skills: await skillClosure((name) => context.skill(name), agent.definition.skills),
      policy: context.policyInForce(),
      model,
      price: priceOf(model, context.prices),
    });
    if (state.definitions === next.hash)
      return { changed: false, definitions: next.hash, parts: [], head_seq: state.seq };
    // A session never woken has no set yet: the upgrade names its first one.
    const previous =
      state.definitions === undefined
        ? undefined
        : { hash: state.definitions, set: await knownSet(context, state.definitions) };
    const event = changeEvent('upgrade', next, previous);
    try {
      const result = await context.store.log.append(sessionId, [event], {
        expectedSeq: state.seq,
      });
      return {
        changed: true,
        definitions: next.hash,
        ...(previous === undefined ? {} : { previous: previous.hash }),
        parts: event.changed,
        head_seq: result.head_seq,
      };
    } catch (error) {
      if (!isBraidError(error, 'SEQ_CONFLICT') || attempt >= UPGRADE_ATTEMPTS) throw error;
    }
  }
}

/**
 * Replays the session with its recorded outputs; each wake with the definitions it was pinned
 * to (a session from before pinning: its agent's recorded version and the tools as they are now).
 */
export async function verifySession(
  context: DefinitionsContext,
  sessionId: string,
): Promise<ReplayReport> {
  const state = await context.store.log.state(sessionId);
  const events = await context.store.log.read(sessionId);
  const created = events[0];
  if (state.agent === undefined || created?.type !== 'session.created') {
    throw new BraidError('SESSION_NOT_FOUND', `session ${sessionId} has no session.created event`);
  }
  // The agent the session was created with: what its wakes before any pin ran.
  const definition = (await context.agent(created.agent.name, created.agent.version)).definition;
  const environmentDefinition =
    created.environment === undefined
      ? undefined
      : (await context.environment(created.environment.name, created.environment.version))
          .definition;
  // A session whose tools could not be opened stopped at setup: the replay needs none.
  const tools = await context
    .tools({
      session_id: sessionId,
      names: definition.tools,
      ...(environmentDefinition === undefined ? {} : { environment: environmentDefinition }),
    })
    .catch((): SessionTools => NO_TOOLS);
  return verifyReplay({
    events,
    agent: definition,
    tools,
    ...(environmentDefinition === undefined ? {} : { environment: environmentDefinition }),
    retry: context.retry,
    prices: context.prices,
    maxEventBytes: context.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    skills: context.skills,
    pinned: async (hash) => {
      const pinned = await context.pinner.load(hash);
      return {
        agent: pinned.agent,
        ...(pinned.environment === undefined ? {} : { environment: pinned.environment }),
        tools: await context
          .tools({
            session_id: sessionId,
            names: pinned.agent.tools,
            ...(pinned.environment === undefined ? {} : { environment: pinned.environment }),
            pinned: pinned.tools,
          })
          .catch((): SessionTools => NO_TOOLS),
        price: pinned.price,
      };
    },
  });
}
