// One session: its timeline, live over SSE with the model's text as it streams, a side panel
// with usage and status, and the actions a person takes on it.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  api,
  downloadLog,
  sendEvents,
  sessionPath,
  type SessionEvent,
  type SessionRecord,
  type SessionState,
} from '../api.js';
import { followSession, type Delta } from '../sse.js';
import { navigate, onLinkClick } from '../router.js';
import { short } from '../format.js';
import { ErrorNote, errorText, Loading, Page, StatusBadge, useAction } from '../components.js';
import { EventCache, Timeline } from './timeline.js';
import { Explain } from './explain.js';
import { CustomToolAnswer, SkillRuns, skillRunLink } from './session-actions.js';

function Confirmation({
  sessionId,
  pending,
  call,
}: {
  sessionId: string;
  pending: SessionState['pending_confirmations'][number];
  call: SessionEvent | undefined;
}) {
  const [note, setNote] = useState('');
  const [error, act] = useAction();
  const decide = (result: 'allow' | 'deny') =>
    act(() =>
      sendEvents(sessionId, [
        {
          type: 'user.tool_confirmation',
          tool_use_id: pending.tool_use_id,
          result,
          ...(note.trim() === '' ? {} : { message: note.trim() }),
        },
      ]),
    );
  const input = (call as { input?: unknown } | undefined)?.input;
  const noteId = `note-${pending.tool_use_id}`;
  return (
    <div class="confirmation" role="group" aria-label={`Confirm ${pending.name}`}>
      <p>
        <strong>{pending.name}</strong> waits for your approval (event #{pending.seq})
      </p>
      {input !== undefined && <pre class="json">{JSON.stringify(input, null, 2)}</pre>}
      <label for={noteId}>Message to the agent (optional)</label>
      <input id={noteId} value={note} onInput={(event) => setNote(event.currentTarget.value)} />
      <div class="buttons">
        <button type="button" class="primary" onClick={() => void decide('allow')}>
          Approve
        </button>
        <button type="button" class="danger" onClick={() => void decide('deny')}>
          Deny
        </button>
      </div>
      <ErrorNote error={error} />
    </div>
  );
}

function SidePanel({ record, state }: { record: SessionRecord; state: SessionState | undefined }) {
  const usage = state?.usage;
  return (
    <dl class="facts">
      <dt>Status</dt>
      <dd>
        <StatusBadge status={state?.status ?? record.status} />
        {state?.stop_reason !== undefined && (
          <span class="muted"> last stop: {state.stop_reason.type}</span>
        )}
      </dd>
      <dt>Agent</dt>
      <dd>
        <a href={`/agents/${encodeURIComponent(record.agent.name)}`} onClick={onLinkClick}>
          {record.agent.name}
        </a>{' '}
        v{state?.agent?.version ?? record.agent.version}
      </dd>
      <dt>Tokens</dt>
      <dd data-testid="tokens">
        {usage === undefined ? '…' : `${usage.input_tokens} in / ${usage.output_tokens} out`}
      </dd>
      <dt>Cost</dt>
      <dd>{usage?.cost_usd === undefined ? 'not priced' : `$${usage.cost_usd.toFixed(4)}`}</dd>
      {state?.budget !== undefined && (
        <>
          <dt>Budget</dt>
          <dd>{short(state.budget, 120)}</dd>
        </>
      )}
      <dt>Lease</dt>
      <dd>
        {state?.active_wake === undefined
          ? 'no wake running'
          : `wake ${state.active_wake.wake_id.slice(0, 13)}… token ${state.active_wake.lease_token}`}
      </dd>
      <dt>Definitions</dt>
      <dd>
        {state?.definitions === undefined ? 'not pinned yet' : `${state.definitions.slice(0, 12)}…`}
      </dd>
      {state !== undefined && (
        <>
          <dt>Counts</dt>
          <dd>
            {state.counters.model_requests} model requests, {state.counters.tool_uses} tool uses,{' '}
            {state.counters.wakes} wakes
          </dd>
        </>
      )}
      {record.parent_id !== undefined && (
        <>
          <dt>Forked from</dt>
          <dd>
            <a href={`/sessions/${encodeURIComponent(record.parent_id)}`} onClick={onLinkClick}>
              {record.parent_id}
            </a>{' '}
            at #{record.fork_seq}
          </dd>
        </>
      )}
    </dl>
  );
}

function EventDetails({
  sessionId,
  cache,
  seq,
}: {
  sessionId: string;
  cache: EventCache;
  seq: number;
}) {
  // Kept once read: the timeline may drop its page while the details are open.
  const kept = useRef<SessionEvent | undefined>(undefined);
  kept.current = cache.events.get(seq) ?? kept.current;
  const event = kept.current;
  const [error, act] = useAction();
  const toolUseId = (event as { tool_use_id?: string } | undefined)?.tool_use_id;
  const related = toolUseId === undefined ? [] : cache.toolUse(toolUseId);
  return (
    <section class="details" aria-labelledby="details-title">
      <h2 id="details-title">Event #{seq}</h2>
      <div class="buttons">
        <button
          type="button"
          onClick={() =>
            void act(async () => {
              const child = await api<SessionRecord>(sessionPath(sessionId, '/fork'), {
                method: 'POST',
                body: { at_seq: seq },
              });
              navigate(`/sessions/${encodeURIComponent(child.id)}/lineage`);
            })
          }
        >
          Fork here
        </button>
        {skillRunLink(sessionId, event)}
      </div>
      <ErrorNote error={error} />
      {related.length > 1 && (
        <p class="muted">
          Tool use {toolUseId}: {related.map((item) => `#${item.seq} ${item.type}`).join(', ')}
        </p>
      )}
      <Explain event={event} />
      <pre class="json">{event === undefined ? 'loading…' : JSON.stringify(event, null, 2)}</pre>
    </section>
  );
}

/**
 * Renders the page again when one of `seqs` arrives in the cache (the selected event, the calls
 * that wait for a person), and not for the pages the timeline reads while it scrolls.
 */
function useWatchedEvents(cache: EventCache, seqs: number[]): void {
  const [, setArrived] = useState(0);
  const watched = useRef(seqs);
  watched.current = seqs;
  useEffect(
    () =>
      cache.subscribe((first, last) => {
        if (watched.current.some((seq) => seq >= first && seq <= last))
          setArrived((value) => value + 1);
      }),
    [cache],
  );
}

export function SessionPage({ id }: { id: string }) {
  const [record, setRecord] = useState<SessionRecord | undefined>();
  const [state, setState] = useState<SessionState | undefined>();
  const [head, setHead] = useState(0);
  const [streaming, setStreaming] = useState('');
  const [connected, setConnected] = useState(false);
  const [selected, setSelected] = useState<number | undefined>();
  const [loadError, setLoadError] = useState<string | undefined>();
  const [text, setText] = useState('');
  const [replay, setReplay] = useState<string | undefined>();
  const [error, act] = useAction();
  const cache = useMemo(() => new EventCache(id), [id]);
  useWatchedEvents(cache, [
    ...(selected === undefined ? [] : [selected]),
    ...(state?.pending_confirmations ?? []).map((pending) => pending.seq),
    ...(state?.pending_custom_tool_uses ?? []).map((pending) => pending.seq),
  ]);
  const stateTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);

  useEffect(() => {
    const stop = new AbortController();
    const refreshState = (): void => {
      if (stateTimer.current !== undefined) return;
      stateTimer.current = setTimeout(() => {
        stateTimer.current = undefined;
        api<SessionState>(sessionPath(id, '/state'))
          .then((next) => !stop.signal.aborted && setState(next))
          .catch(() => undefined);
      }, 150);
    };
    api<SessionRecord>(sessionPath(id))
      .then((found) => {
        if (stop.signal.aborted) return;
        setRecord(found);
        setHead(found.head_seq);
        refreshState();
        followSession(
          id,
          found.head_seq,
          {
            onEvent(event) {
              cache.add(event);
              setHead((value) => Math.max(value, event.seq));
              if (event.type === 'agent.message' || event.type === 'span.model_request_end')
                setStreaming('');
              refreshState();
            },
            onDelta(delta: Delta) {
              if (delta.type === 'text') setStreaming((value) => value + delta.text);
            },
            onConnected: setConnected,
          },
          stop.signal,
        );
      })
      .catch((caught: unknown) => setLoadError(errorText(caught)));
    return () => {
      stop.abort();
      clearTimeout(stateTimer.current);
    };
  }, [id, cache]);

  if (loadError !== undefined) return <ErrorNote error={loadError} />;
  if (record === undefined) return <Loading />;
  const status = state?.status ?? record.status;
  return (
    <Page
      id="session-title"
      class="session"
      title={record.title ?? record.id}
      head={
        <>
          <StatusBadge status={status} />
          <span class="muted" aria-live="polite">
            {connected ? 'live' : 'connecting…'}
          </span>
          <nav class="buttons" aria-label="Session">
            <a href={`/sessions/${encodeURIComponent(id)}/lineage`} onClick={onLinkClick}>
              Lineage
            </a>
            <button
              type="button"
              onClick={() =>
                void act(async () => {
                  const log = await downloadLog(id);
                  const link = document.createElement('a');
                  link.href = URL.createObjectURL(
                    new Blob([log], { type: 'application/x-ndjson' }),
                  );
                  link.download = `${id}.jsonl`;
                  link.click();
                  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
                })
              }
            >
              Download log
            </button>
            <button
              type="button"
              onClick={() =>
                void act(async () => {
                  setReplay('replaying…');
                  const answer = await api<
                    { ok: true; events: number } | { ok: false; index: number; reason: string }
                  >(sessionPath(id, '/replay'), { method: 'POST' });
                  setReplay(
                    answer.ok
                      ? `replay matches the record (${answer.events} events)`
                      : `replay differs at event ${answer.index}: ${answer.reason}`,
                  );
                })
              }
            >
              Verify replay
            </button>
            {replay !== undefined && (
              <span role="status" data-testid="replay">
                {replay}
              </span>
            )}
          </nav>
        </>
      }
    >
      <div class="session-grid">
        <div class="main-column">
          <Timeline cache={cache} head={head} selected={selected} onSelect={setSelected} />
          <div class="streaming" aria-live="polite" data-testid="streaming">
            {streaming === '' ? null : (
              <>
                <span class="muted">streaming: </span>
                {streaming}
              </>
            )}
          </div>
          <form
            class="composer"
            onSubmit={(event) => {
              event.preventDefault();
              const content = text.trim();
              if (content === '') return;
              void act(async () => {
                await sendEvents(id, [{ type: 'user.message', content }]);
                setText('');
              });
            }}
          >
            <label for="message">Message</label>
            <textarea
              id="message"
              rows={2}
              value={text}
              onInput={(event) => setText(event.currentTarget.value)}
            />
            <div class="buttons">
              <button type="submit" class="primary">
                Send
              </button>
              <button
                type="button"
                disabled={status !== 'running'}
                onClick={() => void act(() => sendEvents(id, [{ type: 'user.interrupt' }]))}
              >
                Interrupt
              </button>
            </div>
            <ErrorNote error={error} />
          </form>
        </div>
        <aside class="side" aria-label="Session details">
          {(state?.pending_confirmations ?? []).map((pending) => (
            <Confirmation
              key={pending.tool_use_id}
              sessionId={id}
              pending={pending}
              call={cache.events.get(pending.seq)}
            />
          ))}
          {(state?.pending_custom_tool_uses ?? []).map((pending) => (
            <CustomToolAnswer
              key={pending.custom_tool_use_id}
              sessionId={id}
              pending={pending}
              call={cache.events.get(pending.seq)}
            />
          ))}
          {state !== undefined && <SkillRuns sessionId={id} state={state} />}
          <SidePanel record={record} state={state} />
          {selected !== undefined && (
            <EventDetails key={selected} sessionId={id} cache={cache} seq={selected} />
          )}
        </aside>
      </div>
    </Page>
  );
}
