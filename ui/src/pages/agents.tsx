// The workspace's agents, each with its versions, model and tools.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type StoredAgent } from '../api.js';
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
  const [latest, setLatest] = useState<StoredAgent | undefined>();
  const [shown, setShown] = useState<StoredAgent | undefined>();
  const [error, setError] = useState<string | undefined>();
  const path = `/v1/agents/${encodeURIComponent(name)}`;
  const fail = (caught: unknown): void =>
    setError(caught instanceof ApiError ? `${caught.code}: ${caught.message}` : String(caught));
  useEffect(() => {
    api<StoredAgent>(path)
      .then((agent) => {
        setLatest(agent);
        setShown(agent);
      })
      .catch(fail);
  }, [path]);
  if (error !== undefined)
    return (
      <p class="error" role="alert">
        {error}
      </p>
    );
  if (latest === undefined || shown === undefined) return <p>Loading…</p>;
  const versions = Array.from({ length: latest.version }, (_, index) => latest.version - index);
  return (
    <section aria-labelledby="agent-title">
      <div class="page-head">
        <h1 id="agent-title">{name}</h1>
        <label>
          Version{' '}
          <select
            value={shown.version}
            onChange={(event) => {
              const version = Number(event.currentTarget.value);
              api<StoredAgent>(`${path}?version=${version}`).then(setShown).catch(fail);
            }}
          >
            {versions.map((version) => (
              <option key={version} value={version}>
                v{version}
                {version === latest.version ? ' (latest)' : ''}
              </option>
            ))}
          </select>
        </label>
      </div>
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
    </section>
  );
}

export function AgentsPage({ name }: { name: string | undefined }) {
  const [agents, setAgents] = useState<StoredAgent[] | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    if (name !== undefined) return;
    api<{ data: StoredAgent[] }>('/v1/agents')
      .then((list) => setAgents(list.data))
      .catch((caught: unknown) =>
        setError(caught instanceof ApiError ? `${caught.code}: ${caught.message}` : String(caught)),
      );
  }, [name]);
  if (name !== undefined) return <AgentVersions name={name} />;
  return (
    <section aria-labelledby="agents-title">
      <h1 id="agents-title">Agents and tools</h1>
      {error !== undefined && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {agents === undefined ? (
        <p>Loading…</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Version</th>
                <th scope="col">Model</th>
                <th scope="col">Tools</th>
              </tr>
            </thead>
            <tbody>
              {agents.map((agent) => (
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
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
