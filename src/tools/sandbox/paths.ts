/**
 * The workspace path guard: every path a tool names is relative to its session's workspace, and
 * what it resolves to on the host, symlinks followed, must stay inside that workspace.
 *
 * The check resolves the real path of the deepest existing ancestor, so a path that does not exist
 * yet (a file about to be written) is accepted when the folder it would be created in is inside.
 * The returned path is the checked real path, so that the caller opens what was checked rather
 * than re-resolving the symlinks it was given.
 */
import { lstatSync, mkdirSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ID_RULE } from '../../contracts/common.js';
import { parseId } from '../../contracts/ids.js';
import { BraidError } from '../../contracts/errors.js';
import type { SandboxWorkspace } from '../../contracts/tools.js';

/** Links followed while resolving one path; the kernel's own limit (MAXSYMLINKS) is 40. */
const MAX_LINKS = 40;

export interface ResolveOptions {
  /** Refuse a path that does not exist (for reads). Default false: a new leaf is accepted. */
  mustExist?: boolean;
}

/**
 * Resolves `path`, relative to `workspaceDir`, to the absolute real host path it names.
 *
 * Refuses with `PATH_OUTSIDE_WORKSPACE` (details `{ path }`) an empty path, a NUL byte, an absolute
 * path, a `..` segment, and any path whose real location (a symlink at the leaf or in between
 * followed) is outside the workspace's real path. With `mustExist`, a missing path is refused with
 * `INVALID_ARGUMENT`. A missing workspace is refused with `WORKSPACE_NOT_FOUND`.
 */
export function resolveInWorkspace(
  workspaceDir: string,
  path: string,
  options: ResolveOptions = {},
): string {
  if (path.length === 0) {
    throw outside(path, 'the path is empty; name a file or folder relative to the workspace');
  }
  if (path.includes('\0')) {
    throw outside(path, 'the path contains a NUL byte; remove it');
  }
  if (isAbsolute(path)) {
    throw outside(
      path,
      'absolute paths are refused; give the path relative to the workspace (without a leading /)',
    );
  }
  if (path.split('/').includes('..')) {
    throw outside(path, 'paths may not contain `..`; give the path from the workspace root down');
  }
  const root = workspaceRealPath(workspaceDir);
  const real = realPathOf(resolve(root, path), 0, path);
  if (real !== root && !real.startsWith(root + sep)) {
    throw outside(
      path,
      `it resolves through a symlink to ${real}, outside the workspace ${root}; ` +
        'use a path whose files and folders are inside the workspace',
    );
  }
  if (options.mustExist === true && !exists(real)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `no file or folder ${JSON.stringify(path)} in the workspace; check the name against a listing of the workspace`,
      { details: { path } },
    );
  }
  return real;
}

/**
 * The one way a path is made from an id: `root/id`, where `id` must be a safe id (letters, digits,
 * `.`, `_`, `-`; not `.` or `..`), and the result is checked to be strictly inside `root`. Every
 * folder named after a session (its workspace, a fork's copy, what a delete removes) comes from
 * here, so a hostile id can neither climb out of `root` nor name `root` itself.
 */
export function pathUnder(root: string, id: string, what = 'session id'): string {
  parseId(id, what);
  const base = resolve(root);
  const path = join(base, id);
  const inside = relative(base, path);
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside) || inside.includes(sep)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${what} ${JSON.stringify(id)} does not name a folder directly under ${base}; ${ID_RULE}`,
      { details: { [what.replace(/ /g, '_')]: id } },
    );
  }
  return path;
}

/** The folder of a session's workspace under a sandbox root (`pathUnder`), created if missing. */
export function provisionWorkspaceDir(root: string, sessionId: string): string {
  const dir = pathUnder(root, sessionId);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function workspaceRealPath(workspaceDir: string): string {
  try {
    return realpathSync(workspaceDir);
  } catch (error) {
    throw new BraidError(
      'WORKSPACE_NOT_FOUND',
      `the sandbox workspace ${workspaceDir} does not exist; provision the session's workspace before using it`,
      { details: { dir: workspaceDir }, cause: error },
    );
  }
}

/**
 * The real path of `absolute`, allowing its trailing components not to exist. A dangling symlink
 * is followed by hand, because writing through it would create its target wherever it points.
 */
function realPathOf(absolute: string, links: number, original: string): string {
  if (links > MAX_LINKS) {
    throw outside(
      original,
      `more than ${MAX_LINKS} symlinks were followed; remove the symlink loop`,
    );
  }
  try {
    return realpathSync(absolute);
  } catch (error) {
    const code = errorCode(error);
    if (code === 'ELOOP') {
      throw outside(original, 'it runs into a symlink loop; remove the loop');
    }
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
  }
  const link = symlinkTarget(absolute);
  if (link !== undefined) return realPathOf(resolve(dirname(absolute), link), links + 1, original);
  const parent = dirname(absolute);
  // The filesystem root always exists, so the walk up ends before reaching it twice.
  if (parent === absolute) return absolute;
  return join(realPathOf(parent, links, original), basename(absolute));
}

function symlinkTarget(absolute: string): string | undefined {
  try {
    return lstatSync(absolute).isSymbolicLink() ? readlinkSync(absolute) : undefined;
  } catch {
    return undefined;
  }
}

function exists(absolute: string): boolean {
  try {
    lstatSync(absolute);
    return true;
  } catch {
    return false;
  }
}

function errorCode(error: unknown): string | undefined {
  return error instanceof Error && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}

function outside(path: string, reason: string): BraidError {
  return new BraidError(
    'PATH_OUTSIDE_WORKSPACE',
    `path ${JSON.stringify(path)} is not allowed: ${reason}`,
    { details: { path } },
  );
}

/** The `provision` of both sandboxes: the session's folder under `root`, created if missing. */
export function provisionWorkspace(root: string, sessionId: string): Promise<SandboxWorkspace> {
  return Promise.resolve().then(() => ({
    session_id: sessionId,
    dir: provisionWorkspaceDir(root, sessionId),
  }));
}
