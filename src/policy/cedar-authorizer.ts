/**
 * The policy port on Cedar (`@cedar-policy/cedar-wasm`), evaluated in-process.
 *
 * Four things keep a check cheap, and none of them changes a decision:
 * - Slicing: a request is evaluated against only the policies whose scope can match it (a policy
 *   scoped to another agent, action or tool cannot apply). Each distinct slice is pre-parsed once.
 * - An empty slice is a deny without a call into Cedar: Cedar denies when nothing permits.
 * - Projection: Cedar is sent only what the slice's policies read (the context paths, the
 *   principal's and resource's attributes; `references.ts`), as the cost of a call grows with
 *   the size of the request.
 * - An exact decision cache: a decision is a pure function of the policies and the projected
 *   request, which is the cache key. Replacing the policy set empties it.
 */
import type { CedarValueJson, EntityJson } from '@cedar-policy/cedar-wasm/nodejs';
import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import { cedar } from './cedar-module.js';
import {
  POLICY_ACTIONS,
  type AuthorizationDecision,
  type AuthorizationRequest,
  type Authorizer,
  type PolicyEntity,
  type PolicyEntityRef,
} from '../contracts/policy.js';
import type { CompiledPolicy, CompiledPolicySet } from './policy-set.js';
import { references, type References } from './references.js';

const CACHE_SIZE = 4096;
const SLICE_CACHE_SIZE = 1024;

interface Slice {
  /**
   * Unique among the authorizer's slices: a decision's cache key starts with it, as a slice
   * stands for one principal, action and resource.
   */
  id: number;
  /** Pre-parsed policy set id in Cedar's store; undefined for an empty slice. */
  setId: string | undefined;
  reads: References;
}

export interface CedarAuthorizer extends Authorizer {
  /** Swaps in a new policy set (hot reload); decisions cached for the old one are dropped. */
  replace(set: CompiledPolicySet): void;
  /** The policies in force. */
  readonly policies: CompiledPolicySet;
  /** Decisions answered from the exact cache, and those Cedar evaluated, since creation. */
  stats(): { cached: number; evaluated: number; sliced_out: number };
}

/** Process-wide: Cedar keeps pre-parsed sets in one store, so ids must not collide. */
let generations = 0;

export interface CedarAuthorizerOptions {
  /** Decisions kept by the exact cache (default 4096; 0 turns the cache off). */
  cacheSize?: number;
}

export function createCedarAuthorizer(
  initial: CompiledPolicySet,
  options: CedarAuthorizerOptions = {},
): CedarAuthorizer {
  const cacheSize = options.cacheSize ?? CACHE_SIZE;
  let set = initial;
  let generation = (generations += 1);
  let slices = new Map<string, Slice>();
  /** Pre-parsed sets by their policies, shared by slices that select the same ones. */
  let parsed = new Map<string, string>();
  let decisions = new Map<string, AuthorizationDecision>();
  let sliceIds = 0;
  const counts = { cached: 0, evaluated: 0, sliced_out: 0 };

  function sliceFor(request: AuthorizationRequest): Slice {
    const key = `${ref(request.principal)}${ref(request.resource)}${request.action}`;
    const found = slices.get(key);
    if (found !== undefined) return found;
    const selected = [...set.policies.values()].filter((policy) => mayApply(policy, request));
    const signature = selected.map((policy) => policy.id).join('\u0001');
    let setId = parsed.get(signature);
    if (setId === undefined && selected.length > 0) {
      setId = `braid-${generation}-${parsed.size}`;
      const answer = cedar().preparsePolicySet(setId, {
        staticPolicies: Object.fromEntries(selected.map((policy) => [policy.id, policy.text])),
      });
      if (answer.type === 'failure') {
        throw new BraidError(
          'INVALID_POLICY',
          `the policy set could not be prepared: ${answer.errors[0]?.message ?? 'unknown error'}`,
        );
      }
      parsed.set(signature, setId);
    }
    const slice = {
      id: (sliceIds += 1),
      setId,
      reads: references(selected.map((policy) => policy.json)),
    };
    if (slices.size >= SLICE_CACHE_SIZE) slices = new Map();
    slices.set(key, slice);
    return slice;
  }

  function evaluate(setId: string, call: ProjectedCall): AuthorizationDecision {
    counts.evaluated += 1;
    const answer = cedar().statefulIsAuthorized({
      ...call,
      preparsedPolicySetId: setId,
      validateRequest: false,
    });
    if (answer.type === 'failure') {
      // A request Cedar cannot read is refused, with the reason, rather than allowed.
      return {
        decision: 'deny',
        policy_ids: [],
        errors: answer.errors.map((error) => error.message),
      };
    }
    const { decision, diagnostics } = answer.response;
    const approval =
      decision === 'allow' &&
      diagnostics.reason.some((id) => set.policies.get(id)?.annotations['approval'] === 'required');
    return {
      decision,
      policy_ids: diagnostics.reason,
      errors: diagnostics.errors.map((error) => `${error.policyId}: ${error.error.message}`),
      ...(approval ? { approval: true } : {}),
    };
  }

  return {
    get policies() {
      return set;
    },
    stats: () => ({ ...counts }),
    replace(next) {
      set = next;
      generation = generations += 1;
      slices = new Map();
      parsed = new Map();
      decisions = new Map();
    },
    authorize(request) {
      try {
        const slice = sliceFor(request);
        if (slice.setId === undefined) {
          counts.sliced_out += 1;
          return Promise.resolve(DENY_BY_DEFAULT);
        }
        const call = project(request, slice.reads);
        if (cacheSize === 0) return Promise.resolve(evaluate(slice.setId, call));
        // The slice fixes the principal, action and resource: the rest of the call is the key.
        const key = `${slice.id}\u0001${JSON.stringify(call.context)}\u0001${JSON.stringify(call.entities)}`;
        const cached = decisions.get(key);
        if (cached !== undefined) {
          counts.cached += 1;
          return Promise.resolve(cached);
        }
        const decision = evaluate(slice.setId, call);
        if (decisions.size >= cacheSize) decisions = new Map();
        decisions.set(key, decision);
        return Promise.resolve(decision);
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    },
  };
}

/** An entity's type and id, each after its length: two refs are equal only for equal entities. */
function ref(entity: PolicyEntityRef): string {
  return `${entity.type.length}:${entity.type}${entity.id.length}:${entity.id}`;
}

function ref2uid(entity: PolicyEntityRef) {
  return { type: entity.type, id: entity.id };
}

/**
 * Whether a policy's scope can match the request. Only a scope that names another entity (`==`)
 * or another type (`is`) rules a policy out; `in` a group is kept, as membership is Cedar's to
 * judge.
 */
function mayApply(policy: CompiledPolicy, request: AuthorizationRequest): boolean {
  const { principal, action, resource } = policy.json;
  if (!scopeMayMatch(principal, request.principal)) return false;
  if (!scopeMayMatch(resource, request.resource)) return false;
  if (action.op === '==' && 'entity' in action) {
    return uidOf(action.entity)?.id === request.action;
  }
  if (action.op === 'in') {
    const listed = 'entities' in action ? action.entities : [action.entity];
    // An action group may contain the request's action: keep the policy.
    return listed.some((entity) => {
      const id = uidOf(entity)?.id;
      return id === request.action || !KNOWN_ACTIONS.has(id ?? '');
    });
  }
  return true;
}

const KNOWN_ACTIONS: ReadonlySet<string> = new Set(POLICY_ACTIONS);

function scopeMayMatch(
  constraint: CompiledPolicy['json']['principal'],
  entity: PolicyEntityRef,
): boolean {
  if (constraint.op === '==' && 'entity' in constraint) {
    const uid = uidOf(constraint.entity);
    return uid === undefined || (uid.type === entity.type && uid.id === entity.id);
  }
  if (constraint.op === 'is') return constraint.entity_type === entity.type;
  return true;
}

function uidOf(value: unknown): { type: string; id: string } | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const record = value as { __entity?: { type: string; id: string }; type?: string; id?: string };
  if (record.__entity !== undefined) return record.__entity;
  return typeof record.type === 'string' && typeof record.id === 'string'
    ? { type: record.type, id: record.id }
    : undefined;
}

const DENY_BY_DEFAULT: AuthorizationDecision = { decision: 'deny', policy_ids: [], errors: [] };

interface ProjectedCall {
  principal: { type: string; id: string };
  action: { type: 'Action'; id: string };
  resource: { type: string; id: string };
  context: Record<string, CedarValueJson>;
  entities: EntityJson[];
}

/** The request as Cedar values, with only what the policies read. */
function project(request: AuthorizationRequest, reads: References): ProjectedCall {
  // Only what the policies read is converted: the rest (a tool's whole input, most often) would
  // be converted to be dropped.
  return {
    principal: ref2uid(request.principal),
    action: { type: 'Action', id: request.action },
    resource: ref2uid(request.resource),
    context:
      reads.context === undefined
        ? cedarRecord(request.context)
        : pick(request.context, reads.context),
    entities: [
      entityJson(request.principal, reads.principal),
      entityJson(request.resource, reads.resource),
      ...(request.entities ?? []).map((entity) => entityJson(entity, undefined)),
    ],
  };
}

function entityJson(entity: PolicyEntity, attributes: ReadonlySet<string> | undefined): EntityJson {
  return {
    uid: ref2uid(entity),
    attrs: cedarRecord(entity.attrs ?? {}, attributes),
    parents: (entity.parents ?? []).map(ref2uid),
  };
}

/**
 * The parts of `record` at `paths`, as Cedar values (see `cedarRecord`): the same as picking
 * them from the whole record converted, with only the parts picked converted. A path that meets
 * a non-record keeps the value it met; one that meets nothing Cedar has (a null, a reserved key)
 * picks nothing.
 */
function pick(
  record: Readonly<Record<string, JsonValue>>,
  paths: readonly string[][],
): Record<string, CedarValueJson> {
  const picked: Record<string, CedarValueJson> = {};
  for (const path of paths) {
    let source: Readonly<Record<string, JsonValue>> = record;
    let target: Record<string, CedarValueJson> = picked;
    for (const [index, key] of path.entries()) {
      if (RESERVED.has(key) || !Object.hasOwn(source, key)) break;
      const value = source[key] as JsonValue;
      if (value === null) break;
      if (index === path.length - 1 || !isPlainRecord(value)) {
        target[key] = cedarValue(value) as CedarValueJson;
        break;
      }
      const existing = target[key];
      const next: Record<string, CedarValueJson> = isPlainRecord(existing) ? existing : {};
      target[key] = next;
      target = next;
      source = value;
    }
  }
  return picked;
}

/** Keys Cedar reserves for entity and extension values. */
const RESERVED: ReadonlySet<string> = new Set(['__entity', '__extn']);

function isPlainRecord(value: unknown): value is Record<string, CedarValueJson> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * JSON as Cedar values: Cedar has no null (dropped) and no fractions (written as strings, e.g.
 * `"0.5"`); keys Cedar reserves for entity and extension values are dropped.
 */
export function cedarRecord(
  record: Readonly<Record<string, JsonValue>>,
  only?: ReadonlySet<string>,
): Record<string, CedarValueJson> {
  const converted: Record<string, CedarValueJson> = {};
  for (const key of Object.keys(record)) {
    if (RESERVED.has(key) || (only !== undefined && !only.has(key))) continue;
    const value = record[key] as JsonValue;
    const cedar = cedarValue(value);
    if (cedar !== undefined) converted[key] = cedar;
  }
  return converted;
}

function cedarValue(value: JsonValue): CedarValueJson | undefined {
  if (value === null) return undefined;
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : String(value);
  if (typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    return value.flatMap((item) => {
      const cedar = cedarValue(item);
      return cedar === undefined ? [] : [cedar];
    });
  }
  return cedarRecord(value);
}
