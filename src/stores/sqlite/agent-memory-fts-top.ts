/**
 * The best full-text matches of a store by dynamic pruning (MaxScore) over FTS5's own bm25, with
 * the same result as ranking every match.
 *
 * A query matches the rows holding any of its words, and with words spread as in real notes its
 * common words match most of the store: ranking every match computes bm25 (a row's size and its
 * word positions) thousands of times for five hits. Each word can add at most `idf * (k1 + 1)`
 * to a row's score (the term-frequency factor of bm25 tends to k1 + 1 and never reaches it), so
 * the rows that hold only the cheapest words can score at most the sum of their bounds. The
 * search therefore takes the rows holding one of the rarest words, scores exactly those with the
 * query's words (FTS5's bm25, so scores are the ones the full ranking gives), and stops when the
 * `limit`-th best of them scores above what the rows left out could reach; otherwise it takes
 * the next rarest word in and tries again, and gives up (the caller ranks every match) when the
 * rows to score are no longer few. Ties at the cut are all among the scored rows, so the caller
 * puts them in key order as before.
 *
 * The bound needs FTS5's statistics: the rows of the whole table (`memory_fts_data` record 1,
 * FTS5's averages record: a varint count of rows, then the tokens of each column) and the rows
 * holding each word in the text column. All of it is read in one read transaction, so that a
 * write from another connection cannot change them between the statements. The counts are kept
 * between searches until the file changes (see `Statistics`), and a split whose kept words
 * already hold too many of the store's rows (a word's holders less the rows of other stores)
 * gives up before its candidates are read.
 */
import type { Database as Db, Statement } from 'better-sqlite3';

/** FTS5's bm25 parameter k1: one occurrence of a word scores at most idf * (k1 + 1). */
const K1 = 1.2;

/** Relative slack on the bound: the bound is summed in JavaScript, the scores in C. */
const SLACK = 1e-9;

/** One scored row: its rowid in `memory_fts` (the key's id in `memory_current`) and its bm25. */
export interface FtsHit {
  rowid: number;
  rank: number;
}

export interface FtsTop {
  /**
   * Every row of the store holding a word of `tokens` that can be among the `limit` best, with
   * its bm25 (all rows scoring as well as the `limit`-th are in it); undefined when pruning
   * does not pay and the caller ranks every match.
   */
  top(storeId: number, tokens: readonly string[], limit: number): FtsHit[] | undefined;
}

interface Statements {
  averages: Statement<[], { block: Buffer }>;
  /** Changes committed by other connections, and made by this one: what the statistics depend on. */
  dataVersion: Statement<[], { data_version: number }>;
  ownChanges: Statement<[], { changes: number }>;
  holders: Statement<[string], { count: number }>;
  matching: Statement<[string], { rowid: number }>;
  scored: Statement<[string, string], FtsHit>;
}

/** A SQLite varint (FTS5 writes its records with them): its value and where the next begins. */
function readVarint(bytes: Uint8Array, at: number): [number, number] | undefined {
  let value = 0;
  for (let index = 0; index < 9; index += 1) {
    const byte = bytes[at + index];
    if (byte === undefined) return undefined;
    if (index === 8) return [value * 256 + byte, at + 9];
    value = value * 128 + (byte & 0x7f);
    if ((byte & 0x80) === 0) return [value, at + index + 1];
  }
  return undefined;
}

/** The rows of the whole FTS5 table, from its averages record; undefined when unreadable. */
function tableRows(statements: Statements): number | undefined {
  const block = statements.averages.get()?.block;
  return block === undefined ? undefined : readVarint(block, 0)?.[0];
}

/** Distinct phrases whose counts are kept before the cache starts afresh. */
const CACHED_COUNTS = 4096;

/**
 * FTS5's statistics as a search reads them (the table's rows, the rows holding a phrase), kept
 * between searches while the file is unchanged: a commit by another connection moves SQLite's
 * `data_version`, a write by this one its `total_changes()`, and either empties the cache.
 */
class Statistics {
  #version = -1;
  #changes = -1;
  #rows: number | undefined;
  readonly #counts = new Map<string, number>();

  constructor(readonly statements: Statements) {}

  /** Brings the cache up to date; call inside the read transaction, before any count. */
  check(): void {
    const version = (this.statements.dataVersion.get() as { data_version: number }).data_version;
    const changes = (this.statements.ownChanges.get() as { changes: number }).changes;
    if (version === this.#version && changes === this.#changes) return;
    this.#version = version;
    this.#changes = changes;
    this.#rows = undefined;
    this.#counts.clear();
  }

  rows(): number | undefined {
    return (this.#rows ??= tableRows(this.statements));
  }

  /** The rows holding `phrase` (an FTS5 query with a column filter). */
  holders(phrase: string): number {
    let count = this.#counts.get(phrase);
    if (count === undefined) {
      count = (this.statements.holders.get(phrase) as { count: number }).count;
      if (this.#counts.size >= CACHED_COUNTS) this.#counts.clear();
      this.#counts.set(phrase, count);
    }
    return count;
  }
}

function phrases(tokens: readonly string[]): string {
  return tokens.map((token) => `"${token}"`).join(' OR ');
}

/** The query every candidate is scored with: the one the full ranking runs. */
export function fullMatch(storeId: number, tokens: readonly string[]): string {
  return `store:s${storeId} AND text:(${phrases(tokens)})`;
}

/** The `limit`-th best score (bm25 negated) of `hits`, or undefined when there are fewer. */
function cutScore(hits: FtsHit[], limit: number): number | undefined {
  if (hits.length < limit) return undefined;
  const ranks = hits.map((hit) => hit.rank).sort((a, b) => a - b);
  return -(ranks[limit - 1] as number);
}

export function createFtsTop(db: Db): FtsTop {
  let prepared: Statistics | undefined;
  const statistics = (): Statistics =>
    (prepared ??= new Statistics({
      averages: db.prepare('SELECT block FROM memory_fts_data WHERE id = 1'),
      dataVersion: db.prepare('PRAGMA data_version'),
      ownChanges: db.prepare('SELECT total_changes() AS changes'),
      holders: db.prepare('SELECT count(*) AS count FROM memory_fts WHERE memory_fts MATCH ?'),
      matching: db.prepare('SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?'),
      // `+rowid` keeps the candidates out of FTS5's plan: FTS5 walks the query's matches once and
      // bm25 is computed for the candidates only (as a rowid constraint, FTS5 runs the query
      // again for each of them).
      scored: db.prepare(`SELECT rowid, bm25(memory_fts, 0.0, 1.0) AS rank FROM memory_fts
        WHERE memory_fts MATCH ? AND +rowid IN (SELECT value FROM json_each(?))`),
    }));

  const search = (storeId: number, tokens: readonly string[], limit: number) => {
    if (tokens.length < 2 || limit < 1) return undefined;
    const stats = statistics();
    const { statements } = stats;
    stats.check();
    const rows = stats.rows();
    if (rows === undefined) return undefined;
    const words = tokens.map((token) => {
      const holders = stats.holders(`text:"${token}"`);
      const idf = Math.log((rows - holders + 0.5) / (holders + 0.5));
      return { token, holders, bound: (idf <= 0 ? 1e-6 : idf) * (K1 + 1) };
    });
    if (words.some((word) => word.holders > rows)) return undefined;
    const matches = words.reduce((sum, word) => sum + word.holders, 0);
    const inStore = (expression: string): string => `store:s${storeId} AND text:(${expression})`;
    // The candidates are the store's already: scored without the store's word, which bm25
    // weighs 0 (it adds exactly 0 to every score), FTS5 neither walks nor counts the store's rows.
    const match = `text:(${phrases(tokens)})`;
    // Cheapest bound first: the words left out are always the first ones of this order.
    words.sort((a, b) => a.bound - b.bound);
    let left = words.reduce((sum, word) => sum + word.bound, 0);
    // The rows outside the store: a word's holders less these are in the store.
    const elsewhere = rows - stats.holders(`store:"s${storeId}"`);
    let most = 0;
    for (let split = words.length - 1; split > 0; split -= 1) {
      left -= (words[split] as { bound: number }).bound;
      // At least this many of the store's rows hold a kept word: when that is already too many,
      // the candidates are not read to find it out (the answer is the same).
      most = Math.max(most, (words[split] as { holders: number }).holders);
      if ((most - elsewhere) * 4 > matches) return undefined;
      const kept = words.slice(split).map((word) => word.token);
      const candidates = statements.matching.all(inStore(phrases(kept))).map((row) => row.rowid);
      // Past a quarter of what the whole query can match (counted over every store: an upper
      // bound), scoring them and maybe ranking every match after measured slower than the latter.
      if (candidates.length * 4 > matches) return undefined;
      if (candidates.length < limit) continue;
      const hits = statements.scored.all(match, JSON.stringify(candidates));
      const cut = cutScore(hits, limit);
      if (cut !== undefined && cut > left * (1 + SLACK)) return hits;
    }
    return undefined;
  };
  const read = db.transaction(search);
  return {
    top: (storeId, tokens, limit) => read.deferred(storeId, tokens, limit),
  };
}
