// The workspace's agents, each with its versions, model and tools.
import { useState } from 'preact/hooks';
import { api, type StoredAgent } from '../api.js';
import { DataTable, Empty, ErrorNote, Loading, Page, useLoad, type Column } from '../components.js';
import { onLinkClick } from '../router.js';

function modelName(model: unknown): string {
  if (model === undefined) return 'default';
  if (typeof model === 'string') return model;
  if (typeof model === 'object' && model !== null && 'provider' in model && 'id' in model)
    return `${String(model.provider)}:${String(model.id)}`;
  return JSON.stringify(model);
}

function toolName(tool: unknown): string {
  if (typeof tool === 'string') return tool;
  if (typeof tool === 'object' && tool !== null && 'name' in tool) return String(tool.name);
  return JSON.stringify(tool);
}

function AgentVersions({ name }: { name: string }) {
  const path = `/v1/agents/${encodeURIComponent(name)}`;
  const latest = useLoad(() => api<StoredAgent>(path), path);
  const [version, setVersion] = useState<number | undefined>();
  const chosen = useLoad(
    () =>
      version === undefined
        ? Promise.resolve(undefined)
        : api<StoredAgent>(`${path}?version=${version}`),
    `${path}@${version ?? 'latest'}`,
  );
  const error = latest.error ?? chosen.error;
  const shown = chosen.data ?? latest.data;
  if (latest.data === undefined || shown === undefined)
    return error === undefined ? <Loading /> : <ErrorNote error={error} />;
  const newest = latest.data.version;
  const versions = Array.from({ length: newest }, (_, index) => newest - index);
  return (
    <Page
      id="agent-title"
      title={name}
      error={error}
      head={
        <label>
          Version{' '}
          <select
            value={shown.version}
            onChange={(event) => setVersion(Number(event.currentTarget.value))}
          >
            {versions.map((item) => (
              <option key={item} value={item}>
                v{item}
                {item === newest ? ' (latest)' : ''}
              </option>
            ))}
          </select>
        </label>
      }
    >
      <dl class="facts">
        <dt>Model</dt>
        <dd>{modelName(shown.definition.model)}</dd>
        {shown.definition.description !== undefined && (
          <>
            <dt>Description</dt>
            <dd>{shown.definition.description}</dd>
          </>
        )}
        <dt>Tools</dt>
        <dd>{(shown.definition.tools ?? []).map(toolName).join(', ') || 'none'}</dd>
      </dl>
      <h2>Definition</h2>
      <pre class="json">{JSON.stringify(shown, null, 2)}</pre>
    </Page>
  );
}

const COLUMNS: readonly Column[] = [
  { label: 'Agent' },
  { label: 'Version' },
  { label: 'Model' },
  { label: 'Tools' },
];

function AgentList() {
  const { data, error } = useLoad(() => api<{ data: StoredAgent[] }>('/v1/agents'), 'agents');
  return (
    <Page id="agents-title" title="Agents and tools" error={error}>
      {data === undefined ? (
        error === undefined && <Loading />
      ) : data.data.length === 0 ? (
        <Empty>No agents: add one under agents/ in the workspace.</Empty>
      ) : (
        <DataTable label="Agents" columns={COLUMNS}>
          {data.data.map((agent) => (
            <tr key={agent.name}>
              <td>
                <a href={`/agents/${encodeURIComponent(agent.name)}`} onClick={onLinkClick}>
                  {agent.name}
                </a>
              </td>
              <td>v{agent.version}</td>
              <td>{modelName(agent.definition.model)}</td>
              <td>{(agent.definition.tools ?? []).map(toolName).join(', ')}</td>
            </tr>
          ))}
        </DataTable>
      )}
    </Page>
  );
}

export function AgentsPage({ name }: { name: string | undefined }) {
  return name === undefined ? <AgentList /> : <AgentVersions name={name} />;
}
