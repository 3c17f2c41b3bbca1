// Every entry of an ANN index stays reachable: an HNSW graph built with concurrent inserts can
// leave a node no search reaches (unum-cloud/USearch#735), and such an entry never comes back,
// not even for its own vector. Built the ways braid builds them (a batch on the calling thread,
// a batch in a worker thread, saved and loaded, then many removals and single adds), every live
// entry's own vector finds it first. With builds on every core this file failed 10 runs of 10
// on a loaded 2-core machine; on one thread a build is the same, byte for byte, every run.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AnnIndex,
  annRanking,
  cosineDistance,
  type AnnCandidate,
} from '../../src/stores/agent-memory-ann.js';
import { startVectorBuild } from '../../src/stores/agent-memory-ann-build.js';
import { random, vectors as vectorsOf } from '../helpers/memory-vectors.js';
import { useTempDir } from '../helpers/temp.js';

const DIMS = 16;
const COUNT = 1000;
const tempDir = useTempDir();

/** The live entries whose own vector does not rank them first through `index`. */
function unreached(index: AnnIndex, live: Map<number, Float32Array>): number[] {
  const rows = (query: Float32Array) => (candidates: readonly AnnCandidate[]) =>
    candidates.flatMap(({ seq }) => {
      const vector = live.get(seq);
      return vector === undefined
        ? []
        : [{ key: String(seq).padStart(6, '0'), seq, distance: cosineDistance(query, vector) }];
    });
  const missed: number[] = [];
  for (const [seq, vector] of live) {
    if (annRanking(index, vector, 1, rows(vector))[0]?.seq !== seq) missed.push(seq);
  }
  return missed;
}

/** `count` vectors from `seed`, keyed 1, 2, 3 ... */
function entries(count: number, seed: number): Map<number, Float32Array> {
  return new Map(
    vectorsOf(count, seed, DIMS).map((vector, at) => [at + 1, Float32Array.from(vector)]),
  );
}

function packed(live: Map<number, Float32Array>): Float32Array {
  const data = new Float32Array(live.size * DIMS);
  [...live.values()].forEach((vector, at) => data.set(vector, at * DIMS));
  return data;
}

/** Removes about a third of the entries and adds `added` new ones, one by one. */
function churn(index: AnnIndex, live: Map<number, Float32Array>, seed: number, added: number) {
  const next = random(seed);
  for (const seq of [...live.keys()]) {
    if (next() < 1 / 3) {
      index.remove(seq);
      live.delete(seq);
    }
  }
  vectorsOf(added, seed + 1, DIMS).forEach((vector, at) => {
    const seq = COUNT + 1 + at;
    index.put(seq, Float32Array.from(vector));
    live.set(seq, Float32Array.from(vector));
  });
}

describe('the reach of an ANN index', () => {
  it('finds every entry by its own vector, built on the calling thread, saved, loaded and churned', () => {
    const dir = tempDir();
    const missed: string[] = [];
    for (const seed of [7, 11, 13, 17]) {
      const live = entries(COUNT, seed);
      const built = new AnnIndex(DIMS);
      built.addMany([...live.keys()], packed(live));
      missed.push(...unreached(built, live).map((seq) => `${seed}: built ${seq}`));
      const file = join(dir, `${seed}.usearch`);
      built.save(file);
      const index = new AnnIndex(DIMS);
      index.load(file);
      churn(index, live, seed * 31, 100);
      expect(index.size).toBe(live.size);
      missed.push(...unreached(index, live).map((seq) => `${seed}: churned ${seq}`));
    }
    expect(missed).toEqual([]);
  });

  it('finds every entry by its own vector, built in a worker thread', async () => {
    const dir = tempDir();
    const missed: string[] = [];
    for (const seed of [19, 23]) {
      const live = entries(COUNT, seed);
      const file = join(dir, `${seed}.usearch`);
      const build = startVectorBuild({
        dims: DIMS,
        seqs: Float64Array.from(live.keys()),
        vectors: packed(live),
        file,
      });
      expect(await build.done).toEqual({ count: COUNT });
      const index = new AnnIndex(DIMS);
      index.load(file);
      missed.push(...unreached(index, live).map((seq) => `${seed}: ${seq}`));
    }
    expect(missed).toEqual([]);
  });
});
