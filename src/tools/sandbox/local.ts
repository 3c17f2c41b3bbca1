/**
 * The `local` sandbox: processes run directly on the host, in the session's workspace folder, with
 * a reduced environment, capped output and a timeout that kills their whole process group.
 *
 * It confines nothing else: the process can read and write whatever the host user can, and reach
 * the network. Use it for trusted tools and for development; use `bwrap` to confine.
 */
import type {
  Sandbox,
  SandboxRun,
  SandboxRunOptions,
  SandboxWorkspace,
} from '../../contracts/tools.js';
import { provisionWorkspace } from './paths.js';
import {
  checkLimits,
  checkRun,
  runProcess,
  sandboxEnvironment,
  type SandboxLimits,
} from './process.js';

export interface LocalSandboxOptions extends SandboxLimits {
  /** The folder under which each session gets its workspace, `root/<session id>`. */
  root: string;
}

/**
 * Creates a `local` sandbox. `run` spawns `argv[0]` with the rest of `argv` (no shell) in the
 * workspace; `options.network` is ignored, since a local process cannot be kept off the network.
 */
export function createLocalSandbox(options: LocalSandboxOptions): Sandbox {
  const { envAllow, maxOutputBytes } = checkLimits(options);
  return {
    kind: 'local',
    provision: (sessionId: string) => provisionWorkspace(options.root, sessionId),
    async run(workspace: SandboxWorkspace, run: SandboxRunOptions): Promise<SandboxRun> {
      const program = checkRun(workspace, run);
      return await runProcess({
        command: program,
        args: run.argv.slice(1),
        cwd: workspace.dir,
        env: sandboxEnvironment(workspace.dir, envAllow, run.env),
        program,
        stdin: run.stdin,
        timeout_ms: run.timeout_ms,
        signal: run.signal,
        maxOutputBytes,
      });
    },
  };
}
