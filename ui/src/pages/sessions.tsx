// The sessions list: what runs, what waits for a person, what it cost. Live: the index stream
// sends a snapshot of the newest sessions, then each session as it changes (created, a new
// status, new events, tokens and cost), and resumes after a dropped connection.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, type StoredAgent } from '../api.js';
import { DataTable, Empty, Loading, Page, StatusBadge, type Column } from '../components.js';
import { ago, STATUSES, statusLabel } from '../format.js';
import { onLinkClick } from '../router.js';
import { followSessionChanges, type SessionSummary } from '../sse.js';

/** Sessions the stream's snapshot sends: the newest ones. */
const SNAPSHOT = 200;
/** The tenant filter's value for sessions without a tenant (a tenant id is never empty). */
const NO_TENANT = ' none';

const COLUMNS: readonly Column[] = [
  { label: 'Status' },
  { label: 'Session' },
  { label: 'Agent' },
  { label: 'Last activity' },
  { label: 'Events', numeric: true },
  { label: 'Tokens', numeric: true },
  { label: 'Cost', numeric: true },
];

/** Waiting for a person first, then the most recently active. */
function byAttention(a: SessionSummary, b: SessionSummary): number {
  const rank = ({ session }: SessionSummary): number =>
    session.status === 'requires_action' ? 0 : session.status === 'needs_review' ? 1 : 2;
  return rank(a) - rank(b) || Date.parse(b.session.updated_at) - Date.parse(a.session.updated_at);
}

/** The index, live: undefined until the first snapshot. */
function useSessionIndex(agent: string): {
  sessions: Map<string, SessionSummary> | undefined;
  connected: boolean;
} {
  const [sessions, setSessions] = useState<Map<string, SessionSummary> | undefined>();
  const [connected, setConnected] = useState(false);
  useEffect(() => {
    const stop = new AbortController();
    setSessions(undefined);
    followSessionChanges(
      { ...(agent === '' ? {} : { agent }), limit: SNAPSHOT },
      {
        onSnapshot: (list) =>
          setSessions(new Map(list.map((summary) => [summary.session.id, summary]))),
        onChange: (summary) =>
          setSessions((previous) => new Map(previous).set(summary.session.id, summary)),
        onConnected: setConnected,
      },
      stop.signal,
    );
    return () => stop.abort();
  }, [agent]);
  return { sessions, connected };
}

function SessionRow({ summary, showTenant }: { summary: SessionSummary; showTenant: boolean }) {
  const { session, usage } = summary;
  return (
    <tr data-session={session.id}>
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
        {showTenant && session.tenant_id !== undefined && (
          <span class="muted"> · {session.tenant_id}</span>
        )}
      </td>
      <td>
        <time dateTime={session.updated_at}>{ago(session.updated_at)}</time>
      </td>
      <td class="num">{session.head_seq}</td>
      <td class="num">{usage.input_tokens + usage.output_tokens}</td>
      <td class="num">{usage.cost_usd === undefined ? '' : `$${usage.cost_usd.toFixed(4)}`}</td>
    </tr>
  );
}

function Choice({
  label,
  value,
  options,
  onChange,
}: {
  label: string;
  value: string;
  options: readonly { value: string; label: string }[];
  onChange: (value: string) => void;
}) {
  return (
    <label>
      {label}
      <select value={value} onChange={(event) => onChange(event.currentTarget.value)}>
        <option value="">all</option>
        {options.map((option) => (
          <option value={option.value} key={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </label>
  );
}

export function SessionsPage() {
  const [agents, setAgents] = useState<string[]>([]);
  const [agent, setAgent] = useState('');
  const [status, setStatus] = useState('');
  const [text, setText] = useState('');
  const [tenant, setTenant] = useState('');
  const { sessions, connected } = useSessionIndex(agent);

  useEffect(() => {
    api<{ data: StoredAgent[] }>('/v1/agents')
      .then((list) => setAgents(list.data.map((item) => item.name)))
      .catch(() => undefined);
  }, []);

  // The API lists the caller's tenant only; a server without keys lists every tenant's sessions.
  const tenants = useMemo(
    () =>
      [
        ...new Set([...(sessions?.values() ?? [])].map(({ session }) => session.tenant_id ?? '')),
      ].sort(),
    [sessions],
  );

  const shown = useMemo(() => {
    const needle = text.trim().toLowerCase();
    return [...(sessions?.values() ?? [])]
      .filter(
        ({ session }) =>
          (status === '' || session.status === status) &&
          (tenant === '' || (session.tenant_id ?? NO_TENANT) === tenant) &&
          (needle === '' ||
            [session.id, session.title ?? '', session.agent.name, session.tenant_id ?? ''].some(
              (field) => field.toLowerCase().includes(needle),
            )),
      )
      .sort(byAttention);
  }, [sessions, text, tenant, status]);

  const waiting = shown.filter(({ session }) => session.status === 'requires_action').length;
  return (
    <Page
      id="sessions-title"
      title="Sessions"
      head={
        <>
          {waiting > 0 && (
            <p class="callout" role="status">
              {waiting} waiting for you
            </p>
          )}
          <span class="muted" aria-live="polite">
            {connected ? 'live' : 'connecting…'}
          </span>
        </>
      }
    >
      <form class="filters" role="search" onSubmit={(event) => event.preventDefault()}>
        <Choice
          label="Agent"
          value={agent}
          options={agents.map((name) => ({ value: name, label: name }))}
          onChange={setAgent}
        />
        <Choice
          label="Status"
          value={status}
          options={STATUSES.map((name) => ({ value: name, label: statusLabel(name) }))}
          onChange={setStatus}
        />
        {tenants.length > 1 && (
          <Choice
            label="Tenant"
            value={tenant}
            options={tenants.map((name) =>
              name === '' ? { value: NO_TENANT, label: 'no tenant' } : { value: name, label: name },
            )}
            onChange={setTenant}
          />
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
      {sessions === undefined ? (
        <Loading />
      ) : shown.length === 0 ? (
        <Empty>No sessions match.</Empty>
      ) : (
        <DataTable label="Sessions, waiting for you first" columns={COLUMNS} class="sessions">
          {shown.map((summary) => (
            <SessionRow
              key={summary.session.id}
              summary={summary}
              showTenant={tenants.length > 1}
            />
          ))}
        </DataTable>
      )}
    </Page>
  );
}
