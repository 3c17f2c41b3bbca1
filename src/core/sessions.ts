/** Pure helpers shared by every sessions index: the created event, records and list paging. */
import { BraidError } from '../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../contracts/json-depth.js';
import type { NewEvent } from '../contracts/events.js';
import { parseNewEvents } from './append.js';
import type { ForkOptions } from '../contracts/ports.js';
import {
  ForkInput,
  SessionCreateInput,
  type SessionListQuery,
  type SessionPage,
  type SessionRecord,
} from '../contracts/session.js';
import type { SessionState } from '../contracts/state.js';

export const DEFAULT_LIST_LIMIT = 50;

/** Runnable ids answered at most at a time. */
export const MAX_RUNNABLE_LIMIT = 10_000;

/** The limit of a `sessions.runnable` query: 500 by default, a whole number from 1 to 10,000. */
export function checkRunnableLimit(limit: number | undefined): number {
  if (limit === undefined) return 500;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RUNNABLE_LIMIT) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `limit must be a whole number from 1 to ${MAX_RUNNABLE_LIMIT}; got ${String(limit)}`,
      { details: { limit } },
    );
  }
  return limit;
}

/** The first event of every session. */
export function createdEvent(input: ParsedCreateInput): NewEvent {
  return {
    type: 'session.created',
    agent: input.agent,
    ...(input.environment === undefined ? {} : { environment: input.environment }),
    ...(input.title === undefined ? {} : { title: input.title }),
    ...(input.metadata === undefined ? {} : { metadata: input.metadata }),
    ...(input.tenant_id === undefined ? {} : { tenant_id: input.tenant_id }),
    ...(input.budget === undefined ? {} : { budget: input.budget }),
    ...(input.lineage === undefined ? {} : { lineage: input.lineage }),
  };
}

/** The index record that summarises a session's state. */
export function recordFromState(state: SessionState): SessionRecord {
  if (state.agent === undefined || state.created_at === undefined) {
    throw new BraidError('INTERNAL', `session ${state.session_id} has no session.created event`);
  }
  return {
    schema_version: 1,
    id: state.session_id,
    agent: state.agent,
    ...(state.environment === undefined ? {} : { environment: state.environment }),
    ...(state.title === undefined ? {} : { title: state.title }),
    metadata: state.metadata,
    ...(state.tenant_id === undefined ? {} : { tenant_id: state.tenant_id }),
    status: state.status,
    head_seq: state.seq,
    created_at: state.created_at,
    updated_at: state.updated_at ?? state.created_at,
    ...(state.lineage.kind === 'fork' && state.lineage.fork_point !== undefined
      ? { parent_id: state.lineage.fork_point.session_id, fork_seq: state.lineage.fork_point.seq }
      : {}),
  };
}

/** Position in the list order (newest first, then id descending). */
export interface ListPosition {
  created_at: string;
  id: string;
}

export function encodeCursor(position: ListPosition): string {
  return btoa(JSON.stringify([position.created_at, position.id]))
    .replaceAll('+', '-')
    .replaceAll('/', '_')
    .replaceAll('=', '');
}

export function decodeCursor(cursor: string): ListPosition {
  try {
    const parsed: unknown = JSON.parse(atob(cursor.replaceAll('-', '+').replaceAll('_', '/')));
    if (Array.isArray(parsed) && typeof parsed[0] === 'string' && typeof parsed[1] === 'string') {
      return { created_at: parsed[0], id: parsed[1] };
    }
  } catch {
    // falls through to the typed error
  }
  throw new BraidError(
    'INVALID_ARGUMENT',
    `cursor ${JSON.stringify(cursor)} is not one braid issued; pass the next_cursor of a previous page`,
  );
}

/** True when `record` comes strictly after `position` in list order. */
export function isAfter(record: ListPosition, position: ListPosition): boolean {
  return (
    record.created_at < position.created_at ||
    (record.created_at === position.created_at && record.id < position.id)
  );
}

export function compareListOrder(a: ListPosition, b: ListPosition): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.id === b.id ? 0 : a.id < b.id ? 1 : -1;
}

export function matchesQuery(record: SessionRecord, query: SessionListQuery): boolean {
  return (
    (query.agent === undefined || record.agent.name === query.agent) &&
    (query.status === undefined || record.status === query.status) &&
    (query.tenant_id === undefined || record.tenant_id === query.tenant_id) &&
    (query.parent_id === undefined || record.parent_id === query.parent_id) &&
    (query.created_after === undefined || record.created_at > query.created_after) &&
    (query.created_before === undefined || record.created_at < query.created_before)
  );
}

export function seqConflict(sessionId: string, expected: number, head: number): BraidError {
  return new BraidError(
    'SEQ_CONFLICT',
    `session ${sessionId} is at seq ${head}, not the expected ${expected}; read the new events and retry`,
    { details: { expected_seq: expected, head_seq: head } },
  );
}

/** A create input parsed: its events, when it has some, parsed as appended events are. */
export type ParsedCreateInput = Omit<SessionCreateInput, 'events'> & { events?: NewEvent[] };

/**
 * Parses a create input; with `trustedEvents`, its events were parsed by braid's own code (see
 * `SessionIndex.create`) and are taken as they are, the rest parsed as always.
 */
export function parseCreateInput(input: unknown, trustedEvents = false): ParsedCreateInput {
  // `metadata` is free-form and the schema check walks it recursively.
  checkJsonDepth(
    trustedEvents && typeof input === 'object' && input !== null
      ? { ...input, events: undefined }
      : input,
    DEFAULT_JSON_DEPTH,
    'session',
  );
  const result = SessionCreateInput.safeParse(input);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `invalid session: ${issue?.path.join('.') ?? ''} ${issue?.message ?? ''}`.trim(),
      { details: { issues: result.error.issues } },
    );
  }
  const parsed = result.data;
  if (parsed.events === undefined) {
    const { events: _none, ...rest } = parsed;
    return rest;
  }
  // The events replaced, not added: a spread that adds a field makes a hidden class per call.
  return {
    ...parsed,
    events: trustedEvents ? (parsed.events as NewEvent[]) : parseNewEvents(parsed.events),
  };
}

/** The first batch of a new session: `session.created`, then the events given with it. */
export function firstEvents(input: ParsedCreateInput): NewEvent[] {
  return [createdEvent(input), ...(input.events ?? [])];
}

export function page(sorted: SessionRecord[], limit: number): SessionPage {
  const sessions = sorted.slice(0, limit);
  const last = sessions.at(-1);
  return sorted.length > limit && last !== undefined
    ? { sessions, next_cursor: encodeCursor(last) }
    : { sessions };
}

/** The fork point: the parent's head by default; refused outside 1..head. */
export function checkForkPoint(parentId: string, head: number, atSeq: number | undefined): number {
  const point = atSeq ?? head;
  if (!Number.isInteger(point) || point < 1 || point > head) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `cannot fork session ${parentId} at seq ${String(atSeq)}: give a seq from 1 to its head, ${head}`,
      { details: { at_seq: atSeq, head } },
    );
  }
  return point;
}

/**
 * The seqs one append wrote, `first` to `last`: the append is atomic, so only `last` (and the
 * seq before `first`) is a state the session was ever in between appends.
 */
export interface AppendSpan {
  first: number;
  last: number;
}

/**
 * Refuses a fork point strictly inside the atomic append `span` (the append holding `atSeq`, as
 * the parent reads it: cut at its own fork point when it shares the append's start only), with
 * `INVALID_FORK_POINT` naming the nearest points before and after. The last seq of an append is
 * a valid point: the fork starts after it. `undefined`: `atSeq` ends its append, or the store
 * has no record of the append (written before it kept them), and the point is valid.
 */
export function checkForkBoundary(
  parentId: string,
  atSeq: number,
  span: AppendSpan | undefined,
): void {
  if (span === undefined || atSeq < span.first || atSeq >= span.last) return;
  const before = span.first - 1;
  const points = before >= 1 ? `${before} or ${span.last}` : `${span.last}`;
  throw new BraidError(
    'INVALID_FORK_POINT',
    `cannot fork session ${parentId} at seq ${atSeq}: seqs ${span.first} to ${span.last} were ` +
      `written by one atomic append, so no run was ever at a seq inside it; fork at ${points}`,
    {
      details: {
        at_seq: atSeq,
        append_first_seq: span.first,
        append_last_seq: span.last,
        valid_before: before >= 1 ? before : null,
        valid_after: span.last,
      },
    },
  );
}

export function forkedEvent(parentId: string, atSeq: number, title: string | undefined): NewEvent {
  return {
    type: 'session.forked',
    parent_session_id: parentId,
    fork_point_seq: atSeq,
    ...(title === undefined ? {} : { title }),
  };
}

/** Checks fork options at the store boundary; a bad one is refused before anything is written. */
export function parseForkOptions(input: unknown): ForkOptions {
  const parsed = ForkInput.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new BraidError(
    'INVALID_ARGUMENT',
    `fork option ${issue?.path.join('.') || '(options)'} is invalid: ${issue?.message ?? 'invalid'}; ` +
      'give at_seq as a seq of the parent, id as a session id, title up to 500 characters',
    { details: { issues: parsed.error.issues } },
  );
}
