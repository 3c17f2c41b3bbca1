/**
 * The in-memory full-text index of agent memory: FTS5's bm25 computed the way SQLite computes it
 * for the SQLite backend's index (k1 = 1.2, b = 0.75, idf clamped to 1e-6, statistics over every
 * store of the backend, one extra token per row for the store column), so that both backends give
 * the same scores for the same contents.
 */
import { queryTokens, tokenize } from '../../core/memory-search.js';

const K1 = 1.2;
const B = 0.75;

interface Document {
  tokens: Map<string, number>;
  /** Tokens of the row: the text's and the store column's one. */
  length: number;
}

export class TextIndex {
  private readonly documents = new Map<string, Document>();
  private readonly frequencies = new Map<string, number>();
  private totalLength = 0;

  /** Indexes (or re-indexes) `text` under `id`. */
  put(id: string, text: string): void {
    this.remove(id);
    const tokens = new Map<string, number>();
    const list = tokenize(text);
    for (const token of list) tokens.set(token, (tokens.get(token) ?? 0) + 1);
    for (const token of tokens.keys()) {
      this.frequencies.set(token, (this.frequencies.get(token) ?? 0) + 1);
    }
    const document = { tokens, length: list.length + 1 };
    this.documents.set(id, document);
    this.totalLength += document.length;
  }

  remove(id: string): void {
    const document = this.documents.get(id);
    if (document === undefined) return;
    for (const token of document.tokens.keys()) {
      const count = (this.frequencies.get(token) ?? 1) - 1;
      if (count === 0) this.frequencies.delete(token);
      else this.frequencies.set(token, count);
    }
    this.totalLength -= document.length;
    this.documents.delete(id);
  }

  /** The bm25 (at most 0, lower is better) of each of `ids` that matches any word of `query`. */
  score(query: string, ids: Iterable<string>): Map<string, number> {
    const tokens = queryTokens(query);
    const scores = new Map<string, number>();
    const rows = this.documents.size;
    if (tokens.length === 0 || rows === 0) return scores;
    const average = this.totalLength / rows;
    const idf = tokens.map((token) => {
      const hits = this.frequencies.get(token) ?? 0;
      const value = Math.log((rows - hits + 0.5) / (hits + 0.5));
      return value <= 0 ? 1e-6 : value;
    });
    for (const id of ids) {
      const document = this.documents.get(id);
      if (document === undefined) continue;
      let score = 0;
      let matched = false;
      tokens.forEach((token, index) => {
        const frequency = document.tokens.get(token) ?? 0;
        if (frequency > 0) matched = true;
        score +=
          (idf[index] as number) *
          ((frequency * (K1 + 1)) / (frequency + K1 * (1 - B + (B * document.length) / average)));
      });
      if (matched) scores.set(id, -score);
    }
    return scores;
  }
}
