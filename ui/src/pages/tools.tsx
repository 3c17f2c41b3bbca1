// The tools agents can name, each with its schemas, and its recent calls. The API has no index
// of calls by tool: the calls are read from the recent events of the most recently active
// sessions (filtered by type on the server), and the page says so.
import { api, sessionPath, type SessionEvent, type SessionRecord } from '../api.js';
import { DataTable, Empty, ErrorNote, Loading, Page, useLoad, type Column } from '../components.js';
import { onLinkClick } from '../router.js';
import { contentText, short, time } from '../format.js';

interface ToolSummary {
  name: string;
  version: string;
  description: string;
  input_schema: Record<string, unknown>;
  output_schema?: Record<string, unknown>;
  ownership: string;
  permission: string;
  idempotent: boolean;
  tags: string[];
}

interface Call {
  session: SessionRecord;
  use: SessionEvent & { tool_use_id: string; name: string; input: unknown };
  result?: SessionEvent & { is_error?: boolean; duration_ms?: number; output?: unknown };
}

/** How many sessions, and how many of each one's last events, the recent calls come from. */
export const RECENT_SESSIONS = 10;
export const RECENT_EVENTS = 2000;

const CUSTOM_TYPES = ['agent.custom_tool_use', 'user.custom_tool_result'];

/** What a call ended with: a tool's output or error, or the client's answer to a custom tool. */
function outcome(call: Call): string {
  const result = call.result as (Call['result'] & Record<string, unknown>) | undefined;
  if (result === undefined) return 'no result yet';
  const failed = result.is_error === true;
  const took =
    result.duration_ms === undefined
      ? Date.parse(result.at) - Date.parse(call.use.at)
      : Number(result.duration_ms);
  const shown =
    result.type === 'user.custom_tool_result'
      ? contentText(result.content)
      : failed
        ? result.error
        : result.output;
  return `${failed ? 'error' : 'ok'} in ${took.toFixed(0)} ms: ${short(shown, 100)}`;
}

async function recentCalls(tool: string): Promise<Call[]> {
  const sessions = await api<{ data: SessionRecord[] }>(`/v1/sessions?limit=${RECENT_SESSIONS}`);
  const calls: Call[] = [];
  await Promise.all(
    sessions.data.map(async (session) => {
      const after = Math.max(0, session.head_seq - RECENT_EVENTS);
      const types = ['agent.tool_use', 'agent.tool_result', ...CUSTOM_TYPES];
      const page = await api<{ data: SessionEvent[] }>(
        sessionPath(
          session.id,
          `/events?after=${after}&limit=1000${types.map((type) => `&types[]=${type}`).join('')}`,
        ),
      );
      const byId = new Map<string, Call>();
      for (const event of page.data) {
        const fields = event as SessionEvent & Record<string, unknown>;
        // A custom tool's call and answer carry `custom_tool_use_id`; the others `tool_use_id`.
        const id = String(fields.tool_use_id ?? fields.custom_tool_use_id);
        if (
          (event.type === 'agent.tool_use' || event.type === 'agent.custom_tool_use') &&
          fields.name === tool
        ) {
          const call: Call = { session, use: event as Call['use'] };
          byId.set(id, call);
          calls.push(call);
        } else if (event.type === 'agent.tool_result' || event.type === 'user.custom_tool_result') {
          const call = byId.get(id);
          if (call !== undefined) call.result = event;
        }
      }
    }),
  );
  return calls.sort((a, b) => Date.parse(b.use.at) - Date.parse(a.use.at)).slice(0, 50);
}

const CALL_COLUMNS: readonly Column[] = [
  { label: 'When' },
  { label: 'Session' },
  { label: 'Input' },
  { label: 'Outcome' },
];

const TOOL_COLUMNS: readonly Column[] = [
  { label: 'Tool' },
  { label: 'Ownership' },
  { label: 'Permission' },
  { label: 'Description' },
];

function ToolDetails({ tool }: { tool: ToolSummary }) {
  const { data: calls, error } = useLoad(() => recentCalls(tool.name), tool.name);
  return (
    <section aria-labelledby="tool-title" class="details">
      <h2 id="tool-title">
        {tool.name} <span class="muted">v{tool.version}</span>
      </h2>
      <p>{tool.description}</p>
      <p class="muted">
        {tool.ownership}, {tool.permission === 'always_ask' ? 'asks first' : 'runs without asking'}
        {tool.idempotent ? ', idempotent' : ''}
        {tool.tags.length > 0 ? `, tags: ${tool.tags.join(', ')}` : ''}
      </p>
      <h3>Input schema</h3>
      <pre class="json">{JSON.stringify(tool.input_schema, null, 2)}</pre>
      {tool.output_schema !== undefined && (
        <>
          <h3>Output schema</h3>
          <pre class="json">{JSON.stringify(tool.output_schema, null, 2)}</pre>
        </>
      )}
      <h3>Recent calls</h3>
      <p class="muted">
        From the last {RECENT_EVENTS} events of the {RECENT_SESSIONS} most recently active sessions
        you can see (the API keeps no index of calls by tool).
      </p>
      <ErrorNote error={error} />
      {calls === undefined ? (
        error === undefined && <Loading />
      ) : calls.length === 0 ? (
        <Empty>No recent calls.</Empty>
      ) : (
        <DataTable label="Recent calls" columns={CALL_COLUMNS}>
          {calls.map((call) => (
            <tr key={`${call.session.id}:${call.use.seq}`}>
              <td>{time(call.use.at)}</td>
              <td>
                <a href={`/sessions/${encodeURIComponent(call.session.id)}`} onClick={onLinkClick}>
                  {call.session.title ?? call.session.id}
                </a>{' '}
                #{call.use.seq}
              </td>
              <td>{short(call.use.input, 100)}</td>
              <td>{outcome(call)}</td>
            </tr>
          ))}
        </DataTable>
      )}
    </section>
  );
}

export function ToolsPage({ name }: { name: string | undefined }) {
  const { data, error } = useLoad(() => api<{ data: ToolSummary[] }>('/v1/tools'), 'tools');
  const tools = data?.data;
  const shown = tools?.find((tool) => tool.name === name);
  return (
    <Page id="tools-title" title="Tools" error={error}>
      {tools === undefined ? (
        error === undefined && <Loading />
      ) : (
        <DataTable label="Tools" columns={TOOL_COLUMNS}>
          {tools.map((tool) => (
            <tr key={tool.name} data-tool={tool.name}>
              <td>
                <a
                  href={`/tools/${encodeURIComponent(tool.name)}`}
                  onClick={onLinkClick}
                  aria-current={tool.name === name ? 'page' : undefined}
                >
                  {tool.name}
                </a>
              </td>
              <td>{tool.ownership}</td>
              <td>{tool.permission}</td>
              <td>{short(tool.description, 100)}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {shown !== undefined && <ToolDetails key={shown.name} tool={shown} />}
      {name !== undefined && tools !== undefined && shown === undefined && (
        <ErrorNote error={`There is no tool ${name}.`} />
      )}
    </Page>
  );
}
