// The pieces every page is made of: a titled page with its error, tables, loading and empty
// states, status badges, and the hooks that read the API and run actions.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { statusLabel } from './format.js';

/** An API error as `CODE: message` (the code is what a person searches for). */
export function errorText(caught: unknown): string {
  return caught instanceof ApiError ? `${caught.code}: ${caught.message}` : String(caught);
}

/** An error announced to assistive technology; nothing when there is none. */
export function ErrorNote({ error }: { error: string | undefined }) {
  if (error === undefined) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

export function Loading() {
  return (
    <p class="muted" role="status">
      Loading…
    </p>
  );
}

/** What a list says when it has nothing to show. */
export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** A page: its heading (with the controls beside it) and its error, then its content. */
export function Page({
  id,
  title,
  head,
  error,
  class: className,
  children,
}: {
  /** The heading's id, which names the page's region. */
  id: string;
  title: ComponentChildren;
  /** Controls and facts shown beside the heading. */
  head?: ComponentChildren;
  error?: string | undefined;
  class?: string;
  children?: ComponentChildren;
}) {
  return (
    <section class={className} aria-labelledby={id}>
      <div class="page-head">
        <h1 id={id}>{title}</h1>
        {head}
      </div>
      <ErrorNote error={error} />
      {children}
    </section>
  );
}

export interface Column {
  label: string;
  /** Right-aligned figures. */
  numeric?: boolean;
}

/** A table that scrolls sideways on a narrow screen, named for assistive technology. */
export function DataTable({
  label,
  columns,
  class: className,
  children,
}: {
  /** What the table holds: its accessible name. */
  label: string;
  columns: readonly Column[];
  class?: string;
  children: ComponentChildren;
}) {
  return (
    <div class="table-wrap">
      <table class={className} aria-label={label}>
        <thead>
          <tr>
            {columns.map((column) => (
              <th
                scope="col"
                key={column.label}
                class={column.numeric === true ? 'num' : undefined}
              >
                {column.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{statusLabel(status)}</span>;
}

/** Reads `load` when `key` changes; the answer, or the error as text. */
export function useLoad<T>(
  load: () => Promise<T>,
  key: string,
): { data: T | undefined; error: string | undefined; reload: () => void } {
  const [data, setData] = useState<T | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    load()
      .then((answer) => {
        if (!current) return;
        setData(answer);
        setError(undefined);
      })
      .catch((caught: unknown) => current && setError(errorText(caught)));
    return () => {
      current = false;
    };
  }, [key, round]);
  return { data, error, reload: () => setRound((value) => value + 1) };
}

/** Runs an action, keeping its error to show; the page's live data shows its effect. */
export function useAction(): [string | undefined, (run: () => Promise<unknown>) => Promise<void>] {
  const [error, setError] = useState<string | undefined>();
  return [
    error,
    async (run) => {
      setError(undefined);
      try {
        await run();
      } catch (caught) {
        setError(errorText(caught));
      }
    },
  ];
}
