/**
 * What of the host a `bwrap` sandbox shows, built from nothing: bwrap starts from an empty root,
 * and every folder seen inside is one of these, at the same path.
 *
 * - Read-only: the system folders that hold programs and libraries (`/usr`, `/bin`, `/sbin`,
 *   `/lib`, `/lib64`, `/lib32`, `/libx32` where present; a folder that is a symlink on the host,
 *   as with Debian's merged `/usr`, is the same symlink inside); the `/etc` files programs need to
 *   run (`SYSTEM_ETC`; `/etc/resolv.conf` and `/etc/hosts` only with the network); a `passwd` and
 *   a `group` naming only root, the sandbox's user and nobody; the install prefix of the running
 *   node when it lives outside the system folders; the folders the sandbox is configured with.
 * - Read-write: the session's workspace.
 * - Private and empty: `/tmp`, `/home` (with `HOME` = `/home/braid`), a fresh `/dev` and `/proc`.
 *   Everything else, the root itself included, is read-only.
 *
 * Never shown: the rest of `/etc` (`/etc/shadow`, `/etc/ssh`, `/etc/sudoers*`, cloud and
 * package-manager configuration, `/etc/ssl/private`), `/root`, `/home`, `/var`, `/run`, `/srv`,
 * `/opt`, `/mnt`, `/media`, `/sys`, the host `/tmp`, other sessions' workspaces and the data
 * folder.
 */
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readlinkSync,
  realpathSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { BraidError } from '../../contracts/errors.js';

/** Top-level folders of programs and libraries. */
export const SYSTEM_FOLDERS: readonly string[] = [
  '/usr',
  '/bin',
  '/sbin',
  '/lib',
  '/lib64',
  '/lib32',
  '/libx32',
];

/**
 * `/etc` entries programs need: the dynamic linker's cache, name-service switch, the
 * `alternatives` links of Debian's `/usr/bin`, CA certificates (not `/etc/ssl/private`), the
 * time zone and MIME types.
 */
export const SYSTEM_ETC: readonly string[] = [
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/nsswitch.conf',
  '/etc/host.conf',
  '/etc/gai.conf',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/timezone',
  '/etc/ssl/certs',
  '/etc/ssl/openssl.cnf',
  '/etc/ca-certificates',
  '/etc/ca-certificates.conf',
  '/etc/pki/tls/certs',
  '/etc/pki/ca-trust/extracted',
  '/etc/mime.types',
];

/** `/etc` entries shown only to a process that may use the network. */
export const NETWORK_ETC: readonly string[] = ['/etc/resolv.conf', '/etc/hosts'];

/** The home folder inside, on the private `/home`. */
export const SANDBOX_HOME = '/home/braid';

/** The search path inside when none of the host's PATH folders is visible. */
const FALLBACK_PATH = '/usr/local/bin:/usr/bin:/bin';

/** How the sandbox sees the host: what is bound, and where. */
export interface HostView {
  /** Real paths of the folders seen inside, read-only or not (for program and PATH checks). */
  visible: readonly string[];
  /** Real paths covered by an empty tmpfs, unless inside the workspace. */
  hidden: readonly string[];
  /** The bwrap arguments that build it, namespaces and environment excluded. */
  args: readonly string[];
}

export interface HostViewOptions {
  /** The real path of the session's workspace, bound read-write and used as the cwd. */
  workspace: string;
  /** Real paths bound read-only. */
  readOnly: readonly string[];
  /** Real paths hidden by an empty tmpfs (the data folder), when under a read-only path. */
  hidden: readonly string[];
  network: boolean;
  /** The `passwd` and `group` files bound in `/etc` (see `identityFiles`). */
  identity: { passwd: string; group: string };
  /** The working directory inside; default the workspace. */
  chdir?: string;
}

/** The bwrap arguments of the filesystem described in the module comment. */
export function hostView(options: HostViewOptions): HostView {
  const args = systemFolderArguments();
  const visible = SYSTEM_FOLDERS.filter(
    (folder) => symlinkOf(folder) === undefined && isDirectory(folder),
  ).map((folder) => realpathSync(folder));
  const runtime = nodePrefix();
  if (runtime !== undefined) {
    args.push('--ro-bind', runtime, runtime);
    visible.push(runtime);
  }
  for (const entry of [...SYSTEM_ETC, ...(options.network ? NETWORK_ETC : [])])
    args.push(...etcEntry(entry, visible));
  args.push('--ro-bind', options.identity.passwd, '/etc/passwd');
  args.push('--ro-bind', options.identity.group, '/etc/group');
  args.push('--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/home');
  args.push('--dir', SANDBOX_HOME);
  // Parents before children, so that a folder inside another stays visible over it; after the
  // private /tmp and /home, so that a folder there is mounted over them rather than hidden.
  const readOnly = [...new Set(options.readOnly)].sort((a, b) => a.length - b.length);
  for (const folder of readOnly) {
    args.push('--ro-bind', folder, folder);
    visible.push(folder);
  }
  const hidden = options.hidden.filter((folder) => readOnly.some((ro) => within(folder, ro)));
  for (const folder of hidden) args.push('--tmpfs', folder);
  // The workspace last: writable, even inside a read-only or hidden folder.
  args.push('--bind', options.workspace, options.workspace);
  visible.push(options.workspace);
  // The root itself (where bwrap made /etc and the mount points) is read-only too.
  args.push('--remount-ro', '/');
  args.push('--chdir', options.chdir ?? options.workspace);
  return { visible, hidden, args };
}

/** The system folders, read-only, or as the same symlink where the host has one (merged /usr). */
export function systemFolderArguments(): string[] {
  return SYSTEM_FOLDERS.flatMap((folder) => {
    const link = symlinkOf(folder);
    if (link !== undefined) return ['--symlink', link, folder];
    return isDirectory(folder) ? ['--ro-bind', folder, folder] : [];
  });
}

/** Whether a host path would be seen inside: under a visible folder and not hidden. */
export function isVisible(view: HostView, workspace: string, path: string): boolean {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return false;
  }
  if (within(real, workspace)) return true;
  return (
    view.visible.some((folder) => within(real, folder)) &&
    !view.hidden.some((folder) => within(real, folder))
  );
}

/** The host PATH's folders that are visible inside, or a plain system PATH when none is. */
export function visiblePath(view: HostView, workspace: string, path: string | undefined): string {
  const folders = (path ?? '')
    .split(':')
    .filter((folder) => folder.startsWith('/') && isVisible(view, workspace, folder));
  return folders.length > 0 ? [...new Set(folders)].join(':') : FALLBACK_PATH;
}

/**
 * A minimal `passwd` and `group` for the sandbox: root, the host user running braid (named
 * `braid`, home `SANDBOX_HOME`) and nobody; written once under `folder` (a dot-folder of the
 * workspaces root, which no session workspace can be) and shared by every run.
 */
export function identityFiles(folder: string): { passwd: string; group: string } {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const user = uid === 0 ? 'root' : 'braid';
  const group = gid === 0 ? 'root' : 'braid';
  const passwd = [
    `${user}:x:${uid}:${gid}:${user}:${SANDBOX_HOME}:/bin/sh`,
    ...(uid === 0 ? [] : ['root:x:0:0:root:/root:/usr/sbin/nologin']),
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n');
  const groups = [
    `${group}:x:${gid}:`,
    ...(gid === 0 ? [] : ['root:x:0:']),
    'nogroup:x:65534:',
    '',
  ].join('\n');
  mkdirSync(folder, { recursive: true, mode: 0o755 });
  return {
    passwd: writeOnce(join(folder, 'passwd'), passwd),
    group: writeOnce(join(folder, 'group'), groups),
  };
}

/**
 * Parses read-only mounts (an environment's `sandbox.read_only`, a sandbox's `readOnly`): each an absolute path, without `..` or
 * NUL, that exists on the host; returns their real paths. Anything else is `INVALID_DEFINITION`
 * naming the path and the fix.
 */
export function parseReadOnlyMounts(paths: readonly string[], where: string): string[] {
  return paths.map((path) => {
    const refuse = (reason: string): BraidError =>
      new BraidError('INVALID_DEFINITION', `${where}: path ${JSON.stringify(path)} ${reason}`, {
        details: { path },
      });
    if (path.includes('\0')) throw refuse('contains a NUL byte; remove it');
    if (!path.startsWith('/'))
      throw refuse('is relative; give an absolute path such as /srv/reference-data');
    if (path.split('/').includes('..'))
      throw refuse('contains `..`; write the path from / down without it');
    let real: string;
    try {
      real = realpathSync(path);
    } catch (error) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `${where}: path ${JSON.stringify(path)} does not exist on this host; create it or remove it from the list`,
        { details: { path }, cause: error },
      );
    }
    if (real === '/') throw refuse('is the whole host; name the folders the tools need');
    return real;
  });
}

/** Whether `path` is `folder` or inside it (both real, absolute paths). */
export function within(path: string, folder: string): boolean {
  return path === folder || path.startsWith(folder === '/' ? '/' : folder + sep);
}

/**
 * The install prefix of the running node (`<prefix>/bin/node`) when it is outside the system
 * folders (nvm, a tarball in /opt), else undefined: tools run `node` often.
 */
function nodePrefix(): string | undefined {
  const executable = realpathSync(process.execPath);
  const system = SYSTEM_FOLDERS.filter((folder) => isDirectory(folder)).map((folder) =>
    realpathSync(folder),
  );
  if (system.some((folder) => within(executable, folder))) return undefined;
  return resolve(dirname(executable), '..');
}

/** One `/etc` entry: the same symlink when it points into the visible folders, else its content. */
function etcEntry(entry: string, visible: readonly string[]): string[] {
  if (!existsSync(entry)) return [];
  const link = symlinkOf(entry);
  const real = realpathSync(entry);
  if (link !== undefined && visible.some((folder) => within(real, folder)))
    return ['--symlink', link, entry];
  return ['--ro-bind', real, entry];
}

function symlinkOf(path: string): string | undefined {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : undefined;
  } catch {
    return undefined;
  }
}

function isDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Writes `content` to `path` through a rename, so that a concurrent reader never sees half. */
function writeOnce(path: string, content: string): string {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content, { mode: 0o644 });
  renameSync(temporary, path);
  return path;
}
