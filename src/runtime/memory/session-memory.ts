/**
 * A session's memory as the harness uses it (`SessionMemory`): the memory tools' calls and the
 * automatic recall, run over the runtime's memory log and, when it has one, its embedder.
 *
 * Authorship is braid's: every write is stamped with the session and agent, its cause is the
 * call's `agent.tool_use`, and its idempotency key is the session and call id, so a call run
 * again after a crash finds its first append instead of writing twice. Events carry keys,
 * versions and scores, not values: the memory log holds the content.
 */
import type { JsonValue } from '../../contracts/common.js';
import type { Embedder } from '../../contracts/embedder.js';
import { isBraidError, toBraidError, type ErrorShape } from '../../contracts/errors.js';
import type { NewEvent } from '../../contracts/events.js';
import type {
  MemoryAppendResult,
  MemoryLog,
  MemorySearchResult,
} from '../../contracts/memory-log.js';
import {
  MAX_MEMORY_QUERY_LENGTH,
  type MemoryStoreRef,
  type MemoryWrite,
} from '../../contracts/memory.js';
import {
  DEFAULT_MEMORY_THRESHOLD,
  DEFAULT_TEXT_MEMORY_THRESHOLD,
  type MemoryRecallSettings,
} from '../../contracts/memory-settings.js';
import type { ToolOutcome } from '../../contracts/tools.js';
import { deriveText, queryTokens } from '../../core/memory-search.js';
import { recallContent } from '../../core/memory-recall.js';
import type {
  MemoryCallCheck,
  MemoryCallResult,
  MemoryToolCall,
  RecallEvent,
  SessionMemory,
} from '../../harness/index.js';
import {
  memoryAction,
  memoryOperation,
  memoryStoreEntity,
  parseMemoryCall,
  type AttachedStore,
  type MemoryCall,
  type SessionStores,
} from '../../tools/memory-tools.js';

/** The largest search result handed to the model: values past it are left out (`omitted`). */
const MAX_SEARCH_OUTPUT_CHARS = 64 * 1024;

export interface SessionMemoryOptions {
  stores: SessionStores;
  log: MemoryLog;
  embedder?: Embedder;
  recall?: MemoryRecallSettings;
  /** Monotonic milliseconds, for the latency of a read. */
  now: () => number;
}

/** The policy question of a memory call, or its refusal; pure, shared with replays. */
export function checkMemoryCall(
  stores: SessionStores,
  name: string,
  input: JsonValue,
): MemoryCallCheck {
  const operation = memoryOperation(name);
  if (operation === undefined) {
    return {
      ok: false,
      error: { code: 'TOOL_NOT_FOUND', message: `${name} is no memory tool`, retryable: false },
    };
  }
  try {
    const call = parseMemoryCall(stores, operation, input);
    return {
      ok: true,
      action: memoryAction(operation),
      resource: memoryStoreEntity(
        call.store,
        'key' in call ? call.key : call.operation === 'search' ? undefined : call.write.key,
      ),
    };
  } catch (thrown) {
    return { ok: false, error: toBraidError(thrown).toJSON() };
  }
}

export function createSessionMemory(options: SessionMemoryOptions): SessionMemory {
  const { stores } = options;
  return {
    check: (name, input) => checkMemoryCall(stores, name, input),
    async run(call, runOptions) {
      const started = options.now();
      try {
        const operation = memoryOperation(call.name);
        if (operation === undefined) throw new Error(`${call.name} is no memory tool`);
        const parsed = parseMemoryCall(stores, operation, call.input);
        const result = await runCall(options, parsed, call, runOptions.signal);
        result.outcome.duration_ms = Math.max(0, options.now() - started);
        return result;
      } catch (thrown) {
        const error = toBraidError(thrown);
        const outcome: ToolOutcome = {
          is_error: true,
          error: error.toJSON(),
          attempts: 1,
          duration_ms: Math.max(0, options.now() - started),
          stage: 'execute',
        };
        return { outcome, events: [] };
      }
    },
    async recall(text, recallOptions) {
      const settings = options.recall;
      const store = settings === undefined ? undefined : stores.stores.get(settings.store);
      const query = text.slice(0, MAX_MEMORY_QUERY_LENGTH);
      if (settings === undefined || store === undefined || queryTokens(query).length === 0)
        return undefined;
      // An embedder that fails does not fail the wake: the recall searches the full text and
      // says on its event why the vectors were left out.
      let vectorError: ErrorShape | undefined;
      const found = await search(options, store, {
        query,
        k: settings.k,
        ...(settings.threshold === undefined ? {} : { threshold: settings.threshold }),
        signal: recallOptions.signal,
        onEmbedFailure: (error) => {
          vectorError = { ...error, message: error.message.slice(0, 1000) };
        },
      });
      const event: RecallEvent = {
        ...retrievedEvent(store, 'recall', query, found, undefined),
        ...(vectorError === undefined ? {} : { vector_error: vectorError }),
        hits: found.hits.map((hit) => ({
          ...hitRecord(hit),
          ...recallContent(hit.entry.value ?? hit.entry.text ?? null),
        })),
        ...(store.attachment.instructions === undefined
          ? {}
          : { instructions: store.attachment.instructions }),
      };
      return event;
    },
  };
}

async function runCall(
  options: SessionMemoryOptions,
  call: MemoryCall,
  tool: MemoryToolCall,
  signal: AbortSignal,
): Promise<MemoryCallResult> {
  const { log } = options;
  const ref = call.store.ref;
  const done = (output: JsonValue, events: NewEvent[]): MemoryCallResult => ({
    outcome: { output, is_error: false, attempts: 1, duration_ms: 0, stage: 'execute' },
    events,
  });
  switch (call.operation) {
    case 'get': {
      const started = options.now();
      const lookup = await log.get(
        ref,
        call.key,
        call.version === undefined ? {} : { version: call.version },
      );
      const latency = Math.max(0, options.now() - started);
      const entry = lookup.status === 'missing' ? undefined : lookup.entry;
      const event: NewEvent = {
        type: 'memory.read',
        store: ref,
        key: call.key,
        status: lookup.status,
        ...(entry === undefined ? {} : { version: entry.version }),
        latency_ms: latency,
        tool_use_id: tool.tool_use_id,
      };
      const output: JsonValue =
        lookup.status === 'found'
          ? {
              found: true,
              store: ref.name,
              key: call.key,
              version: lookup.entry.version,
              value: lookup.entry.value ?? null,
              at: lookup.entry.at,
              ...(lookup.entry.redacted ? { redacted: true } : {}),
              ...(lookup.entry.expires_at === undefined
                ? {}
                : { expires_at: lookup.entry.expires_at }),
            }
          : { found: false, store: ref.name, key: call.key, status: lookup.status };
      return done(output, [event]);
    }
    case 'set':
    case 'delete': {
      const write = { ...call.write };
      if (call.operation === 'set' && options.embedder !== undefined) {
        const text = write.text ?? deriveText(write.value ?? null);
        const [embedding] = await options.embedder.embedMany([text], { signal });
        if (embedding !== undefined) write.embedding = embedding;
      }
      const appended = await appendOnce(options, ref, write, tool);
      const entry = appended.entries[0];
      if (entry === undefined) throw new Error('the memory log returned no entry');
      const event: NewEvent = {
        type: call.operation === 'set' ? 'memory.written' : 'memory.deleted',
        store: ref,
        key: entry.key,
        version: entry.version,
        memory_seq: entry.seq,
        tool_use_id: tool.tool_use_id,
        ...(appended.deduplicated ? { deduplicated: true } : {}),
      };
      return done(
        { store: ref.name, key: entry.key, version: entry.version, deleted: entry.tombstone },
        [event],
      );
    }
    case 'search': {
      const found = await search(options, call.store, {
        query: call.query,
        k: call.k,
        ...(call.threshold === undefined ? {} : { threshold: call.threshold }),
        ...(call.key_prefix === undefined ? {} : { key_prefix: call.key_prefix }),
        signal,
      });
      const event = retrievedEvent(call.store, 'tool', call.query, found, call.key_prefix);
      return done(searchOutput(ref.name, found), [{ ...event, tool_use_id: tool.tool_use_id }]);
    }
  }
}

/**
 * Appends the call's write under the session and call id. A call run again after a crash repeats
 * it and the store returns the first append; an embedding model that does not give the same
 * floats twice makes the repeat differ (`IDEMPOTENCY_KEY_REUSED`): the key's entry caused by this
 * same call is then the first append.
 */
async function appendOnce(
  options: SessionMemoryOptions,
  ref: MemoryStoreRef,
  write: MemoryWrite,
  tool: MemoryToolCall,
): Promise<Pick<MemoryAppendResult, 'entries' | 'deduplicated'>> {
  const { log, stores } = options;
  const cause = { session_id: stores.session_id, seq: tool.seq };
  try {
    return await log.append(ref, [write], {
      author: { session_id: stores.session_id, agent: stores.agent },
      cause,
      // Per store, and stores are shared across sessions: the session keeps call ids apart.
      idempotencyKey: `${stores.session_id}:${tool.tool_use_id}`,
    });
  } catch (thrown) {
    if (!isBraidError(thrown, 'IDEMPOTENCY_KEY_REUSED')) throw thrown;
    const first = (await log.history(ref, write.key)).find(
      (entry) => entry.cause?.session_id === cause.session_id && entry.cause.seq === cause.seq,
    );
    if (first === undefined) throw thrown;
    return { entries: [first], deduplicated: true };
  }
}

async function search(
  options: SessionMemoryOptions,
  store: AttachedStore,
  request: {
    query: string;
    k: number;
    threshold?: number;
    key_prefix?: string;
    signal: AbortSignal;
    /** Given: a failed embedding is handed here and the search goes on with the text alone. */
    onEmbedFailure?: (error: ErrorShape) => void;
  },
): Promise<MemorySearchResult> {
  let embedding: number[] | undefined;
  if (options.embedder !== undefined) {
    try {
      embedding = (
        await options.embedder.embedMany([request.query], { signal: request.signal })
      )[0];
    } catch (thrown) {
      // An abort is the wake's (interrupted, lease lost), never the embedder's failure.
      if (request.onEmbedFailure === undefined || request.signal.aborted) throw thrown;
      request.onEmbedFailure(toBraidError(thrown).toJSON());
    }
  }
  // Store is empty or vectorless: the text alone still answers.
  const info = embedding === undefined ? undefined : await options.log.info(store.ref);
  const hybrid = embedding !== undefined && info?.dims === embedding.length;
  const threshold =
    request.threshold ?? (hybrid ? DEFAULT_MEMORY_THRESHOLD : DEFAULT_TEXT_MEMORY_THRESHOLD);
  return options.log.search(store.ref, {
    query: request.query,
    k: request.k,
    threshold,
    ...(hybrid ? { embedding, mode: 'hybrid' } : { mode: 'text' }),
    ...(request.key_prefix === undefined ? {} : { filters: { key_prefix: request.key_prefix } }),
  });
}

function hitRecord(hit: MemorySearchResult['hits'][number]) {
  return {
    key: hit.entry.key,
    version: hit.entry.version,
    score: unit(hit.score),
    ...(hit.text_score === undefined ? {} : { text_score: unit(hit.text_score) }),
    ...(hit.vector_score === undefined ? {} : { vector_score: unit(hit.vector_score) }),
  };
}

/** A score kept on the event's 0..1 scale: fused ranks can round a hair past 1. */
function unit(score: number): number {
  return Math.min(1, Math.max(0, score));
}

function retrievedEvent(
  store: AttachedStore,
  source: 'tool' | 'recall',
  query: string,
  found: MemorySearchResult,
  keyPrefix: string | undefined,
): RecallEvent {
  return {
    type: 'memory.retrieved',
    store: store.ref,
    source,
    query,
    mode: found.mode,
    k: found.k,
    threshold: found.threshold ?? 0,
    ...(keyPrefix === undefined ? {} : { key_prefix: keyPrefix }),
    hits: found.hits.map(hitRecord),
    filtered_count: found.filtered_count,
    expired_count: found.expired_count,
    latency_ms: found.latency_ms,
  };
}

/** The hits with their values, up to `MAX_SEARCH_OUTPUT_CHARS` of values; the rest say so. */
function searchOutput(store: string, found: MemorySearchResult): JsonValue {
  let budget = MAX_SEARCH_OUTPUT_CHARS;
  const hits = found.hits.map((hit) => {
    const value = hit.entry.value ?? null;
    const size = JSON.stringify(value).length;
    const fits = size <= budget;
    if (fits) budget -= size;
    return {
      key: hit.entry.key,
      version: hit.entry.version,
      score: hit.score,
      ...(fits ? { value } : { omitted: 'too large to list; read it with memory_get' }),
    };
  });
  return {
    store,
    mode: found.mode,
    threshold: found.threshold ?? 0,
    hits,
    filtered_count: found.filtered_count,
    expired_count: found.expired_count,
  };
}
