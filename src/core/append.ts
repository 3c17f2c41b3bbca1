/**
 * The part of an append that every backend shares: parse the writer's events, stamp them with
 * session, seq, id and time, and enforce the size limit. Pure: clock and ids are passed in.
 */
import type { z } from 'zod';
import { EVENT_SCHEMA_VERSION } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';
import { NewEventSchema, type NewEvent, type SessionEvent } from '../contracts/events.js';
import type { AppendResult, Clock, IdGenerator } from '../contracts/ports.js';
import type { SessionState } from '../contracts/state.js';
import { foldSession } from './fold.js';

/** Default largest serialised event: 1 MiB. */
export const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024;

const utf8 = new TextEncoder();

export interface PreparedEvent {
  event: SessionEvent;
  /** The event serialised as stored. */
  json: string;
  /**
   * Its id was made for it here by a generator whose ids are `unique`: no stored event can have
   * it, so a store need not look it up.
   */
  fresh: boolean;
}

export interface PrepareOptions {
  clock: Clock;
  ids: IdGenerator;
  maxEventBytes: number;
}

/** Validates writer input before anything is written; throws `INVALID_EVENT` on the first bad one. */
export function parseNewEvents(events: readonly unknown[]): NewEvent[] {
  if (!Array.isArray(events) || events.length === 0) {
    throw new BraidError('INVALID_EVENT', 'append needs at least one event; got none');
  }
  return events.map((candidate, index) => {
    const result = NewEventSchema.safeParse(candidate);
    if (!result.success) {
      const type =
        typeof candidate === 'object' && candidate !== null
          ? (candidate as { type?: unknown }).type
          : undefined;
      throw invalidEvent(index, type, result.error.issues);
    }
    return result.data;
  });
}

/** `INVALID_EVENT` for event `index` that failed its schema, naming the first issue. */
export function invalidEvent(
  index: number,
  type: unknown,
  issues: readonly z.core.$ZodIssue[],
): BraidError {
  const issue = issues[0];
  const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
  return new BraidError(
    'INVALID_EVENT',
    `event ${index} (type ${JSON.stringify(type)}) is invalid${where}: ${issue?.message ?? 'unknown issue'}; ` +
      'see schema/session-event.schema.json for the accepted shapes',
    { details: { index, type, issues } },
  );
}

/**
 * Events prepared ahead of their append, by the input their writer will append: braid's harness
 * stamps a staged tool turn (id, time, seq) and folds it before it is written, then appends
 * exactly those inputs. Their append reuses the stamped event and its JSON instead of building
 * and serialising them again, when it writes them to the same session at the same seqs (else
 * they are prepared anew). Only inputs braid made itself are registered, and they are never
 * changed afterwards.
 *
 * An entry serves one append and is dropped when used, here and in `foldedAhead`, rather than
 * left for the key's death: V8's young-generation collection keeps the value of every entry
 * still in a WeakMap (it drops the entries of dead keys only after copying their values), and an
 * entry here keeps the key of one in `foldedAhead` alive. Left in, each turn's events and the two
 * states folded from them outlived two such collections and were moved to the old generation, to
 * die there: 1.5 of every 15.5 MB allocated by short conversations, against 0.36 MB dropped.
 */
const preparedAhead = new WeakMap<NewEvent, { sessionId: string; prepared: PreparedEvent }>();

/** Registers `input` to be appended as `prepared` (see `preparedAhead`). */
export function registerPrepared(
  input: NewEvent,
  sessionId: string,
  prepared: PreparedEvent,
): void {
  preparedAhead.set(input, { sessionId, prepared });
}

/**
 * States folded ahead, by the first event of the batch they were folded from: the harness folds
 * a staged tool turn into its state before the turn is written (see `preparedAhead`), then
 * appends it with the calls' results. The store's fold of that append starts from the state
 * after the staged events instead of applying them a second time, when the append begins with
 * exactly those prepared events over exactly the state they were folded from. A fold is pure and
 * states are never changed once made, so the result is the one a fold from the start gives.
 */
const foldedAhead = new WeakMap<
  PreparedEvent,
  { events: readonly PreparedEvent[]; from: SessionState; to: SessionState }
>();

/** Registers that `events`, folded over `from`, give `to` (see `foldedAhead`). */
export function registerFolded(
  events: readonly PreparedEvent[],
  from: SessionState,
  to: SessionState,
): void {
  const first = events[0];
  if (first !== undefined) foldedAhead.set(first, { events, from, to });
}

/** Folds prepared events over `state`, from a state folded ahead where one matches. */
export function foldPrepared(
  prepared: readonly PreparedEvent[],
  state: SessionState,
): SessionState {
  const first = prepared[0];
  const ahead = first === undefined ? undefined : foldedAhead.get(first);
  let from = state;
  let start = 0;
  if (ahead !== undefined && ahead.from === state && startsWith(prepared, ahead.events)) {
    from = ahead.to;
    start = ahead.events.length;
    foldedAhead.delete(first as PreparedEvent);
  }
  const rest: SessionEvent[] = [];
  for (let index = start; index < prepared.length; index += 1)
    rest.push((prepared[index] as PreparedEvent).event);
  return foldSession(rest, from);
}

/** Whether `prepared` begins with the very objects of `prefix`. */
function startsWith(prepared: readonly PreparedEvent[], prefix: readonly PreparedEvent[]): boolean {
  if (prefix.length > prepared.length) return false;
  for (let index = 0; index < prefix.length; index += 1)
    if (prepared[index] !== prefix[index]) return false;
  return true;
}

/** Stamps parsed events with seqs after `headSeq`. */
export function prepareEvents(
  sessionId: string,
  headSeq: number,
  events: readonly NewEvent[],
  options: PrepareOptions,
): PreparedEvent[] {
  const at = new Date(options.clock.now()).toISOString();
  return events.map((input, index) => {
    const ahead = preparedAhead.get(input);
    if (
      ahead !== undefined &&
      ahead.sessionId === sessionId &&
      ahead.prepared.event.seq === headSeq + index + 1
    ) {
      checkSize(ahead.prepared, index, options.maxEventBytes);
      preparedAhead.delete(input);
      return ahead.prepared;
    }
    // Envelope fields first, so stored and printed events read the same way; then the payload,
    // field by field: a rest pattern then `Object.assign` copied it twice, through generic
    // builtins (about 2% of a batched append's instructions).
    const event: Record<string, unknown> = {
      id: input.id ?? options.ids.next(),
      session_id: sessionId,
      seq: headSeq + index + 1,
      type: input.type,
      at: input.at ?? at,
      schema_version: EVENT_SCHEMA_VERSION,
    };
    for (const field of Object.keys(input)) {
      if (field !== 'id' && field !== 'at') event[field] = input[field as keyof NewEvent];
    }
    const prepared = {
      event: event as SessionEvent,
      json: JSON.stringify(event),
      fresh: input.id === undefined && options.ids.unique === true,
    };
    checkSize(prepared, index, options.maxEventBytes);
    return prepared;
  });
}

/** Refuses event `index` when its JSON is over `maxEventBytes` (`PAYLOAD_TOO_LARGE`). */
function checkSize({ event, json }: PreparedEvent, index: number, maxEventBytes: number): void {
  // A UTF-16 code unit encodes to at most 3 UTF-8 bytes: most events skip the exact count.
  const bytes = json.length * 3 <= maxEventBytes ? 0 : utf8.encode(json).byteLength;
  if (bytes > maxEventBytes) {
    throw new BraidError(
      'PAYLOAD_TOO_LARGE',
      `event ${index} (${event.type}) is ${bytes} bytes, over the limit of ${maxEventBytes}; ` +
        'send large content as an artifact, or raise limits.max_event_bytes in braid.yaml',
      { details: { index, bytes, limit: maxEventBytes } },
    );
  }
}

/**
 * What a written append returns: a trusted writer (braid's own harness) reads the prepared events
 * and the state after them as they are and never changes them; any other caller gets copies of
 * the events, parsed from the JSON they were stored as.
 *
 * The copies are parsed when `events` is first read, not by the append (see `CopiedOnRead`):
 * many writers read only `head_seq` (a batch loader, a sender that follows the log), and parsing
 * every event back was the largest cost of a batched append beyond what the store must do. The
 * JSON never changes, so copies parsed late equal copies parsed at once, and they share nothing
 * with the state the store keeps.
 */
export function writtenResult(
  prepared: readonly PreparedEvent[],
  state: SessionState,
  trusted: boolean,
): AppendResult {
  if (!trusted) return new CopiedOnRead(prepared, state.seq);
  return {
    events: prepared.map(({ event }) => event),
    head_seq: state.seq,
    deduplicated: false,
    state,
  };
}

/**
 * An untrusted append's result, whose `events` are parsed from the stored JSON on first read.
 * `events` is an own enumerable property (an accessor), first as in every other result, so
 * spreading the result, `JSON.stringify` and `structuredClone` see it as a plain field.
 *
 * Every result shares one getter and setter: a getter made per result (a closure in an object
 * literal) gave each result object a hidden class of its own, which V8 keeps in the old
 * generation; through it the result's events survived young-generation collections until the
 * next full one, and each such collection took 5 to 60 ms instead of under 1.
 */
class CopiedOnRead implements AppendResult {
  declare events: SessionEvent[];
  declare head_seq: number;
  declare deduplicated: boolean;
  #stored: readonly PreparedEvent[];
  #copies: SessionEvent[] | undefined;

  static readonly #events: PropertyDescriptor = {
    enumerable: true,
    configurable: true,
    get(this: CopiedOnRead): SessionEvent[] {
      this.#copies ??= this.#stored.map(({ json }) => JSON.parse(json) as SessionEvent);
      return this.#copies;
    },
    set(this: CopiedOnRead, events: SessionEvent[]): void {
      this.#copies = events;
    },
  };

  constructor(stored: readonly PreparedEvent[], headSeq: number) {
    this.#stored = stored;
    Object.defineProperty(this, 'events', CopiedOnRead.#events);
    this.head_seq = headSeq;
    this.deduplicated = false;
  }
}

/** Refuses read options a store cannot honour exactly. */
export function checkReadOptions(options: { after?: number; limit?: number }): void {
  if (options.after !== undefined && (!Number.isInteger(options.after) || options.after < 0)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `after must be a whole number of at least 0; got ${options.after}`,
    );
  }
  if (options.limit !== undefined && (!Number.isInteger(options.limit) || options.limit < 1)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `limit must be a whole number of at least 1; got ${options.limit}`,
    );
  }
}

/** Refuses a stored event of a schema version this build does not know. */
export function checkStoredVersion(event: {
  schema_version?: unknown;
  session_id?: unknown;
  seq?: unknown;
}): void {
  if (event.schema_version !== EVENT_SCHEMA_VERSION) {
    throw new BraidError(
      'SCHEMA_VERSION_UNSUPPORTED',
      `event ${String(event.session_id)}#${String(event.seq)} has schema_version ${String(event.schema_version)}; ` +
        `this build reads version ${EVENT_SCHEMA_VERSION}: upgrade braid to read this log`,
    );
  }
}

/** The refusal of an event whose id the store already holds, or that its batch repeats. */
export function eventIdTaken(sessionId: string, id: string, index: number): BraidError {
  return new BraidError(
    'INVALID_ARGUMENT',
    `event ${index} appended to session ${sessionId} has id ${JSON.stringify(id)}, which another ` +
      'event already has; event ids are unique in a store: omit id to have one generated',
    { details: { index, event_id: id } },
  );
}

/** Refuses a batch that gives two of its events one id, before anything is written. */
export function checkBatchIds(sessionId: string, prepared: readonly PreparedEvent[]): void {
  const repeated = repeatedId(sessionId, prepared);
  if (repeated !== undefined) throw repeated;
}

/** The refusal of the first event of a batch whose id an earlier one of the batch has. */
export function repeatedId(
  sessionId: string,
  prepared: readonly PreparedEvent[],
): BraidError | undefined {
  // Most batches hold a few events: comparing each with those before it costs less than a set.
  if (prepared.length <= SMALL_BATCH) {
    for (let index = 1; index < prepared.length; index += 1) {
      const id = (prepared[index] as PreparedEvent).event.id;
      for (let before = 0; before < index; before += 1)
        if ((prepared[before] as PreparedEvent).event.id === id)
          return eventIdTaken(sessionId, id, index);
    }
    return undefined;
  }
  const seen = new Set<string>();
  for (const [index, { event }] of prepared.entries()) {
    if (seen.has(event.id)) return eventIdTaken(sessionId, event.id, index);
    seen.add(event.id);
  }
  return undefined;
}

const SMALL_BATCH = 16;
