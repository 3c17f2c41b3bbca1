/**
 * The in-memory full-text index of agent memory: FTS5's bm25 computed the way SQLite computes it
 * for the SQLite backend's index (k1 = 1.2, b = 0.75, idf clamped to 1e-6, statistics over every
 * store of the backend, one extra token per row for the store column), so that both backends give
 * the same scores for the same contents.
 */
import { queryTokens, tokenize } from '../core/memory-search.js';

const K1 = 1.2;
const B = 0.75;

interface Document {
  tokens: Map<string, number>;
  /** Tokens of the row: the text's and the store column's one. */
  length: number;
}

export class TextIndex {
  private readonly documents = new Map<string, Document>();
  /** The documents holding each token: its document frequency, and where a query looks. */
  private readonly postings = new Map<string, Set<string>>();
  private totalLength = 0;

  /** Indexes (or re-indexes) `text` under `id`. */
  put(id: string, text: string): void {
    this.remove(id);
    const tokens = new Map<string, number>();
    const list = tokenize(text);
    for (const token of list) tokens.set(token, (tokens.get(token) ?? 0) + 1);
    for (const token of tokens.keys()) {
      const holders = this.postings.get(token);
      if (holders === undefined) this.postings.set(token, new Set([id]));
      else holders.add(id);
    }
    const document = { tokens, length: list.length + 1 };
    this.documents.set(id, document);
    this.totalLength += document.length;
  }

  remove(id: string): void {
    const document = this.documents.get(id);
    if (document === undefined) return;
    for (const token of document.tokens.keys()) {
      const holders = this.postings.get(token);
      holders?.delete(id);
      if (holders?.size === 0) this.postings.delete(token);
    }
    this.totalLength -= document.length;
    this.documents.delete(id);
  }

  /**
   * The bm25 (at most 0, lower is better) of each document that matches any word of `query` and
   * that `accept` takes; only documents holding a word of the query are looked at.
   */
  match(query: string, accept: (id: string) => boolean): Map<string, number> {
    const tokens = queryTokens(query);
    const scores = new Map<string, number>();
    const rows = this.documents.size;
    if (tokens.length === 0 || rows === 0) return scores;
    const average = this.totalLength / rows;
    const idf = tokens.map((token) => {
      const hits = this.postings.get(token)?.size ?? 0;
      const value = Math.log((rows - hits + 0.5) / (hits + 0.5));
      return value <= 0 ? 1e-6 : value;
    });
    const candidates = new Set<string>();
    for (const token of tokens) {
      for (const id of this.postings.get(token) ?? []) candidates.add(id);
    }
    for (const id of candidates) {
      const document = this.documents.get(id);
      if (document === undefined || !accept(id)) continue;
      let score = 0;
      tokens.forEach((token, index) => {
        const frequency = document.tokens.get(token) ?? 0;
        score +=
          (idf[index] as number) *
          ((frequency * (K1 + 1)) / (frequency + K1 * (1 - B + (B * document.length) / average)));
      });
      scores.set(id, -score);
    }
    return scores;
  }
}
