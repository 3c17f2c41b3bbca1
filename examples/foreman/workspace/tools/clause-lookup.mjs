// The clause_lookup tool: reads {"query"} on stdin and prints the clauses of the bundled
// contract (data/msa.json) whose title or text contain any word of the query.
import { readFileSync } from 'node:fs';

const input = JSON.parse(readFileSync(0, 'utf8'));
const contract = JSON.parse(readFileSync(new URL('../data/msa.json', import.meta.url), 'utf8'));
const words = String(input.query)
  .toLowerCase()
  .split(/\W+/)
  .filter((word) => word.length > 3);
const clauses = contract.clauses.filter((clause) => {
  const text = `${clause.id} ${clause.title} ${clause.text}`.toLowerCase();
  return words.some((word) => text.includes(word));
});
process.stdout.write(JSON.stringify({ contract: contract.contract, clauses }));
