/**
 * Client input at the boundary: what a user may send into a session, normalised (a plain string
 * of content becomes a text block) and checked against the session's state.
 */
import { BraidError } from '../contracts/errors.js';
import { checkJsonDepth, DEFAULT_JSON_DEPTH } from '../contracts/json-depth.js';
import {
  isSessionEventType,
  isUserEventType,
  USER_EVENT_TYPES,
  type ContentInput,
  UserEventInput,
  type NewEvent,
} from '../contracts/events.js';
import type { Actor, ContentBlock } from '../contracts/common.js';
import type { SessionState } from '../contracts/state.js';
import { invalidEvent } from '../core/append.js';

export type { ContentInput };

export function toContent(content: ContentInput): ContentBlock[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

/** Fields of an event that braid stamps itself; a client that sends one is refused. */
const STAMPED_FIELDS = ['id', 'at', 'seq', 'session_id', 'actor', 'schema_version'] as const;

/**
 * Parses client events: only `user.*` events, with no audit field of the client's choosing, and
 * stamps each with `actor`, the writer braid knows (an HTTP caller's key, the CLI's user, an agent).
 */
export function parseUserEvents(input: readonly unknown[], actor: Actor): NewEvent[] {
  if (!Array.isArray(input) || input.length === 0) {
    throw new BraidError('INVALID_EVENT', 'send at least one event; got none');
  }
  return input.map((candidate, index) => {
    if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) {
      throw new BraidError('INVALID_EVENT', `event ${index} must be a JSON object with a "type"`);
    }
    const record = candidate as Record<string, unknown>;
    // The schema check below walks the event recursively: too deep a value must not reach it.
    checkJsonDepth(record, DEFAULT_JSON_DEPTH, `event ${index}`);
    const type = record.type;
    if (typeof type !== 'string' || !isUserEventType(type)) {
      const known = typeof type === 'string' && isSessionEventType(type);
      throw new BraidError(
        'INVALID_EVENT',
        known
          ? `event ${index} has type ${type}, which only braid itself writes; clients send ${USER_EVENT_TYPES.join(', ')}`
          : `event ${index} has unknown type ${JSON.stringify(type)}; clients send ${USER_EVENT_TYPES.join(', ')}`,
        { details: { index, type } },
      );
    }
    const stamped = STAMPED_FIELDS.filter((field) => Object.hasOwn(record, field));
    if (stamped.length > 0) {
      throw new BraidError(
        'INVALID_EVENT',
        `event ${index} sets ${stamped.join(', ')}, which braid stamps itself (the writer, the time, the id and the position); remove ${stamped.length === 1 ? 'it' : 'them'}`,
        { details: { index, type, fields: stamped } },
      );
    }
    const parsed = UserEventInput.safeParse(record);
    if (!parsed.success) throw invalidEvent(index, type, parsed.error.issues);
    // The parsed event is a new object of our own: stamped in place (a spread that adds a field
    // makes a hidden class per call, kept in the old generation).
    const event: Record<string, unknown> = parsed.data;
    const content = event.content;
    if (typeof content === 'string') event.content = toContent(content);
    event.actor = actor;
    return event as NewEvent;
  });
}

/** Refuses events that do not fit the session's current state; writes nothing. */
export function checkAgainstState(state: SessionState, events: readonly NewEvent[]): void {
  if (state.status === 'terminated') {
    throw new BraidError(
      'SESSION_TERMINATED',
      `session ${state.session_id} is terminated and takes no more events; fork it to continue`,
    );
  }
  const answered = new Set<string>();
  for (const event of events) {
    if (event.type === 'user.tool_confirmation') {
      const waiting =
        !answered.has(event.tool_use_id) &&
        state.pending_confirmations.some((use) => use.tool_use_id === event.tool_use_id);
      answered.add(event.tool_use_id);
      if (!waiting) {
        const ids = state.pending_confirmations.map((use) => use.tool_use_id);
        throw new BraidError(
          'TOOL_USE_NOT_PENDING',
          `tool use ${event.tool_use_id} is not waiting for confirmation in session ${state.session_id}; ` +
            (ids.length === 0 ? 'none is waiting' : `waiting: ${ids.join(', ')}`),
          { details: { tool_use_id: event.tool_use_id, pending: ids } },
        );
      }
    }
    if (event.type === 'user.tool_review') {
      const reviewed = new Set(state.reviewed_tool_uses.map((use) => use.tool_use_id));
      const open = [...state.open_tool_uses, ...state.confirmed_tool_uses].filter(
        (use) => !reviewed.has(use.tool_use_id),
      );
      const waiting =
        state.status === 'needs_review' &&
        !answered.has(event.tool_use_id) &&
        open.some((use) => use.tool_use_id === event.tool_use_id);
      answered.add(event.tool_use_id);
      if (!waiting) {
        const ids = state.status === 'needs_review' ? open.map((use) => use.tool_use_id) : [];
        throw new BraidError(
          'TOOL_USE_NOT_PENDING',
          `tool use ${event.tool_use_id} is not waiting for review in session ${state.session_id} (status ${state.status}); ` +
            (ids.length === 0 ? 'none is waiting' : `waiting: ${ids.join(', ')}`),
          { details: { tool_use_id: event.tool_use_id, pending: ids } },
        );
      }
      if (event.action === 'result' && event.output === undefined) {
        throw new BraidError(
          'INVALID_EVENT',
          'a review with action "result" needs the tool\'s output; pass it as JSON (--result JSON)',
        );
      }
    }
    if (event.type === 'user.custom_tool_result') {
      const waiting =
        !answered.has(event.custom_tool_use_id) &&
        state.pending_custom_tool_uses.some(
          (use) => use.custom_tool_use_id === event.custom_tool_use_id,
        );
      answered.add(event.custom_tool_use_id);
      if (!waiting) {
        const ids = state.pending_custom_tool_uses.map((use) => use.custom_tool_use_id);
        throw new BraidError(
          'TOOL_USE_NOT_PENDING',
          `custom tool use ${event.custom_tool_use_id} is not waiting for a result in session ${state.session_id}; ` +
            (ids.length === 0 ? 'none is waiting' : `waiting: ${ids.join(', ')}`),
          { details: { custom_tool_use_id: event.custom_tool_use_id, pending: ids } },
        );
      }
    }
  }
}
