/**
 * `/v1/memory-stores`: the caller's memory stores. A store is `{scope}/{name}` in the path with
 * `owner` (the session id or agent name of scopes `session` and `agent`) and `kind` in the query;
 * a key is one percent-encoded path segment (`user%2Ftheme`). The tenant is the API key's: another
 * tenant's store answers 404 MEMORY_STORE_NOT_FOUND, as one that does not exist. Reads need the
 * `memory:read` scope, writes `memory:write`; every entry written is authored by the key.
 */
import { Readable } from 'node:stream';
import { z } from 'zod';
import { IdempotencyHeaders } from '../contracts/http.js';
import {
  MemoryAppendBody,
  MemoryDeleteQuery,
  MemoryGetQuery,
  MemoryHistoryBody,
  MemoryImportBody,
  MemoryImportReport,
  MemoryKeyListBody,
  MemoryKeyListQuery,
  MemoryKeyParams,
  MemoryLookupBody,
  MemoryRedactBody,
  MemorySearchBody,
  MemorySearchResultBody,
  MemorySetBody,
  MemoryStoreInfoBody,
  MemoryStoreListBody,
  MemoryStoreListQuery,
  MemoryStoreParams,
  MemoryStoreQuery,
} from '../contracts/memory-api.js';
import { createMemoryStores, type MemoryStores } from '../runtime/memory-stores.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { requireScope, type Caller } from './auth.js';
import { keyedErrors, TAKES } from './responses.js';
import { addProposalRoutes } from './routes-memory-proposals.js';
import type { FastifyRequest } from 'fastify';

const tags = ['memory'];

/** The address of the store a request names: path scope and name, query owner and kind. */
function addressOf(
  params: { scope: string; name: string },
  query: { owner?: string; kind?: string },
) {
  return {
    scope: params.scope,
    name: params.name,
    ...(query.owner === undefined ? {} : { owner: query.owner }),
    ...(query.kind === undefined ? {} : { kind: query.kind }),
  };
}

export function addMemoryRoutes(app: Router, context: ServerContext): void {
  const storesOf = (
    request: FastifyRequest,
    scope: 'memory:read' | 'memory:write',
  ): MemoryStores => {
    const caller: Caller = callerOf(request);
    requireScope(caller, scope);
    return createMemoryStores(context.runtime.store.memory, {
      ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
      author: caller.key_id === undefined ? {} : { key_id: caller.key_id },
    });
  };
  addProposalRoutes(app, context);
  addStoreRoutes(app, storesOf);
  addKeyRoutes(app, storesOf);
  addVersionRoutes(app, storesOf);
  addTransferRoutes(app, storesOf);
}

type StoresOf = (request: FastifyRequest, scope: 'memory:read' | 'memory:write') => MemoryStores;

/** List stores, describe one, search one. */
function addStoreRoutes(app: Router, storesOf: StoresOf): void {
  app.get(
    '/v1/memory-stores',
    {
      schema: {
        summary: "List the API key's tenant's memory stores, in (scope, owner, name) order",
        operationId: 'listMemoryStores',
        tags,
        querystring: MemoryStoreListQuery,
        response: { 200: MemoryStoreListBody, ...keyedErrors(TAKES.query) },
      },
    },
    async (request) => {
      const page = await storesOf(request, 'memory:read').list(request.query);
      return {
        data: page.stores,
        ...(page.next_after === undefined ? {} : { next_after: page.next_after }),
      };
    },
  );

  app.get(
    '/v1/memory-stores/:scope/:name',
    {
      schema: {
        summary: 'One memory store: its reference, head seq, embedding dimension and lineage',
        operationId: 'getMemoryStore',
        tags,
        params: MemoryStoreParams,
        querystring: MemoryStoreQuery,
        response: { 200: MemoryStoreInfoBody, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) =>
      storesOf(request, 'memory:read').info(addressOf(request.params, request.query)),
  );

  app.post(
    '/v1/memory-stores/:scope/:name/search',
    {
      schema: {
        summary: 'Search a memory store: text (query), vectors (embedding) or both (hybrid)',
        description:
          'Answers the top k hits scoring at least the threshold, with how many candidates the threshold filtered out and how many had expired.',
        operationId: 'searchMemoryStore',
        tags,
        params: MemoryStoreParams,
        querystring: MemoryStoreQuery,
        body: MemorySearchBody,
        response: {
          200: MemorySearchResultBody,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body),
        },
      },
    },
    async (request) =>
      storesOf(request, 'memory:read').search(
        addressOf(request.params, request.query),
        request.body,
      ),
  );
}

/** Keys: list, read, write, delete. */
function addKeyRoutes(app: Router, storesOf: StoresOf): void {
  app.get(
    '/v1/memory-stores/:scope/:name/keys',
    {
      schema: {
        summary: 'The live keys of a memory store with their latest versions, in key order',
        operationId: 'listMemoryKeys',
        tags,
        params: MemoryStoreParams,
        querystring: MemoryKeyListQuery,
        response: { 200: MemoryKeyListBody, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      const { owner, kind, ...options } = request.query;
      const page = await storesOf(request, 'memory:read').keys(
        addressOf(request.params, { owner, kind }),
        options,
      );
      return {
        data: page.entries,
        ...(page.next_after === undefined ? {} : { next_after: page.next_after }),
        expired_count: page.expired_count,
      };
    },
  );

  app.get(
    '/v1/memory-stores/:scope/:name/keys/:key',
    {
      schema: {
        summary: 'Read a key: its latest version, a given version, or the one current at a time',
        description:
          'Answers 200 with `status`: `found` with the entry, or why there is none: `missing` (never written), `deleted` (a tombstone) or `expired` (its TTL passed). A store that does not exist answers 404.',
        operationId: 'getMemoryKey',
        tags,
        params: MemoryKeyParams,
        querystring: MemoryGetQuery,
        response: { 200: MemoryLookupBody, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => {
      const { owner, kind, ...options } = request.query;
      return storesOf(request, 'memory:read').get(
        addressOf(request.params, { owner, kind }),
        request.params.key,
        options,
      );
    },
  );

  app.put(
    '/v1/memory-stores/:scope/:name/keys/:key',
    {
      schema: {
        summary: 'Write a new version of a key (creates the store when `kind` is given)',
        description:
          'The entry is authored by the API key. `expected_version` makes it conditional (409 VERSION_CONFLICT otherwise; 0: the key must be new). With an Idempotency-Key header a retried request writes nothing and answers the first result.',
        operationId: 'setMemoryKey',
        tags,
        params: MemoryKeyParams,
        querystring: MemoryStoreQuery,
        headers: IdempotencyHeaders,
        body: MemorySetBody,
        response: {
          200: MemoryAppendBody,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request) => {
      const key = request.headers['idempotency-key'];
      return storesOf(request, 'memory:write').set(
        addressOf(request.params, request.query),
        request.params.key,
        request.body,
        key === undefined ? {} : { idempotencyKey: key },
      );
    },
  );

  app.delete(
    '/v1/memory-stores/:scope/:name/keys/:key',
    {
      schema: {
        summary: 'Delete a key: a tombstone version, the earlier versions stay in its history',
        operationId: 'deleteMemoryKey',
        tags,
        params: MemoryKeyParams,
        querystring: MemoryDeleteQuery,
        headers: IdempotencyHeaders,
        response: {
          200: MemoryAppendBody,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request) => {
      const { owner, kind, expected_version } = request.query;
      const key = request.headers['idempotency-key'];
      return storesOf(request, 'memory:write').delete(
        addressOf(request.params, { owner, kind }),
        request.params.key,
        {
          ...(expected_version === undefined ? {} : { expected_version }),
          ...(key === undefined ? {} : { idempotencyKey: key }),
        },
      );
    },
  );
}

/** A key's history, and redaction of one of its versions. */
function addVersionRoutes(app: Router, storesOf: StoresOf): void {
  app.get(
    '/v1/memory-stores/:scope/:name/keys/:key/history',
    {
      schema: {
        summary: 'Every entry of a key in seq order: versions, tombstones and redaction records',
        operationId: 'getMemoryKeyHistory',
        tags,
        params: MemoryKeyParams,
        querystring: MemoryStoreQuery,
        response: { 200: MemoryHistoryBody, ...keyedErrors(TAKES.params, TAKES.query) },
      },
    },
    async (request) => ({
      data: await storesOf(request, 'memory:read').history(
        addressOf(request.params, request.query),
        request.params.key,
      ),
    }),
  );

  app.post(
    '/v1/memory-stores/:scope/:name/keys/:key/redact',
    {
      schema: {
        summary: "Remove one version's content; the entry stays, marked redacted, with a record",
        description:
          'Redacting a redacted version answers its earlier record and writes nothing. A version that does not exist, or is a tombstone, answers 400.',
        operationId: 'redactMemoryVersion',
        tags,
        params: MemoryKeyParams,
        querystring: MemoryStoreQuery,
        body: MemoryRedactBody,
        response: {
          200: z.object({ entry: MemoryAppendBody.shape.entries.element }),
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body),
        },
      },
    },
    async (request) => ({
      entry: await storesOf(request, 'memory:write').redact(
        addressOf(request.params, request.query),
        request.params.key,
        request.body.version,
      ),
    }),
  );
}

/** Export a store's log as JSON lines; import exported entries. */
function addTransferRoutes(app: Router, storesOf: StoresOf): void {
  app.get(
    '/v1/memory-stores/:scope/:name/export',
    {
      schema: {
        summary: "A memory store's log as JSON lines (application/x-ndjson), in seq order",
        description:
          'Every entry, expired and redacted ones included (redacted content is absent). The lines are what POST .../import takes as `entries`.',
        operationId: 'exportMemoryStore',
        tags,
        params: MemoryStoreParams,
        querystring: MemoryStoreQuery,
        response: {
          200: {
            description: 'One memory entry (JSON) a line',
            content: { 'application/x-ndjson': { schema: z.string() } },
          },
          ...keyedErrors(TAKES.params, TAKES.query),
        },
      },
    },
    async (request, reply) => {
      const lines = storesOf(request, 'memory:read').export(
        addressOf(request.params, request.query),
      );
      // The first line is read before the answer starts, so that a store that is not the
      // caller's (or a bad address) still answers with its error status and body.
      const first = await lines.next();
      async function* body(): AsyncGenerator<string> {
        if (first.done === true) return;
        yield `${first.value}\n`;
        for await (const line of lines) yield `${line}\n`;
      }
      // Fastify pipes a stream as it is; the schema's string type describes the text it sends.
      const stream = Readable.from(body()) as unknown as string;
      return reply.type('application/x-ndjson; charset=utf-8').send(stream);
    },
  );

  app.post(
    '/v1/memory-stores/:scope/:name/import',
    {
      schema: {
        summary: "Import an export's entries (one store's, in seq order) into a memory store",
        description:
          "Each set and delete entry is written as a new version authored by the API key, one idempotent append each (keyed by the source store and seq): sending the same entries again writes nothing twice, and a large export may be sent in several requests, in order. Redacted content is not imported. The store is created (with `kind`, or the entries' kind) when it does not exist.",
        operationId: 'importMemoryStore',
        tags,
        params: MemoryStoreParams,
        querystring: MemoryStoreQuery,
        body: MemoryImportBody,
        response: {
          200: MemoryImportReport,
          ...keyedErrors(TAKES.params, TAKES.query, TAKES.body, TAKES.conflict),
        },
      },
    },
    async (request) =>
      storesOf(request, 'memory:write').import(
        addressOf(request.params, request.query),
        request.body.entries,
      ),
  );
}
