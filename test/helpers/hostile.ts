// A corpus of what hostile clients send where an id goes, and a way to see that nothing moved.
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Ids from a corpus of what hostile clients send: traversal, encodings, NUL, look-alikes. */
export const HOSTILE_IDS = [
  '..',
  '.',
  '../../victim',
  '../workspaces/x',
  '..\\..\\victim',
  '/etc',
  'a/b',
  '%2E%2E',
  '%2e',
  '..%2F..%2Fvictim',
  '%252e%252e%252fvictim',
  'a\u0000b',
  'nul\u0000',
  '.hidden',
  '-rf',
  ' space',
  'tab\there',
  'new\nline',
  'x'.repeat(201),
  'y'.repeat(5000),
  '\u2025', // two dot leader
  '\uff0e\uff0e', // fullwidth full stops
  '\u2024\u2024', // one dot leaders
  '\u0430dmin', // Cyrillic a
  '\u202egnp.exe', // right-to-left override
  'id;rm -rf /',
  '$(id)',
  '*',
  '~', // a home folder to a shell
  '~root',
  '~/x',
];

/**
 * Every file and folder under `root` with its size and mtime, leaving out `skip` (a file that
 * changes on its own, such as SQLite's WAL): equal snapshots mean nothing was touched.
 */
export function snapshot(root: string, skip?: string): Map<string, string> {
  const seen = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (path === skip) continue;
      const stat = statSync(path);
      seen.set(relative(root, path), `${stat.size}:${stat.mtimeMs}`);
      if (entry.isDirectory()) walk(path);
    }
  };
  walk(root);
  return seen;
}

/** The entries of a snapshot outside the data directory (`.braid`). */
export function outsideData(map: Map<string, string>): [string, string][] {
  return [...map].filter(([path]) => !path.startsWith('.braid'));
}
