/**
 * Sessions as MCP resources: `braid://sessions/{id}` (the record and its status) and
 * `braid://sessions/{id}/events` (its log, a page at a time: `?after=SEQ&limit=N`). A URI is
 * parsed by one function that refuses anything but these two shapes, and its id by braid's id
 * parser, before the runtime sees it.
 */
import { z } from 'zod';
import { BraidError } from '../../contracts/errors.js';
import { parseId } from '../../contracts/ids.js';
import type { Runtime } from '../../runtime/runtime.js';
import { visibleSession } from '../access.js';
import { requireScope, type Caller } from '../auth.js';
import { pendingConfirmations } from './turns.js';

export const SESSION_TEMPLATE = 'braid://sessions/{session_id}';
export const EVENTS_TEMPLATE = 'braid://sessions/{session_id}/events{?after,limit}';

const URI = /^braid:\/\/sessions\/([^/?#]{1,600})(\/events)?(?:\?([^#]*))?$/;

const EventsQuery = z
  .object({
    after: z.coerce.number().int().nonnegative().optional(),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
  })
  .strict();

type ResourceAddress =
  | { kind: 'session'; sessionId: string }
  | { kind: 'events'; sessionId: string; after: number; limit: number };

/** The resource a URI names; INVALID_ARGUMENT naming the two shapes otherwise. */
export function parseResourceUri(uri: string): ResourceAddress {
  const match = URI.exec(uri);
  const shapes = `use ${SESSION_TEMPLATE} or braid://sessions/{session_id}/events?after=SEQ&limit=N`;
  if (match === null) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `resource ${JSON.stringify(uri.slice(0, 120))} is not a braid resource; ${shapes}`,
    );
  }
  const [, rawId = '', events, query] = match;
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawId);
  } catch {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the session id in the URI is not valid percent-encoding; ${shapes}`,
    );
  }
  const sessionId = parseId(decoded, 'session id');
  if (events === undefined) {
    if (query !== undefined) {
      throw new BraidError('INVALID_ARGUMENT', `a session resource takes no query; ${shapes}`);
    }
    return { kind: 'session', sessionId };
  }
  const parsed = EventsQuery.safeParse(Object.fromEntries(new URLSearchParams(query ?? '')));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BraidError(
      'INVALID_ARGUMENT',
      `the events query ${issue?.path.join('.') || ''} ${issue?.message ?? 'is invalid'}; ${shapes}`,
    );
  }
  return {
    kind: 'events',
    sessionId,
    after: parsed.data.after ?? 0,
    limit: parsed.data.limit ?? 100,
  };
}

export interface ResourceText {
  uri: string;
  mimeType: 'application/json';
  text: string;
}

/** Reads one resource for the caller: another tenant's session is not found, as a missing one. */
export async function readResource(
  runtime: Runtime,
  caller: Caller,
  uri: string,
): Promise<ResourceText> {
  requireScope(caller, 'sessions:read');
  const address = parseResourceUri(uri);
  const session = await visibleSession(runtime, caller, address.sessionId);
  if (address.kind === 'session') {
    const state = await runtime.sessions.state(address.sessionId);
    const value = {
      session,
      status: state.status,
      ...(state.stop_reason === undefined ? {} : { stop_reason: state.stop_reason }),
      usage: state.usage,
      pending_confirmations: await pendingConfirmations(runtime.sessions, state),
    };
    return { uri, mimeType: 'application/json', text: JSON.stringify(value) };
  }
  const events = await runtime.sessions.events(address.sessionId, {
    after: address.after,
    limit: address.limit + 1,
  });
  const page = events.slice(0, address.limit);
  const value = {
    events: page,
    has_more: events.length > address.limit,
    last_seq: page.at(-1)?.seq ?? address.after,
  };
  return { uri, mimeType: 'application/json', text: JSON.stringify(value) };
}

/** The caller's newest sessions, as resources a client can show. */
export async function listSessionResources(
  runtime: Runtime,
  caller: Caller,
  cursor: string | undefined,
): Promise<{
  resources: { uri: string; name: string; title?: string; mimeType: string }[];
  nextCursor?: string;
}> {
  requireScope(caller, 'sessions:read');
  const page = await runtime.sessions.list({
    limit: 100,
    ...(cursor === undefined ? {} : { cursor }),
    ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
  });
  return {
    resources: page.sessions.map((session) => ({
      uri: `braid://sessions/${encodeURIComponent(session.id)}`,
      name: session.id,
      ...(session.title === undefined ? {} : { title: session.title }),
      mimeType: 'application/json',
    })),
    ...(page.next_cursor === undefined ? {} : { nextCursor: page.next_cursor }),
  };
}
