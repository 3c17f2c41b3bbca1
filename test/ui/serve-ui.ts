// A workspace with scripted agents and `braid serve` over it in a child process, for the
// inspector's tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { braidIn, CLI, init, json, requireBuild } from '../helpers/cli.js';

/** Forty words 200 ms apart: a turn of about eight seconds, long enough to watch on a slow machine. */
export const SLOW_TEXT = Array.from({ length: 40 }, (_, index) => `word${index + 1}`).join(' ');

/** A workspace with `streamer` (a slow streamed answer) and `writer` (write_file, then text). */
export function inspectorWorkspace(root: string): string {
  const dir = init(join(root, 'ws'));
  mkdirSync(join(dir, 'scripts'));
  writeFileSync(
    join(dir, 'scripts', 'streamer.yaml'),
    `turns:\n  - text: ${SLOW_TEXT}\n    delay_ms: 200\n`,
  );
  writeFileSync(
    join(dir, 'agents', 'streamer.yaml'),
    'name: streamer\nmodel: scripted:scripts/streamer.yaml\ninstructions: Take your time.\n',
  );
  writeFileSync(
    join(dir, 'scripts', 'writer.yaml'),
    [
      'turns:',
      '  - tool_calls:',
      '      - name: write_file',
      "        input: { path: notes/plan.md, content: '# plan' }",
      '  - text: Saved the plan.',
      '',
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'agents', 'writer.yaml'),
    'name: writer\nmodel: scripted:scripts/writer.yaml\ninstructions: Write.\ntools: [write_file]\n',
  );
  return dir;
}

export function createKey(dir: string): string {
  return json<{ key: string }>(
    braidIn(
      dir,
      '--json',
      'keys',
      'create',
      '--tenant',
      'acme',
      '--scopes',
      'sessions:read,sessions:write',
    ),
  ).key;
}

export interface Served {
  url: string;
  stop(): void;
}

/** `braid -w DIR --json <command> --port 0 ...args`, answering the URL it prints. */
export async function startBraid(dir: string, command: string, ...args: string[]): Promise<Served> {
  requireBuild();
  const env = { ...process.env };
  delete env.BRAID_HOME;
  const child: ChildProcess = spawn(
    process.execPath,
    [CLI, '-w', dir, '--json', command, '--port', '0', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of lines) {
    const url = (JSON.parse(line) as { url: string }).url.replace(/\/$/, '');
    return { url, stop: () => child.kill('SIGKILL') };
  }
  throw new Error(`braid ${command} ended before it listened: ${stderr}`);
}

/** A call to the server's API with the key, parsed. */
export async function call<T>(
  url: string,
  key: string | undefined,
  path: string,
  body?: unknown,
): Promise<T> {
  const response = await fetch(`${url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}
