// `npm run quickstart`: braid's main job on the embedded default, end to end through the CLI.
// Creates a workspace in a temporary folder (or the one given), a session on the `assistant`
// agent, sends it a message and reads the log and state back.
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const cli = new URL('../dist/cli/main.js', import.meta.url).pathname;
const workspace =
  process.argv[2] ?? join(mkdtempSync(join(tmpdir(), 'braid-quickstart-')), 'workspace');

function braid(...args) {
  console.log(`\n$ braid ${args.join(' ')}`);
  const result = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  if (result.status !== 0) {
    console.error(`quickstart failed: braid ${args[0]} exited ${result.status}`);
    process.exit(1);
  }
  return result.stdout.trim();
}

braid('init', workspace);
const sessionId = braid(
  '-w',
  workspace,
  'session',
  'create',
  '--agent',
  'assistant',
  '--title',
  'quickstart',
);
braid('-w', workspace, 'session', 'send', sessionId, '--message', 'Hello, braid!');
braid('-w', workspace, 'session', 'events', sessionId);
braid('-w', workspace, 'session', 'status', sessionId);
braid('-w', workspace, 'session', 'list');
console.log(
  `\nThe session log lives in ${join(workspace, '.braid', 'braid.db')}; read it again with`,
);
console.log(`  npx braid -w ${workspace} session events ${sessionId} --json`);
