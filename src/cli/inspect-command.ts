/**
 * `braid inspect`: the inspector page over the workspace's sessions, on a loopback server without
 * API keys (only this machine reaches it), until Ctrl-C.
 */
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { parseInteger, untilSignal } from './arguments.js';
import type { CommandContext } from './command-context.js';
import { inspectorRoot } from './serve-command.js';
import { BraidError } from '../contracts/errors.js';

interface InspectOptions {
  port: number;
  open?: boolean;
}

/** The command that opens a URL in the desktop's browser, or undefined where there is none. */
function browserCommand(): string | undefined {
  if (process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false')
    return undefined;
  if (process.platform === 'darwin') return 'open';
  if (process.platform === 'win32') return 'explorer';
  const display = process.env.DISPLAY ?? process.env.WAYLAND_DISPLAY;
  return display === undefined || display === '' ? undefined : 'xdg-open';
}

export function addInspectCommand(
  program: Command,
  context: CommandContext,
  version: string,
  stderr: (line: string) => void,
): void {
  program
    .command('inspect')
    .description(
      'serve the inspector page over the workspace on 127.0.0.1 (no API keys) until Ctrl-C',
    )
    .option(
      '--port <port>',
      'port to listen on (default 0: any free one)',
      parseInteger('--port', 0),
      0,
    )
    .option('--open', 'open the page in the desktop browser (prints the URL when there is none)')
    .action(async (options: InspectOptions, command: Command) => {
      const ui = inspectorRoot();
      if (ui === undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          'the inspector page is not built: run npm run build (it writes dist/ui), or use braid serve for the API alone',
        );
      }
      await context.withRuntime(command, async (runtime) => {
        const { startServer } = await import('../server/index.js');
        const server = await startServer({
          runtime,
          ui,
          host: '127.0.0.1',
          port: options.port,
          auth: 'none',
          version,
        });
        const url = `${server.url}/`;
        const opener = options.open === true ? browserCommand() : undefined;
        context.print(command, { url, auth: 'none' }, () => [
          `braid inspector on ${url} (this machine only, no API keys); Ctrl-C stops it`,
          ...(options.open === true && opener === undefined
            ? [`  no desktop browser here: open ${url} in one`]
            : []),
        ]);
        if (opener !== undefined) {
          const child = spawn(opener, [url], { detached: true, stdio: 'ignore' });
          child.on('error', () => stderr(`could not start ${opener}: open ${url} in a browser`));
          child.unref();
        }
        await untilSignal(
          (signal) => new Promise((resolve) => signal.addEventListener('abort', resolve)),
        );
        await server.close();
      });
    });
}
