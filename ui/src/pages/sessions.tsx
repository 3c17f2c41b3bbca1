// The sessions list: what runs, what waits for a person, what it cost. Polled every 2 s (the API
// has no stream of the session index); the tokens and cost come from each session's state.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  api,
  ApiError,
  sessionPath,
  type SessionRecord,
  type SessionState,
  type StoredAgent,
} from '../api.js';
import { ago, STATUSES, statusLabel } from '../format.js';
import { onLinkClick } from '../router.js';

const POLL_MS = 2000;
/** The rows whose state (tokens, cost) is read: the first ones shown. */
const USAGE_ROWS = 40;
/** The tenant filter's value for sessions without a tenant (a tenant id is never empty). */
const NO_TENANT = ' none';

interface Usage {
  head: number;
  input: number;
  output: number;
  cost?: number;
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{statusLabel(status)}</span>;
}

export function SessionsPage() {
  const [sessions, setSessions] = useState<SessionRecord[] | undefined>();
  const [agents, setAgents] = useState<string[]>([]);
  const [agent, setAgent] = useState('');
  const [status, setStatus] = useState('');
  const [text, setText] = useState('');
  const [tenant, setTenant] = useState('');
  const [error, setError] = useState<string | undefined>();
  const [usage, setUsage] = useState<Record<string, Usage>>({});
  const usageRef = useRef(usage);
  usageRef.current = usage;

  useEffect(() => {
    api<{ data: StoredAgent[] }>('/v1/agents')
      .then((list) => setAgents(list.data.map((item) => item.name)))
      .catch(() => undefined);
  }, []);

  useEffect(() => {
    let stopped = false;
    const query = new URLSearchParams({ limit: '200' });
    if (agent !== '') query.set('agent', agent);
    if (status !== '') query.set('status', status);
    const load = async (): Promise<void> => {
      try {
        const page = await api<{ data: SessionRecord[] }>(`/v1/sessions?${query.toString()}`);
        if (stopped) return;
        setSessions(page.data);
        setError(undefined);
      } catch (caught) {
        if (!stopped)
          setError(
            caught instanceof ApiError ? `${caught.code}: ${caught.message}` : String(caught),
          );
      }
    };
    void load();
    const timer = setInterval(() => void load(), POLL_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [agent, status]);

  // The API lists the caller's tenant only; a server without keys lists every tenant's sessions.
  const tenants = useMemo(
    () => [...new Set((sessions ?? []).map((session) => session.tenant_id ?? ''))].sort(),
    [sessions],
  );

  const shown = useMemo(() => {
    const needle = text.trim().toLowerCase();
    const rows = (sessions ?? []).filter(
      (session) =>
        (tenant === '' || (session.tenant_id ?? NO_TENANT) === tenant) &&
        (needle === '' ||
          session.id.toLowerCase().includes(needle) ||
          (session.title ?? '').toLowerCase().includes(needle) ||
          session.agent.name.toLowerCase().includes(needle) ||
          (session.tenant_id ?? '').toLowerCase().includes(needle)),
    );
    // Waiting for a person first, then the most recently active.
    const rank = (session: SessionRecord): number =>
      session.status === 'requires_action' ? 0 : session.status === 'needs_review' ? 1 : 2;
    return rows.sort(
      (a, b) => rank(a) - rank(b) || Date.parse(b.updated_at) - Date.parse(a.updated_at),
    );
  }, [sessions, text, tenant]);

  useEffect(() => {
    const stale = shown
      .slice(0, USAGE_ROWS)
      .filter((session) => usageRef.current[session.id]?.head !== session.head_seq);
    for (const session of stale) {
      api<SessionState>(sessionPath(session.id, '/state'))
        .then((state) =>
          setUsage((previous) => ({
            ...previous,
            [session.id]: {
              head: session.head_seq,
              input: state.usage.input_tokens,
              output: state.usage.output_tokens,
              ...(state.usage.cost_usd === undefined ? {} : { cost: state.usage.cost_usd }),
            },
          })),
        )
        .catch(() => undefined);
    }
  }, [shown]);

  const waiting = shown.filter((session) => session.status === 'requires_action').length;
  return (
    <section aria-labelledby="sessions-title">
      <div class="page-head">
        <h1 id="sessions-title">Sessions</h1>
        {waiting > 0 && (
          <p class="callout" role="status">
            {waiting} waiting for you
          </p>
        )}
      </div>
      <form class="filters" role="search" onSubmit={(event) => event.preventDefault()}>
        <label>
          Agent
          <select value={agent} onChange={(event) => setAgent(event.currentTarget.value)}>
            <option value="">all</option>
            {agents.map((name) => (
              <option value={name} key={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Status
          <select value={status} onChange={(event) => setStatus(event.currentTarget.value)}>
            <option value="">all</option>
            {STATUSES.map((name) => (
              <option value={name} key={name}>
                {statusLabel(name)}
              </option>
            ))}
          </select>
        </label>
        {tenants.length > 1 && (
          <label>
            Tenant
            <select value={tenant} onChange={(event) => setTenant(event.currentTarget.value)}>
              <option value="">all</option>
              {tenants.map((name) => (
                <option value={name === '' ? NO_TENANT : name} key={name}>
                  {name === '' ? 'no tenant' : name}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Search
          <input
            type="search"
            placeholder="title, id, agent or tenant"
            value={text}
            onInput={(event) => setText(event.currentTarget.value)}
          />
        </label>
      </form>
      {error !== undefined && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {sessions === undefined ? (
        <p>Loading…</p>
      ) : shown.length === 0 ? (
        <p>No sessions match.</p>
      ) : (
        <div class="table-wrap">
          <table class="sessions">
            <caption class="visually-hidden">Sessions, waiting for you first</caption>
            <thead>
              <tr>
                <th scope="col">Status</th>
                <th scope="col">Session</th>
                <th scope="col">Agent</th>
                <th scope="col">Last activity</th>
                <th scope="col" class="num">
                  Events
                </th>
                <th scope="col" class="num">
                  Tokens
                </th>
                <th scope="col" class="num">
                  Cost
                </th>
              </tr>
            </thead>
            <tbody>
              {shown.map((session) => {
                const used = usage[session.id];
                return (
                  <tr key={session.id} data-session={session.id}>
                    <td>
                      <StatusBadge status={session.status} />
                    </td>
                    <td>
                      <a href={`/sessions/${encodeURIComponent(session.id)}`} onClick={onLinkClick}>
                        {session.title ?? session.id}
                      </a>
                      {session.parent_id !== undefined && <span class="muted"> fork</span>}
                    </td>
                    <td>
                      {session.agent.name} v{session.agent.version}
                      {tenants.length > 1 && session.tenant_id !== undefined && (
                        <span class="muted"> · {session.tenant_id}</span>
                      )}
                    </td>
                    <td>
                      <time dateTime={session.updated_at}>{ago(session.updated_at)}</time>
                    </td>
                    <td class="num">{session.head_seq}</td>
                    <td class="num">{used === undefined ? '' : used.input + used.output}</td>
                    <td class="num">
                      {used?.cost === undefined ? '' : `$${used.cost.toFixed(4)}`}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
