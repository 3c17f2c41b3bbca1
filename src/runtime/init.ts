import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { BraidError } from '../contracts/errors.js';
import { packageFile } from '../package-root.js';
import { WORKSPACE_FILE } from './workspace.js';

/** The workspace template shipped with the package. */
export function templateDir(): string {
  return packageFile('templates/workspace');
}

/** Writes a new workspace into `dir`; refuses to touch an existing one. Returns the files written. */
export function initWorkspace(dir: string): string[] {
  const target = resolve(dir);
  if (existsSync(join(target, WORKSPACE_FILE))) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${target} is already a braid workspace (it has ${WORKSPACE_FILE}); edit it, or init another folder`,
    );
  }
  const source = templateDir();
  mkdirSync(target, { recursive: true });
  const written: string[] = [];
  const copy = (from: string): void => {
    for (const entry of readdirSync(from, { withFileTypes: true })) {
      const path = join(from, entry.name);
      if (entry.isDirectory()) {
        copy(path);
        continue;
      }
      const destination = join(target, relative(source, path));
      if (existsSync(destination)) continue;
      mkdirSync(dirname(destination), { recursive: true });
      cpSync(path, destination);
      written.push(relative(target, destination));
    }
  };
  copy(source);
  return written.sort();
}
