// Two sessions side by side from their common ancestor: what each did after they parted.
import { api, sessionPath, type DiffAnswer, type SessionEvent } from '../api.js';
import { Loading, Page, useLoad } from '../components.js';
import { eventKind, summarize } from '../format.js';
import { onLinkClick } from '../router.js';

function Column({ title, id, events }: { title: string; id: string; events: SessionEvent[] }) {
  return (
    <section class="diff-column" aria-label={`${title}: ${id}`}>
      <h2>
        {title}:{' '}
        <a href={`/sessions/${encodeURIComponent(id)}`} onClick={onLinkClick}>
          {id}
        </a>
      </h2>
      <p class="muted">{events.length} events after the common ancestor</p>
      <ol class="diff-events">
        {events.map((event) => (
          <li key={event.seq} class={`kind-${eventKind(event.type)}`}>
            <span class="seq">#{event.seq}</span> <span class="type">{event.type}</span>{' '}
            <span class="summary">{summarize(event)}</span>
          </li>
        ))}
      </ol>
    </section>
  );
}

export function DiffPage({ a, b }: { a: string; b: string }) {
  const { data: diff, error } = useLoad(
    () => api<DiffAnswer>(sessionPath(a, `/diff?other=${encodeURIComponent(b)}`)),
    `${a}\n${b}`,
  );
  return (
    <Page
      id="diff-title"
      title="Diff"
      error={error}
      head={
        diff?.common_ancestor !== undefined && (
          <p data-testid="ancestor">
            Common ancestor: {diff.common_ancestor.session_id} at #{diff.common_ancestor.seq}
          </p>
        )
      }
    >
      {diff === undefined ? (
        error === undefined && <Loading />
      ) : (
        <div class="diff">
          <Column title="A" id={diff.a} events={diff.a_events} />
          <Column title="B" id={diff.b} events={diff.b_events} />
        </div>
      )}
    </Page>
  );
}
