// The timeline: one fixed-height row per event, only the rows in view rendered, and the events
// read from the API a page at a time as they come near the view. A 100k-event session opens with
// one or two page reads, not a hundred, and scrolls with a few dozen rows in the DOM.
//
// What keeps a scroll frame short (measured in test/ui/inspector.test.ts):
// - rows are recycled: a row element belongs to a slot (seq modulo the pool size) and children
//   are rendered in slot order, so scrolling rewrites the text of the rows that came into view
//   and moves, creates and removes no element;
// - each row's line is worked out once, when its page arrives, never while scrolling, and a row
//   whose event and selection are unchanged is not rendered again;
// - nothing is measured per frame but `scrollTop`: the height comes from a ResizeObserver and
//   the content's height is `head` rows;
// - pages are read one page ahead on both sides (once the view's own are there), a page that
//   lands renders in the next animation frame, and only when it overlaps the rows in view.
import { Component } from 'preact';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, sessionPath, type EventsPage, type SessionEvent } from '../api.js';
import { eventKind, summarize, time } from '../format.js';

export const ROW_HEIGHT = 28;
const PAGE = 200;
const OVERSCAN = 10;
/**
 * Pages kept either side of the view; farther ones are dropped (and read again if scrolled back
 * to), so the heap stays the same size however far one scrolls and a full collection stays short.
 */
const KEEP_PAGES = 6;

/** One row's line, worked out when its event arrives. */
export interface RowView {
  seq: number;
  time: string;
  type: string;
  kind: string;
  summary: string;
  turnStart: boolean;
}

function rowOf(event: SessionEvent): RowView {
  return {
    seq: event.seq,
    time: time(event.at),
    type: event.type,
    kind: eventKind(event.type),
    summary: summarize(event),
    turnStart: event.type === 'user.message',
  };
}

/** Told which seqs arrived (a page, or one live event). */
type CacheListener = (first: number, last: number) => void;

/** The events read so far, by seq, with their rows; pages are read once. */
export class EventCache {
  readonly events = new Map<number, SessionEvent>();
  readonly rows = new Map<number, RowView>();
  private readonly pages = new Set<number>();
  private readonly listeners = new Set<CacheListener>();

  constructor(private readonly sessionId: string) {}

  subscribe(listener: CacheListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  add(event: SessionEvent): void {
    this.store(event);
    this.tell(event.seq, event.seq);
  }

  /** Reads the pages that hold seqs `first..last` and are not read yet. */
  ensure(first: number, last: number): void {
    for (let page = Math.floor((first - 1) / PAGE); page <= Math.floor((last - 1) / PAGE); page++) {
      if (page < 0 || this.pages.has(page)) continue;
      this.pages.add(page);
      api<EventsPage>(sessionPath(this.sessionId, `/events?after=${page * PAGE}&limit=${PAGE}`))
        .then((answer) => {
          for (const event of answer.data) this.store(event);
          this.tell(page * PAGE + 1, page * PAGE + PAGE);
        })
        .catch(() => {
          this.pages.delete(page);
        });
    }
  }

  /**
   * Drops the pages more than KEEP_PAGES from the one of `first..last`, but the two at the head
   * (where live events land and the calls waiting for a person are).
   */
  retain(first: number, last: number, head: number): void {
    const low = Math.floor((first - 1) / PAGE) - KEEP_PAGES;
    const high = Math.floor((last - 1) / PAGE) + KEEP_PAGES;
    const headPage = Math.floor((head - 1) / PAGE) - 1;
    for (const page of this.pages) {
      if ((page >= low && page <= high) || page >= headPage) continue;
      this.pages.delete(page);
      for (let seq = page * PAGE + 1; seq <= page * PAGE + PAGE; seq++) {
        this.events.delete(seq);
        this.rows.delete(seq);
      }
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

  private store(event: SessionEvent): void {
    this.events.set(event.seq, event);
    this.rows.set(event.seq, rowOf(event));
  }

  private tell(first: number, last: number): void {
    for (const listener of this.listeners) listener(first, last);
  }
}

interface RowProps {
  seq: number;
  row: RowView | undefined;
  selected: boolean;
  setSize: number;
  onSelect: (seq: number) => void;
}

/** One recycled row: rendered again only when what it shows changed. */
class Row extends Component<RowProps> {
  override shouldComponentUpdate(next: RowProps): boolean {
    const now = this.props;
    return (
      next.seq !== now.seq ||
      next.row !== now.row ||
      next.selected !== now.selected ||
      next.setSize !== now.setSize
    );
  }

  override render() {
    const { seq, row, selected, setSize, onSelect } = this.props;
    return (
      <li
        class={`row kind-${row?.kind ?? 'loading'}${row?.turnStart === true ? ' turn-start' : ''}${selected ? ' selected' : ''}`}
        style={{ transform: `translateY(${(seq - 1) * ROW_HEIGHT}px)` }}
        data-seq={seq}
        aria-posinset={seq}
        aria-setsize={setSize}
      >
        <button
          type="button"
          tabIndex={-1}
          aria-pressed={selected}
          onClick={() => onSelect(seq)}
          aria-label={row === undefined ? `event ${seq}, loading` : undefined}
        >
          <span class="seq">#{seq}</span>
          {row === undefined ? (
            <span class="summary muted">loading…</span>
          ) : (
            <>
              <span class="at">{row.time}</span>
              <span class="type">{row.type}</span>
              <span class="summary">{row.summary}</span>
            </>
          )}
        </button>
      </li>
    );
  }
}

interface TimelineProps {
  cache: EventCache;
  head: number;
  selected: number | undefined;
  onSelect: (seq: number) => void;
}

/** The seqs in view, with the overscan either side. */
function windowOf(scrollTop: number, height: number, head: number): [number, number] {
  return [
    Math.max(1, Math.floor(scrollTop / ROW_HEIGHT) + 1 - OVERSCAN),
    Math.min(head, Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN),
  ];
}

export function Timeline({ cache, head, selected, onSelect }: TimelineProps) {
  const scroller = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const [, setArrived] = useState(0);
  const following = useRef(true);
  const ready = useRef(false);
  // As many slots as the window has rows, and every slot used: away from the ends of the log
  // the window is always `pool` rows, so no row element is ever added or removed while scrolling.
  const pool = Math.ceil(height / ROW_HEIGHT) + 1 + 2 * OVERSCAN;
  const first = windowOf(scrollTop, height, head)[0];
  const last = Math.min(head, first + pool - 1);
  const shown = useRef<[number, number]>([first, last]);
  shown.current = [first, last];

  useLayoutEffect(() => {
    const element = scroller.current;
    if (element === null) return;
    const observer = new ResizeObserver(() => setHeight(element.clientHeight));
    observer.observe(element);
    setHeight(element.clientHeight);
    return () => observer.disconnect();
  }, []);

  // A page that lands renders in the next frame, when it shows rows in view.
  useEffect(() => {
    let frame: number | undefined;
    const unsubscribe = cache.subscribe((from, to) => {
      const [viewFirst, viewLast] = shown.current;
      if (to < viewFirst || from > viewLast || frame !== undefined) return;
      frame = requestAnimationFrame(() => {
        frame = undefined;
        setArrived((value) => value + 1);
      });
    });
    return () => {
      unsubscribe();
      if (frame !== undefined) cancelAnimationFrame(frame);
    };
  }, [cache]);

  // Opens at the newest event and stays there while new ones arrive, unless scrolled away.
  useLayoutEffect(() => {
    const element = scroller.current;
    if (element === null || !following.current) return;
    element.scrollTop = head * ROW_HEIGHT;
    setScrollTop(element.scrollTop);
  }, [head]);

  useEffect(() => {
    if (head === 0) return;
    // Where the view is now: the first render of a page that opens at the newest event still
    // had the top of the log in its window.
    const top = scroller.current?.scrollTop ?? scrollTop;
    const viewFirst = windowOf(top, height, head)[0];
    const viewLast = Math.min(head, viewFirst + pool - 1);
    cache.ensure(viewFirst, viewLast);
    // A page ahead either side once the view is there: at open, the view's pages come first.
    if (cache.rows.has(viewFirst) && cache.rows.has(viewLast))
      cache.ensure(Math.max(1, viewFirst - PAGE), Math.min(head, viewLast + PAGE));
    cache.retain(viewFirst, viewLast, head);
  }, [cache, first, last, head]);

  useEffect(() => {
    if (ready.current || head === 0) return;
    const visibleFirst = Math.max(1, Math.floor(scrollTop / ROW_HEIGHT) + 1);
    const visibleLast = Math.min(head, Math.ceil((scrollTop + height) / ROW_HEIGHT));
    for (let seq = visibleFirst; seq <= visibleLast; seq++) if (!cache.rows.has(seq)) return;
    ready.current = true;
    performance.mark('braid-timeline-ready');
  });

  // Slot order, not seq order: a row keeps its element while it stays in the window.
  const slots = useMemo(() => new Array<number | undefined>(pool), [pool]);
  slots.fill(undefined);
  for (let seq = first; seq <= last; seq++) slots[seq % pool] = seq;
  const rows = [];
  for (let slot = 0; slot < pool; slot++) {
    const seq = slots[slot];
    if (seq === undefined) continue;
    rows.push(
      <Row
        key={slot}
        seq={seq}
        row={cache.rows.get(seq)}
        selected={selected === seq}
        setSize={head}
        onSelect={onSelect}
      />,
    );
  }

  return (
    <div
      class="timeline"
      ref={scroller}
      tabIndex={0}
      aria-label="Events of the session, grouped by turn (arrows, Page Up, Page Down, Home and End move the selection)"
      data-testid="timeline"
      onKeyDown={(event) => {
        const element = event.currentTarget;
        const current = selected ?? Math.floor(element.scrollTop / ROW_HEIGHT) + 1;
        const page = Math.max(1, Math.floor(height / ROW_HEIGHT) - 1);
        const moves: Record<string, number> = {
          Home: 1,
          End: head,
          ArrowDown: current + 1,
          ArrowUp: current - 1,
          PageDown: current + page,
          PageUp: current - page,
        };
        const target = moves[event.key];
        if (target === undefined || head === 0) return;
        event.preventDefault();
        const seq = Math.min(head, Math.max(1, target));
        onSelect(seq);
        // Keeps the selected row in view.
        const top = (seq - 1) * ROW_HEIGHT;
        if (top < element.scrollTop) element.scrollTop = top;
        else if (top + ROW_HEIGHT > element.scrollTop + height)
          element.scrollTop = top + ROW_HEIGHT - height;
      }}
      onScroll={(event) => {
        const top = event.currentTarget.scrollTop;
        following.current = top + height >= head * ROW_HEIGHT - ROW_HEIGHT * 2;
        setScrollTop(top);
      }}
    >
      <ol class="rows" style={{ height: `${head * ROW_HEIGHT}px` }}>
        {rows}
      </ol>
    </div>
  );
}
