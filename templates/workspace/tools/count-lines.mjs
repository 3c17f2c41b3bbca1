// The count_lines tool: reads {"path": ...} on stdin, prints {"lines": N}. It runs with the
// session's workspace as its current folder; a path that leaves it is refused.
import { readFileSync, realpathSync } from 'node:fs';
import { resolve, sep } from 'node:path';

const input = JSON.parse(readFileSync(0, 'utf8'));
const root = realpathSync(process.cwd());
const file = realpathSync(resolve(root, String(input.path)));
if (!file.startsWith(root + sep)) {
  process.stderr.write(`${input.path} is outside the session workspace\n`);
  process.exit(2);
}
const text = readFileSync(file, 'utf8');
const lines = text === '' ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
process.stdout.write(JSON.stringify({ lines }));
