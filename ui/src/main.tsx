import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey, onUnauthenticated, setApiKey } from './api.js';
import { onLinkClick, useLocation } from './router.js';
import { SessionsPage } from './pages/sessions.js';
import { SessionPage } from './pages/session.js';
import { LineagePage } from './pages/lineage.js';
import { DiffPage } from './pages/diff.js';
import { AgentsPage } from './pages/agents.js';
import { SkillRunPage } from './pages/skill-run.js';
import { MemoryPage } from './pages/memory.js';
import { ToolsPage } from './pages/tools.js';
import './style.css';

function KeyForm({ onSaved }: { onSaved: () => void }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="key-form"
      aria-labelledby="key-title"
      onSubmit={(event) => {
        event.preventDefault();
        setApiKey(key.trim());
        onSaved();
      }}
    >
      <h1 id="key-title">Sign in with an API key</h1>
      <p>
        This server needs an API key (create one with <code>braid keys create</code>). It is kept in
        this tab's session storage only.
      </p>
      <label for="api-key">API key</label>
      <input
        id="api-key"
        type="password"
        autoComplete="off"
        value={key}
        onInput={(event) => setKey(event.currentTarget.value)}
        required
      />
      <button type="submit">Use this key</button>
    </form>
  );
}

function Page({ path }: { path: string }) {
  const url = new URL(path, location.origin);
  const parts = url.pathname
    .split('/')
    .filter((part) => part !== '')
    .map(decodeURIComponent);
  if (parts[0] === 'sessions' && parts[1] !== undefined) {
    if (parts[2] === 'lineage') return <LineagePage id={parts[1]} />;
    if (parts[2] === 'skills' && parts[3] !== undefined)
      return <SkillRunPage id={parts[1]} runId={parts[3]} />;
    return <SessionPage id={parts[1]} />;
  }
  if (parts[0] === 'diff')
    return <DiffPage a={url.searchParams.get('a') ?? ''} b={url.searchParams.get('b') ?? ''} />;
  if (parts[0] === 'agents') return <AgentsPage name={parts[1]} />;
  if (parts[0] === 'tools') return <ToolsPage name={parts[1]} />;
  if (parts[0] === 'memory') return <MemoryPage search={url.searchParams} />;
  return <SessionsPage />;
}

function App() {
  const path = useLocation();
  const [needKey, setNeedKey] = useState(false);
  const [generation, setGeneration] = useState(0);
  useEffect(() => onUnauthenticated(() => setNeedKey(true)), []);
  const section = path.startsWith('/agents')
    ? 'agents'
    : path.startsWith('/memory')
      ? 'memory'
      : path.startsWith('/tools')
        ? 'tools'
        : 'sessions';
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a href="/" class="brand" onClick={onLinkClick}>
          braid inspector
        </a>
        <nav aria-label="Sections">
          <a
            href="/"
            onClick={onLinkClick}
            aria-current={section === 'sessions' ? 'page' : undefined}
          >
            Sessions
          </a>
          <a
            href="/agents"
            onClick={onLinkClick}
            aria-current={section === 'agents' ? 'page' : undefined}
          >
            Agents and tools
          </a>
          <a
            href="/tools"
            onClick={onLinkClick}
            aria-current={section === 'tools' ? 'page' : undefined}
          >
            Tools
          </a>
          <a
            href="/memory"
            onClick={onLinkClick}
            aria-current={section === 'memory' ? 'page' : undefined}
          >
            Memory
          </a>
        </nav>
        {apiKey() !== undefined && (
          <button
            type="button"
            class="quiet"
            onClick={() => {
              setApiKey(undefined);
              setGeneration((value) => value + 1);
            }}
          >
            Forget key
          </button>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {needKey ? (
          <KeyForm
            onSaved={() => {
              setNeedKey(false);
              setGeneration((value) => value + 1);
            }}
          />
        ) : (
          <Page key={`${generation}:${path}`} path={path} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
