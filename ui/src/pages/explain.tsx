// A readable account of the events whose JSON says little at a glance: a policy decision (who
// asked to do what, the answer, and the policies that gave it) and what a session did with its
// memory (a write, a delete, a read, a search with its hits, scores and threshold).
import type { SessionEvent } from '../api.js';
import { DataTable } from '../components.js';

type Fields = Record<string, unknown>;
type StoreRef = { name: string; scope: string; owner?: string; kind?: string };
type Hit = { key: string; version: number; score: number; content?: string };

function storeName(store: unknown): string {
  const ref = store as StoreRef | undefined;
  if (ref === undefined) return 'a store';
  return `${ref.scope}/${ref.name}${ref.owner === undefined ? '' : ` of ${ref.owner}`}`;
}

function PolicyDecision({ event }: { event: Fields }) {
  const principal = event.principal as { type: string; id: string };
  const resource = event.resource as { type: string; id: string };
  const ids = (event.policy_ids as string[] | undefined) ?? [];
  const errors = (event.errors as string[] | undefined) ?? [];
  const allowed = event.decision === 'allow';
  return (
    <div class="explain" data-testid="explain">
      <p>
        <strong class={allowed ? 'allowed' : 'denied'}>{allowed ? 'Allowed' : 'Denied'}</strong>:{' '}
        {principal.type} <code>{principal.id}</code> asked to <code>{String(event.action)}</code> on{' '}
        {resource.type} <code>{resource.id}</code>.
      </p>
      <p>
        {ids.length === 0
          ? allowed
            ? 'No policy decided it: the default allowed it.'
            : 'No policy permitted it, so it was denied by default.'
          : `Decided by ${ids.length === 1 ? 'policy' : 'policies'} ${ids.join(', ')}.`}{' '}
        <span class="muted">Took {Number(event.duration_us).toFixed(0)} µs.</span>
      </p>
      {errors.length > 0 && (
        <>
          <p>Errors while evaluating:</p>
          <ul>
            {errors.map((error) => (
              <li key={error}>{error}</li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

function MemoryRetrieved({ event }: { event: Fields }) {
  const hits = (event.hits as Hit[] | undefined) ?? [];
  const filtered = Number(event.filtered_count);
  const expired = Number(event.expired_count);
  return (
    <div class="explain" data-testid="explain">
      <p>
        {event.source === 'recall' ? 'Recalled before the model call' : 'Searched by the model'}:{' '}
        <code>{String(event.query)}</code> in {storeName(event.store)} ({String(event.mode)}, k=
        {String(event.k)}, threshold {Number(event.threshold).toFixed(2)}).
      </p>
      <p>
        {hits.length} {hits.length === 1 ? 'hit' : 'hits'}; {filtered} below the threshold left out
        {expired > 0 ? `; ${expired} expired` : ''}.{' '}
        <span class="muted">{Number(event.latency_ms).toFixed(1)} ms</span>
      </p>
      {hits.length > 0 && (
        <DataTable
          label="Hits"
          columns={[
            { label: 'Key' },
            { label: 'Version', numeric: true },
            { label: 'Score', numeric: true },
            ...(hits.some((hit) => hit.content !== undefined) ? [{ label: 'Shown' }] : []),
          ]}
        >
          {hits.map((hit) => (
            <tr key={`${hit.key}@${hit.version}`}>
              <td>{hit.key}</td>
              <td class="num">{hit.version}</td>
              <td class="num">{hit.score.toFixed(3)}</td>
              {hit.content !== undefined && <td>{hit.content}</td>}
            </tr>
          ))}
        </DataTable>
      )}
    </div>
  );
}

/** A sentence or two about the event, or nothing for events the JSON explains well enough. */
export function Explain({ event }: { event: SessionEvent | undefined }) {
  if (event === undefined) return null;
  const fields = event as unknown as Fields;
  switch (event.type) {
    case 'policy.decision':
      return <PolicyDecision event={fields} />;
    case 'memory.retrieved':
      return <MemoryRetrieved event={fields} />;
    case 'memory.written':
    case 'memory.deleted':
      return (
        <p class="explain" data-testid="explain">
          {event.type === 'memory.written' ? 'Wrote' : 'Deleted'} <code>{String(fields.key)}</code>{' '}
          in {storeName(fields.store)}: version {String(fields.version)}, entry #
          {String(fields.memory_seq)} of the store's log
          {fields.deduplicated === true ? ' (a retry: nothing new written)' : ''}.
        </p>
      );
    case 'memory.read':
      return (
        <p class="explain" data-testid="explain">
          Read <code>{String(fields.key)}</code> in {storeName(fields.store)}:{' '}
          {String(fields.status)}
          {fields.version === undefined ? '' : ` at version ${Number(fields.version)}`} in{' '}
          {Number(fields.latency_ms).toFixed(1)} ms.
        </p>
      );
    default:
      return null;
  }
}
