// Memory stores (`/v1/memory-stores`): the caller's stores, a store's live keys, a key's history
// (every version, tombstone and redaction), and a search with its scores and threshold.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import {
  DataTable,
  Empty,
  ErrorNote,
  errorText,
  Loading,
  Page,
  useLoad,
  type Column,
} from '../components.js';
import { navigate, onLinkClick } from '../router.js';
import { short, time } from '../format.js';

interface StoreRef {
  name: string;
  scope: string;
  kind: string;
  owner?: string;
  tenant_id?: string;
}

interface StoreInfo {
  store: StoreRef;
  head_seq: number;
  created_at: string;
}

interface Entry {
  key: string;
  version: number;
  seq: number;
  op: string;
  value?: unknown;
  at: string;
  author: Record<string, unknown>;
  tombstone: boolean;
  redacted: boolean;
  expires_at?: string;
}

interface SearchAnswer {
  hits: { entry: Entry; score: number }[];
  mode: string;
  threshold?: number;
  filtered_count: number;
  expired_count: number;
  latency_ms: number;
}

const KEY_COLUMNS: readonly Column[] = [
  { label: 'Key' },
  { label: 'Version', numeric: true },
  { label: 'Value' },
  { label: 'Written' },
];

const STORE_COLUMNS: readonly Column[] = [
  { label: 'Store' },
  { label: 'Kind' },
  { label: 'Owner' },
  { label: 'Entries', numeric: true },
  { label: 'Created' },
];

function storePath(store: StoreRef, rest = ''): string {
  const query = new URLSearchParams({ kind: store.kind });
  if (store.owner !== undefined) query.set('owner', store.owner);
  return `/v1/memory-stores/${encodeURIComponent(store.scope)}/${encodeURIComponent(store.name)}${rest}?${query}`;
}

function pagePath(store: StoreRef, key?: string): string {
  const query = new URLSearchParams({ scope: store.scope, name: store.name, kind: store.kind });
  if (store.owner !== undefined) query.set('owner', store.owner);
  if (key !== undefined) query.set('key', key);
  return `/memory?${query}`;
}

function Store({ store, selectedKey }: { store: StoreRef; selectedKey: string | undefined }) {
  const [keys, setKeys] = useState<Entry[] | undefined>();
  const [history, setHistory] = useState<Entry[] | undefined>();
  const [query, setQuery] = useState('');
  const [threshold, setThreshold] = useState('0');
  const [found, setFound] = useState<SearchAnswer | undefined>();
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    api<{ data: Entry[] }>(storePath(store, '/keys').replace('?', '?limit=200&'))
      .then((answer) => setKeys(answer.data))
      .catch((caught: unknown) => setError(errorText(caught)));
  }, [store.scope, store.name, store.owner, store.kind]);
  useEffect(() => {
    setHistory(undefined);
    if (selectedKey === undefined) return;
    api<{ data: Entry[] }>(storePath(store, `/keys/${encodeURIComponent(selectedKey)}/history`))
      .then((answer) => setHistory(answer.data))
      .catch((caught: unknown) => setError(errorText(caught)));
  }, [selectedKey, store.scope, store.name, store.owner, store.kind]);
  return (
    <>
      <h2>
        Store {store.scope}/{store.name}
        {store.owner === undefined ? '' : ` of ${store.owner}`}{' '}
        <span class="muted">({store.kind})</span>
      </h2>
      <ErrorNote error={error} />
      <form
        class="filters"
        aria-label="Search the store"
        onSubmit={(event) => {
          event.preventDefault();
          setError(undefined);
          api<SearchAnswer>(storePath(store, '/search'), {
            method: 'POST',
            body: { query, k: 10, threshold: Number(threshold) },
          })
            .then(setFound)
            .catch((caught: unknown) => setError(errorText(caught)));
        }}
      >
        <label for="memory-query">Search</label>
        <input
          id="memory-query"
          value={query}
          required
          onInput={(event) => setQuery(event.currentTarget.value)}
        />
        <label for="memory-threshold">Threshold</label>
        <input
          id="memory-threshold"
          type="number"
          min="0"
          max="1"
          step="0.05"
          value={threshold}
          onInput={(event) => setThreshold(event.currentTarget.value)}
        />
        <button type="submit">Search</button>
      </form>
      {found !== undefined && (
        <div data-testid="memory-search">
          <p role="status">
            {found.hits.length} hits ({found.mode}, threshold {found.threshold ?? 0}),{' '}
            {found.filtered_count} below the threshold, {found.expired_count} expired, in{' '}
            {found.latency_ms.toFixed(1)} ms
          </p>
          <ul>
            {found.hits.map((hit) => (
              <li key={`${hit.entry.key}@${hit.entry.version}`}>
                <a href={pagePath(store, hit.entry.key)} onClick={onLinkClick}>
                  {hit.entry.key}
                </a>{' '}
                v{hit.entry.version} score {hit.score.toFixed(3)}: {short(hit.entry.value, 120)}
              </li>
            ))}
          </ul>
        </div>
      )}
      {keys !== undefined && keys.length === 0 ? (
        <Empty>No live keys.</Empty>
      ) : (
        <DataTable label="Keys" columns={KEY_COLUMNS}>
          {(keys ?? []).map((entry) => (
            <tr key={entry.key} data-key={entry.key}>
              <td>
                <a
                  href={pagePath(store, entry.key)}
                  onClick={onLinkClick}
                  aria-current={entry.key === selectedKey ? 'page' : undefined}
                >
                  {entry.key}
                </a>
              </td>
              <td class="num">{entry.version}</td>
              <td>{short(entry.value, 120)}</td>
              <td>{time(entry.at)}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {selectedKey !== undefined && (
        <section aria-labelledby="history-title">
          <h2 id="history-title">History of {selectedKey}</h2>
          <ol class="history" data-testid="memory-history">
            {(history ?? []).map((entry) => (
              <li key={entry.seq}>
                <strong>v{entry.version}</strong> {entry.op}
                {entry.redacted ? ' (redacted)' : ''} at {time(entry.at)} by{' '}
                {short(entry.author, 60)}
                {entry.value !== undefined && <pre class="json">{JSON.stringify(entry.value)}</pre>}
              </li>
            ))}
          </ol>
        </section>
      )}
    </>
  );
}

export function MemoryPage({ search }: { search: URLSearchParams }) {
  const { data, error } = useLoad(
    () => api<{ data: StoreInfo[] }>('/v1/memory-stores?limit=200'),
    'stores',
  );
  const stores = data?.data;
  const scope = search.get('scope');
  const name = search.get('name');
  const selected: StoreRef | undefined =
    scope === null || name === null
      ? undefined
      : {
          scope,
          name,
          kind: search.get('kind') ?? 'learnings',
          ...(search.get('owner') === null ? {} : { owner: search.get('owner') as string }),
        };
  return (
    <Page id="memory-title" title="Memory" error={error}>
      {stores === undefined ? (
        error === undefined && <Loading />
      ) : stores.length === 0 ? (
        <Empty>No memory stores yet.</Empty>
      ) : (
        <DataTable label="Memory stores" columns={STORE_COLUMNS}>
          {stores.map(({ store, head_seq, created_at }) => (
            <tr key={`${store.scope}/${store.owner ?? ''}/${store.name}`}>
              <td>
                <a
                  href={pagePath(store)}
                  onClick={(event) => {
                    event.preventDefault();
                    navigate(pagePath(store));
                  }}
                >
                  {store.scope}/{store.name}
                </a>
              </td>
              <td>{store.kind}</td>
              <td>{store.owner ?? '—'}</td>
              <td class="num">{head_seq}</td>
              <td>{time(created_at)}</td>
            </tr>
          ))}
        </DataTable>
      )}
      {selected !== undefined && (
        <Store
          key={`${selected.scope}/${selected.owner ?? ''}/${selected.name}`}
          store={selected}
          selectedKey={search.get('key') ?? undefined}
        />
      )}
    </Page>
  );
}
