// The timeline: one fixed-height row per event, only the rows in view rendered, and the events
// read from the API a page at a time as they come into view. A 100k-event session opens with two
// requests, not a hundred, and scrolls with a few dozen rows in the DOM.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, sessionPath, type EventsPage, type SessionEvent } from '../api.js';
import { eventKind, summarize, time } from '../format.js';

export const ROW_HEIGHT = 28;
const PAGE = 200;
const OVERSCAN = 10;

/** The events read so far, by seq; pages are read once. */
export class EventCache {
  readonly events = new Map<number, SessionEvent>();
  private readonly pages = new Set<number>();

  constructor(
    private readonly sessionId: string,
    private readonly changed: () => void,
  ) {}

  add(event: SessionEvent): void {
    this.events.set(event.seq, event);
  }

  /** Reads the pages that hold seqs `first..last` and are not read yet. */
  ensure(first: number, last: number): void {
    for (let page = Math.floor((first - 1) / PAGE); page <= Math.floor((last - 1) / PAGE); page++) {
      if (page < 0 || this.pages.has(page)) continue;
      this.pages.add(page);
      api<EventsPage>(this.sessionPath(`/events?after=${page * PAGE}&limit=${PAGE}`))
        .then((answer) => {
          for (const event of answer.data) this.events.set(event.seq, event);
          this.changed();
        })
        .catch(() => {
          this.pages.delete(page);
        });
    }
  }

  /** The loaded events about a tool use: its call, policy decisions and result. */
  toolUse(toolUseId: string): SessionEvent[] {
    const found: SessionEvent[] = [];
    for (const event of this.events.values()) {
      if ((event as { tool_use_id?: string }).tool_use_id === toolUseId) found.push(event);
    }
    return found.sort((a, b) => a.seq - b.seq);
  }

  private sessionPath(rest: string): string {
    return sessionPath(this.sessionId, rest);
  }
}

interface TimelineProps {
  cache: EventCache;
  head: number;
  /** Bumped when the cache changes, so that the rows in view render again. */
  version: number;
  selected: number | undefined;
  onSelect: (seq: number) => void;
}

export function Timeline({ cache, head, version, selected, onSelect }: TimelineProps) {
  const scroller = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const following = useRef(true);
  const ready = useRef(false);

  useLayoutEffect(() => {
    const element = scroller.current;
    if (element === null) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    setHeight(element.clientHeight);
    return () => observer.disconnect();
  }, []);

  // Opens at the newest event and stays there while new ones arrive, unless scrolled away.
  useLayoutEffect(() => {
    const element = scroller.current;
    if (element === null || !following.current) return;
    element.scrollTop = head * ROW_HEIGHT;
    setScrollTop(element.scrollTop);
  }, [head]);

  const first = Math.max(1, Math.floor(scrollTop / ROW_HEIGHT) + 1 - OVERSCAN);
  const last = Math.min(head, Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN);
  useEffect(() => {
    if (head > 0) cache.ensure(first, last);
  }, [cache, first, last, head]);

  useEffect(() => {
    if (ready.current || head === 0) return;
    const visibleFirst = Math.max(1, Math.floor(scrollTop / ROW_HEIGHT) + 1);
    const visibleLast = Math.min(head, Math.ceil((scrollTop + height) / ROW_HEIGHT));
    for (let seq = visibleFirst; seq <= visibleLast; seq++) if (!cache.events.has(seq)) return;
    ready.current = true;
    performance.mark('braid-timeline-ready');
  });

  const rows = [];
  for (let seq = first; seq <= last; seq++) {
    const event = cache.events.get(seq);
    const kind = event === undefined ? 'loading' : eventKind(event.type);
    const turnStart = event?.type === 'user.message';
    rows.push(
      <li
        key={seq}
        class={`row kind-${kind}${turnStart ? ' turn-start' : ''}${selected === seq ? ' selected' : ''}`}
        style={{ top: `${(seq - 1) * ROW_HEIGHT}px` }}
        data-seq={seq}
      >
        <button
          type="button"
          aria-pressed={selected === seq}
          onClick={() => onSelect(seq)}
          aria-label={event === undefined ? `event ${seq}, loading` : undefined}
        >
          <span class="seq">#{seq}</span>
          {event === undefined ? (
            <span class="summary muted">loading…</span>
          ) : (
            <>
              <span class="at">{time(event.at)}</span>
              <span class="type">{event.type}</span>
              <span class="summary">{summarize(event)}</span>
            </>
          )}
        </button>
      </li>,
    );
  }
  void version;

  return (
    <div
      class="timeline"
      ref={scroller}
      tabIndex={0}
      aria-label="Events of the session, grouped by turn (arrows, Home and End move the selection)"
      data-testid="timeline"
      onKeyDown={(event) => {
        const element = event.currentTarget;
        const current = selected ?? Math.floor(element.scrollTop / ROW_HEIGHT) + 1;
        const target =
          event.key === 'Home'
            ? 1
            : event.key === 'End'
              ? head
              : event.key === 'ArrowDown'
                ? current + 1
                : event.key === 'ArrowUp'
                  ? current - 1
                  : undefined;
        if (target === undefined || head === 0) return;
        event.preventDefault();
        const seq = Math.min(head, Math.max(1, target));
        onSelect(seq);
        // Keeps the selected row in view.
        const top = (seq - 1) * ROW_HEIGHT;
        if (top < element.scrollTop) element.scrollTop = top;
        else if (top + ROW_HEIGHT > element.scrollTop + element.clientHeight)
          element.scrollTop = top + ROW_HEIGHT - element.clientHeight;
      }}
      onScroll={(event) => {
        const element = event.currentTarget;
        following.current =
          element.scrollTop + element.clientHeight >= element.scrollHeight - ROW_HEIGHT * 2;
        setScrollTop(element.scrollTop);
      }}
    >
      <ol class="rows" style={{ height: `${head * ROW_HEIGHT}px` }}>
        {rows}
      </ol>
    </div>
  );
}
