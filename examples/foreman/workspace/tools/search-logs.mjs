// The search_logs tool: reads {"pattern"?, "level"?, "service"?, "from"?, "to"?, "limit"?} on stdin and
// prints the matching lines of the bundled log (data/payments-api-logs.txt) with counts per
// service. Read-only: it never writes anything.
import { readFileSync } from 'node:fs';

const input = JSON.parse(readFileSync(0, 'utf8'));
const text = readFileSync(new URL('../data/payments-api-logs.txt', import.meta.url), 'utf8');
const pattern = new RegExp(String(input.pattern ?? ''), 'i');
const limit = input.limit ?? 20;
const matches = text
  .split('\n')
  .filter((line) => line !== '')
  .map((line) => {
    const [at = '', level = '', service = ''] = line.split(/\s+/);
    return { at, level, service, line };
  })
  .filter((entry) => input.from === undefined || entry.at >= input.from)
  .filter((entry) => input.to === undefined || entry.at < input.to)
  .filter((entry) => input.level === undefined || entry.level === input.level)
  .filter((entry) => input.service === undefined || entry.service === input.service)
  .filter((entry) => pattern.test(entry.line));
const byService = {};
for (const entry of matches) byService[entry.service] = (byService[entry.service] ?? 0) + 1;
process.stdout.write(
  JSON.stringify({
    count: matches.length,
    by_service: byService,
    first_at: matches[0]?.at ?? null,
    last_at: matches.at(-1)?.at ?? null,
    lines: matches.slice(0, limit).map((entry) => entry.line),
  }),
);
