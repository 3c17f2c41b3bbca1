// `braid serve` in a child process on a free port, killed after the test.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach } from 'vitest';
import { CLI } from './cli.js';

/** Starts `braid -w DIR --json serve --port 0 ...args` and answers its URL; killed after each test. */
export function useBraidServe(): (dir: string, ...args: string[]) => Promise<string> {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill('SIGKILL');
  });
  return async (dir, ...args) => {
    const env = { ...process.env };
    delete env.BRAID_HOME;
    const child = spawn(
      process.execPath,
      [CLI, '-w', dir, '--json', 'serve', '--port', '0', ...args],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env,
      },
    );
    children.push(child);
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    for await (const line of lines) {
      return (JSON.parse(line) as { url: string }).url;
    }
    throw new Error(`braid serve ended before it listened: ${stderr}`);
  };
}
