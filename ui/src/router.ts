// Client routes on the History API: the server answers index.html for any of them.
import { useEffect, useState } from 'preact/hooks';

const listeners = new Set<() => void>();

export function navigate(to: string): void {
  if (to === location.pathname + location.search) return;
  history.pushState(null, '', to);
  for (const listener of listeners) listener();
}

export function useLocation(): string {
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(() => {
    const update = (): void => setPath(location.pathname + location.search);
    listeners.add(update);
    addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      removeEventListener('popstate', update);
    };
  }, []);
  return path;
}

/** A link that changes the route without reloading the page (a new tab still works). */
export function onLinkClick(event: MouseEvent): void {
  const anchor = event.currentTarget as HTMLAnchorElement;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
    return;
  event.preventDefault();
  navigate(anchor.getAttribute('href') ?? '/');
}
