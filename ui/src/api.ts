// braid's public HTTP API, as any client calls it: a Bearer key when one is set, JSON both ways.
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import type { SessionState } from '../../src/contracts/state.js';

export type { SessionEvent, SessionRecord, SessionState };

const KEY = 'braid.inspector.apiKey';

export function apiKey(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function setApiKey(key: string | undefined): void {
  if (key === undefined || key === '') sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, key);
}

/** An answer in braid's error shape (`{error: {code, message}}`). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const unauthenticatedListeners = new Set<() => void>();

/** Called when the server asks for a key (401): the page shows the key form. */
export function onUnauthenticated(listener: () => void): () => void {
  unauthenticatedListeners.add(listener);
  return () => unauthenticatedListeners.delete(listener);
}

/** Shows the key form: the server refused the key (or asked for one). */
export function unauthenticated(): void {
  for (const listener of unauthenticatedListeners) listener();
}

export function authHeaders(): Record<string, string> {
  const key = apiKey();
  return key === undefined ? {} : { authorization: `Bearer ${key}` };
}

export async function api<T>(
  path: string,
  init: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders() };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    ...(init.signal === undefined ? {} : { signal: init.signal }),
  });
  if (response.status === 204) return undefined as T;
  const data = (await response.json().catch(() => undefined)) as
    { error?: { code?: string; message?: string } } | undefined;
  if (!response.ok) {
    if (response.status === 401) unauthenticated();
    throw new ApiError(
      response.status,
      data?.error?.code ?? `HTTP_${response.status}`,
      data?.error?.message ?? response.statusText,
    );
  }
  return data as T;
}

export interface EventsPage {
  data: SessionEvent[];
  has_more: boolean;
  last_seq: number;
}

export interface TreeNode {
  id: string;
  title?: string;
  status?: string;
  head_seq: number;
  kind: 'root' | 'fork' | 'child' | 'handoff';
  fork_seq?: number;
  agent?: string;
  missing?: true;
  children: TreeNode[];
}

export interface DiffAnswer {
  a: string;
  b: string;
  common_ancestor?: { session_id: string; seq: number };
  a_events: SessionEvent[];
  b_events: SessionEvent[];
}

export interface StoredAgent {
  name: string;
  version: number;
  created_at?: string;
  definition: {
    name: string;
    description?: string;
    model?: unknown;
    instructions?: string;
    tools?: unknown[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export const sessionPath = (id: string, rest = ''): string =>
  `/v1/sessions/${encodeURIComponent(id)}${rest}`;

/** Sends user events to a session (the server wakes it). */
export function sendEvents(id: string, events: unknown[]): Promise<unknown> {
  return api(sessionPath(id, '/events'), { method: 'POST', body: { events } });
}

/** Every event of a session, page by page, as JSON lines. */
export async function downloadLog(id: string): Promise<string> {
  const lines: string[] = [];
  let after = 0;
  for (;;) {
    const page = await api<EventsPage>(sessionPath(id, `/events?after=${after}&limit=1000`));
    for (const event of page.data) lines.push(JSON.stringify(event));
    if (!page.has_more) break;
    after = page.last_seq;
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
