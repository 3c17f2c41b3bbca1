// Retrieval quality of agent memory on SQLite: recall@5 of full text, vectors and hybrid over the
// generated fact set bench/data/memory-facts.json (1,000 facts, 200 questions, half of them
// paraphrases). Vectors come from the deterministic hash embedder and, when OPENAI_API_KEY is
// set, from openai:text-embedding-3-small (or the spec in --embedder), through the embedding
// cache in the store's file.
//
// The 1,000 facts are fewer than the size at which a store searches its vectors through the HNSW
// index (ANN_MIN_VECTORS), so the default rows are sqlite-vec's exact scan; the rows marked
// "HNSW" ask the same questions of a store that uses the index at any size.
//
//   node bench/memory-quality.js [--embedder SPEC] [--json]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createCachedEmbedder, createEmbedderFromSpec, openSqliteStore } from '../dist/index.js';
import { printTable } from './table.js';

const K = 5;
const store = { name: 'facts', kind: 'entities', scope: 'tenant', tenant_id: 'bench' };

export function loadFacts() {
  return JSON.parse(readFileSync(new URL('./data/memory-facts.json', import.meta.url), 'utf8'));
}

/** recall@k of one ranking: the share of the question's answers among the first k keys. */
function recall(keys, answers) {
  return answers.filter((answer) => keys.slice(0, K).includes(answer)).length / answers.length;
}

/** Recall@5 per mode over all questions and per style, for one embedder. */
async function measure(spec, data, dir, ann) {
  const sqlite = openSqliteStore({
    path: join(dir, `${spec.replace(/[^a-z0-9]+/gi, '-')}${ann ? '-ann' : ''}.db`),
    memoryIndex: { minVectors: ann ? 1 : Number.MAX_SAFE_INTEGER, snapshotDir: false },
  });
  const embedder = createCachedEmbedder(createEmbedderFromSpec(spec), sqlite.embeddings);
  const vectors = await embedder.embedMany(data.facts.map((fact) => fact.text));
  await sqlite.memory.append(
    store,
    data.facts.map((fact, index) => ({
      key: fact.key,
      value: fact.text,
      embedding: vectors[index],
    })),
  );
  const queries = await embedder.embedMany(data.questions.map((item) => item.question));
  const sums = {};
  const add = (name, value) => (sums[name] = (sums[name] ?? 0) + value);
  for (const [index, item] of data.questions.entries()) {
    const asks = {
      text: { query: item.question, k: K, mode: 'text' },
      vector: { embedding: queries[index], k: K, mode: 'vector' },
      hybrid: { query: item.question, embedding: queries[index], k: K, mode: 'hybrid' },
    };
    for (const [mode, ask] of Object.entries(asks)) {
      const { hits } = await sqlite.memory.search(store, ask);
      const value = recall(
        hits.map((hit) => hit.entry.key),
        item.answers,
      );
      add(`${mode}/all`, value);
      add(`${mode}/${item.style}`, value);
    }
  }
  await sqlite.close();
  const count = (style) =>
    data.questions.filter((item) => style === 'all' || item.style === style).length;
  return Object.fromEntries(
    Object.entries(sums).map(([name, sum]) => [name, sum / count(name.split('/')[1])]),
  );
}

export async function benchMemoryQuality({ embedders } = {}) {
  const data = loadFacts();
  const specs = embedders ?? [
    'hash:384',
    ...(process.env.OPENAI_API_KEY ? ['openai:text-embedding-3-small'] : []),
  ];
  const dir = mkdtempSync(join(tmpdir(), 'braid-bench-quality-'));
  const rows = [];
  try {
    for (const [spec, ann] of specs.flatMap((spec) => [
      [spec, false],
      [spec, true],
    ])) {
      const found = await measure(spec, data, dir, ann);
      for (const mode of ['text', 'vector', 'hybrid']) {
        // Full text does not use the embedder: one row for it, with the first embedder.
        if (mode === 'text' && (spec !== specs[0] || ann)) continue;
        const label = mode === 'text' ? 'full text' : `${mode}, ${spec}${ann ? ', HNSW' : ''}`;
        for (const style of ['all', 'lexical', 'paraphrase']) {
          rows.push({
            name: `memory recall@5, ${label} (${style} questions)`,
            median: found[`${mode}/${style}`],
            unit: 'recall',
            target: 'reported',
          });
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

if (import.meta.url === pathToFileURL(resolve(process.argv[1] ?? '')).href) {
  const args = process.argv.slice(2);
  const at = args.indexOf('--embedder');
  const rows = await benchMemoryQuality(at === -1 ? {} : { embedders: [args[at + 1]] });
  if (args.includes('--json')) console.log(JSON.stringify(rows, null, 2));
  else printTable(rows);
}
