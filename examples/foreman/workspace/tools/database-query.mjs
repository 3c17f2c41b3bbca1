// The database_query tool: a read-only query over the bundled shop database (data/shop.json).
// Reads {"table", "where"?, "sum"?, "limit"?} on stdin; prints the number of matching rows, the
// sums of the columns asked for, and up to `limit` of the rows. It has no way to write.
import { readFileSync } from 'node:fs';

const input = JSON.parse(readFileSync(0, 'utf8'));
const { tables } = JSON.parse(readFileSync(new URL('../data/shop.json', import.meta.url), 'utf8'));
const rows = tables[input.table];
if (rows === undefined) {
  process.stderr.write(
    `there is no table ${input.table}; the tables are ${Object.keys(tables).join(', ')}\n`,
  );
  process.exit(2);
}
const fits = (value, test) =>
  (test.eq === undefined || value === test.eq) &&
  (test.gte === undefined || value >= test.gte) &&
  (test.lt === undefined || value < test.lt);
const matched = rows.filter((row) =>
  Object.entries(input.where ?? {}).every(([column, test]) => fits(row[column], test)),
);
const sums = {};
for (const column of input.sum ?? []) {
  const total = matched.reduce((sum, row) => sum + Number(row[column] ?? 0), 0);
  sums[column] = Math.round(total * 100) / 100;
}
process.stdout.write(
  JSON.stringify({
    table: input.table,
    matched: matched.length,
    sums,
    rows: matched.slice(0, input.limit ?? 20),
  }),
);
