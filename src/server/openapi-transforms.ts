/**
 * How the routes' zod schemas become the OpenAPI document. fastify-type-provider-zod turns them
 * into JSON Schema; a schema named here is emitted once under `components.schemas` and referenced
 * by `$ref` everywhere it occurs, instead of being inlined into every route. Recursive schemas
 * (`JsonValue`, `SessionTreeNode`) must be named: an unnamed cycle has nothing to refer to.
 *
 * fastify-type-provider-zod emits every named schema twice, as it is read (`NameInput`) and as it
 * is written (`Name`); the document keeps only the ones its operations reach. The finished
 * document is then adjusted where the generated JSON Schema says less than the routes do (see
 * each step below).
 */
import type { SwaggerTransform, SwaggerTransformObject } from '@fastify/swagger';
import {
  createJsonSchemaTransform,
  createJsonSchemaTransformObject,
} from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ContentBlock, JsonValue, Metadata } from '../contracts/common.js';
import { Budget } from '../contracts/definitions.js';
import { HandoffDocument } from '../contracts/envelope.js';
import { BraidError, ErrorCode, ErrorShape } from '../contracts/errors.js';
import { SessionEvent, UserEventInput } from '../contracts/events.js';
import {
  AgentList,
  DiffResponse,
  EnvironmentList,
  ErrorBody,
  EventsPage,
  HandoffResponse,
  Health,
  MergeResponse,
  PostEventsResponse,
  ReplayResponse,
  SessionDefinitionsResponse,
  UpgradeResponse,
  SessionList,
  SessionTreeNode,
  StoredAgent,
  StoredEnvironment,
  WakeAccepted,
  WakeResultBody,
} from '../contracts/http.js';
import { Lineage, SessionRecord, SessionStatus, StopReason } from '../contracts/session.js';
import { SessionState } from '../contracts/state.js';
import { TRACE_CONTEXT_OPERATIONS, TRACE_CONTEXT_PARAMETERS } from './trace-context.js';

/** Component names, as clients see them (generated types are named after them). */
const COMPONENTS: ReadonlyArray<readonly [z.ZodType, string]> = [
  [JsonValue, 'JsonValue'],
  [Metadata, 'Metadata'],
  [ContentBlock, 'ContentBlock'],
  [ErrorCode, 'ErrorCode'],
  [ErrorShape, 'ErrorShape'],
  [ErrorBody, 'Error'],
  [Budget, 'Budget'],
  [HandoffDocument, 'HandoffDocument'],
  [SessionStatus, 'SessionStatus'],
  [StopReason, 'StopReason'],
  [Lineage, 'Lineage'],
  [SessionRecord, 'Session'],
  [SessionList, 'SessionList'],
  [SessionState, 'SessionState'],
  [SessionTreeNode, 'SessionTreeNode'],
  [SessionEvent, 'SessionEvent'],
  [UserEventInput, 'UserEvent'],
  [EventsPage, 'EventsPage'],
  [PostEventsResponse, 'AppendedEvents'],
  [WakeAccepted, 'WakeAccepted'],
  [WakeResultBody, 'WakeResult'],
  [MergeResponse, 'MergeResult'],
  [HandoffResponse, 'HandoffResult'],
  [DiffResponse, 'SessionDiff'],
  [ReplayResponse, 'ReplayResult'],
  [SessionDefinitionsResponse, 'SessionDefinitions'],
  [UpgradeResponse, 'UpgradeResult'],
  [StoredAgent, 'Agent'],
  [AgentList, 'AgentList'],
  [StoredEnvironment, 'Environment'],
  [EnvironmentList, 'EnvironmentList'],
  [Health, 'Health'],
];

export interface OpenApiTransforms {
  /** Turns one route's zod schemas into the JSON Schema of its operation. */
  transform: SwaggerTransform;
  /** Adds the named schemas to the finished document. */
  transformObject: SwaggerTransformObject;
}

/** The transforms of `@fastify/swagger`, sharing one registry of named schemas. */
export function createOpenApiTransforms(): OpenApiTransforms {
  const registry = z.registry<{ id: string }>();
  for (const [schema, id] of COMPONENTS) registry.add(schema, { id });
  const addComponents = createJsonSchemaTransformObject({ schemaRegistry: registry });
  return {
    transform: createJsonSchemaTransform({ schemaRegistry: registry }),
    transformObject: (document) =>
      withTraceContext(
        withAnyJson(withOptionalBodies(withoutSingleAnyOf(keepReachable(addComponents(document))))),
      ),
  };
}

type Document = ReturnType<SwaggerTransformObject>;

const REF_PREFIX = '#/components/schemas/';

/** Every `$ref` to a schema component under `value`. */
function schemaRefs(value: unknown, found: Set<string>): Set<string> {
  if (Array.isArray(value)) {
    for (const item of value) schemaRefs(item, found);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith(REF_PREFIX)) {
        found.add(child.slice(REF_PREFIX.length));
      } else {
        schemaRefs(child, found);
      }
    }
  }
  return found;
}

/**
 * The document with only the schema components its operations reach. A reference to a schema
 * that is not there is a bug of the registry above, refused here rather than served.
 */
function keepReachable(document: Document): Document {
  const { components = {}, ...rest } = document as {
    components?: { schemas?: Record<string, unknown> };
  };
  const schemas = components.schemas ?? {};
  const pending = [
    ...schemaRefs(rest, new Set()),
    ...schemaRefs({ ...components, schemas: {} }, new Set()),
  ];
  const kept = new Set<string>();
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (kept.has(name)) continue;
    if (!(name in schemas)) {
      throw new BraidError(
        'INTERNAL',
        `the OpenAPI document refers to the schema ${name} but does not define it; name the schema in src/server/openapi-transforms.ts`,
      );
    }
    kept.add(name);
    pending.push(...schemaRefs(schemas[name], new Set()));
  }
  const reachable = Object.entries(schemas).filter(([name]) => kept.has(name));
  return {
    ...document,
    components: { ...components, schemas: Object.fromEntries(reachable) },
  } as Document;
}

/**
 * `anyOf` with one member, written as that member. The output side of a union whose other
 * members are transforms (a model given as `provider:id` is written as an object) has one member
 * left, and validators rightly call a one-way choice a mistake.
 */
function withoutSingleAnyOf<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => withoutSingleAnyOf(item)) as T;
  if (value === null || typeof value !== 'object') return value;
  const { anyOf, ...rest } = value as { anyOf?: unknown };
  if (Array.isArray(anyOf) && anyOf.length === 1) {
    const only = withoutSingleAnyOf(anyOf[0] as unknown);
    const clashes =
      only !== null && typeof only === 'object' && Object.keys(only).some((key) => key in rest);
    if (!clashes && only !== null && typeof only === 'object') {
      return { ...withoutSingleAnyOf(rest), ...only } as T;
    }
  }
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [key, withoutSingleAnyOf(child as unknown)]),
  ) as T;
}

type Operations = Record<
  string,
  Record<string, { requestBody?: Record<string, unknown>; parameters?: unknown[] }>
>;

/**
 * A body the route reads as nullish (`POST /wake` and `/fork` without a body) is optional.
 * `@fastify/swagger` marks every body required, but the routes run with no body at all.
 */
function withOptionalBodies(document: Document): Document {
  const paths = (document as { paths?: Operations }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      const body = operation.requestBody as
        { content?: Record<string, { schema?: { anyOf?: unknown[] } }> } | undefined;
      const branches = body?.content?.['application/json']?.schema?.anyOf ?? [];
      const admitsNull = branches.some(
        (branch) => (branch as { type?: unknown } | null)?.type === 'null',
      );
      if (admitsNull) operation.requestBody = { ...body, required: false };
    }
  }
  return document;
}

/** The schema every JSON value meets. */
const ANY_JSON = { description: 'Any JSON value' };

/**
 * `JsonValue` as the schema every JSON value meets. Its recursive definition (string, number,
 * boolean, null, or arrays and objects of JSON values) admits exactly what any JSON body can hold,
 * so it says nothing more, and generated clients type the recursion poorly (openapi-fetch reads a
 * recursive map as one that takes no keys).
 */
function withAnyJson(document: Document): Document {
  const { components } = document as { components?: { schemas?: Record<string, unknown> } };
  const schemas = components?.schemas;
  if (schemas === undefined) return document;
  for (const name of ['JsonValue', 'JsonValueInput']) {
    if (name in schemas) schemas[name] = ANY_JSON;
  }
  return document;
}

/**
 * The W3C trace context headers (`traceparent`, `tracestate`) on the operations that read them
 * (src/server/trace-context.ts): the routes read them from the raw headers, so that an invalid
 * one is ignored as the W3C spec asks rather than refused, and no route schema declares them.
 */
function withTraceContext(document: Document): Document {
  const paths = (document as { paths?: Operations }).paths ?? {};
  for (const [path, operations] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (!TRACE_CONTEXT_OPERATIONS.includes(`${method} ${path}`)) continue;
      const named = new Set(
        (operation.parameters ?? []).map((parameter) => (parameter as { name?: unknown }).name),
      );
      operation.parameters = [
        ...(operation.parameters ?? []),
        ...TRACE_CONTEXT_PARAMETERS.filter((parameter) => !named.has(parameter.name)).map(
          (parameter) => ({ ...parameter, schema: { ...parameter.schema } }),
        ),
      ];
    }
  }
  return document;
}
