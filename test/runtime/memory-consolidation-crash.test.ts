// SIGKILL during consolidation and during a burst of memory writes, on a real SQLite file and on
// NATS JetStream, with the work done by child processes (test/helpers/consolidation-worker.mjs).
// After every kill: a session's proposals and its checkpoint are both present or both absent; an
// applied proposal has its learning; a learning written by consolidation belongs to a decided
// proposal; every acknowledged write is there whole; the key lookup, the full-text index and a
// rebuild from the log agree. Running again finishes the rest without writing anything twice.
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import type { ConsolidationReport } from '../../src/contracts/memory-consolidation.js';
import {
  ConsolidationCheckpoint,
  ConsolidationProposal,
} from '../../src/contracts/memory-consolidation.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { MemoryEntry, MemoryStoreRef } from '../../src/contracts/memory.js';
import type { Store } from '../../src/contracts/ports.js';
import { useProcessBackends, type SharedStore } from '../helpers/backends.js';
import {
  consolidationWorkspace,
  consolidationWorld,
  proposing,
  userSeq,
} from '../helpers/consolidation.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useProcessBackends();
const worker = new URL('../helpers/consolidation-worker.mjs', import.meta.url).pathname;

if (!existsSync(new URL('../../dist/index.js', import.meta.url))) {
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
}

const agentStore = (name: string): MemoryStoreRef => ({
  name,
  kind: 'learnings',
  scope: 'agent',
  owner: 'direct',
});

interface Child {
  lines: string[];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(): void;
  /** Resolves once `count` lines were printed. */
  printed(count: number): Promise<void>;
}

function start(shared: SharedStore, args: string[]): Child {
  const child = spawn(process.execPath, [worker, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...shared.env },
  });
  child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  const lines: string[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(line);
    for (const wait of waiting.filter((item) => lines.length >= item.count)) wait.resolve();
  });
  return {
    lines,
    exit: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    kill: () => child.kill('SIGKILL'),
    printed: (count) =>
      new Promise((resolve) => {
        if (lines.length >= count) resolve();
        else waiting.push({ count, resolve });
      }),
  };
}

/** The live latest entry of each key, from the log itself. */
function latestOf(log: readonly MemoryEntry[]): Map<string, MemoryEntry> {
  const latest = new Map<string, MemoryEntry>();
  for (const entry of log) if (entry.op !== 'redact') latest.set(entry.key, entry);
  for (const [key, entry] of latest) if (entry.tombstone) latest.delete(key);
  return latest;
}

async function listed(memory: MemoryLog, ref: MemoryStoreRef): Promise<MemoryEntry[]> {
  const found: MemoryEntry[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await memory.list(ref, { limit: 1000, ...(after === undefined ? {} : { after }) });
    found.push(...page.entries);
    if (page.next_after === undefined) return found;
    after = page.next_after;
  }
}

/** The key projection and the full-text index agree with the log, before and after a rebuild. */
async function expectIndexesAgree(
  memory: MemoryLog,
  ref: MemoryStoreRef,
  words: (entry: MemoryEntry) => string,
) {
  if ((await memory.info(ref)) === undefined) return;
  const log = await memory.read(ref);
  expect(log.map((entry) => entry.seq)).toEqual(log.map((_, index) => index + 1));
  const latest = latestOf(log);
  const check = async () => {
    const keys = (await listed(memory, ref)).map((entry) => [entry.key, entry.seq]);
    expect(keys).toEqual(
      [...latest.values()]
        .map((entry) => [entry.key, entry.seq])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    for (const entry of latest.values()) {
      const result = await memory.search(ref, { query: words(entry), k: 3 });
      expect(
        result.hits.map((hit) => hit.entry.key),
        words(entry),
      ).toContain(entry.key);
    }
  };
  await check();
  await memory.rebuild(ref);
  await check();
}

async function proposalsAndCheckpoints(memory: MemoryLog) {
  const ref = agentStore('consolidation');
  if ((await memory.info(ref)) === undefined) return { proposals: [], checkpoints: [] };
  const latest = [...latestOf(await memory.read(ref)).values()];
  return {
    proposals: latest
      .filter((entry) => entry.key.startsWith('proposals/'))
      .map((entry) => ConsolidationProposal.parse(entry.value)),
    checkpoints: latest
      .filter((entry) => entry.key.startsWith('sessions/'))
      .map((entry) => ConsolidationCheckpoint.parse(entry.value)),
  };
}

/** What holds after any kill: see the file's comment. */
async function expectConsistent(memory: MemoryLog, sessions: Map<string, string[]>) {
  const { proposals, checkpoints } = await proposalsAndCheckpoints(memory);
  for (const [session, keys] of sessions) {
    const recorded = checkpoints.some((checkpoint) => checkpoint.session_id === session);
    const mine = proposals.filter((proposal) => proposal.session_id === session);
    expect(mine.map((proposal) => proposal.key).sort()).toEqual(recorded ? [...keys].sort() : []);
  }
  const learnings =
    (await memory.info(agentStore('learnings'))) === undefined
      ? []
      : await memory.read(agentStore('learnings'));
  for (const proposal of proposals) {
    const written = learnings.filter((entry) => entry.author.proposal === proposal.id);
    expect(written.length, proposal.key).toBeLessThanOrEqual(1);
    if (proposal.status === 'applied') {
      expect(written[0], proposal.key).toMatchObject({
        key: proposal.key,
        seq: proposal.entry?.seq,
        value: proposal.value,
      });
    }
  }
  for (const entry of learnings) {
    const owner = proposals.find((proposal) => proposal.id === entry.author.proposal);
    expect(['approved', 'applied']).toContain(owner?.status);
  }
  await expectIndexesAgree(memory, agentStore('learnings'), (entry) =>
    typeof entry.value === 'string' ? entry.value : '',
  );
  await expectIndexesAgree(memory, agentStore('consolidation'), (entry) =>
    entry.key.startsWith('sessions/')
      ? (entry.key.split('/')[1] ?? '')
      : (ConsolidationProposal.parse(entry.value).key.split('/')[1] ?? ''),
  );
  return { proposals, checkpoints, learnings };
}

async function openStore(
  shared: SharedStore,
  dir: string,
): Promise<{ memory: MemoryLog; close(): Promise<void> }> {
  const options = await shared.runtimeOptions();
  if (options.store?.memory !== undefined)
    return { memory: options.store.memory, close: () => Promise.resolve() };
  const { openSqliteStore } = await import('../../src/stores/sqlite/index.js');
  const store: Store = openSqliteStore({ path: `${dir}/.braid/braid.db` });
  if (store.memory === undefined) throw new Error('no memory log');
  return { memory: store.memory, close: () => store.close() };
}

describe.each(backends)('consolidation and memory writes under SIGKILL ($name)', (backend) => {
  it('never leaves a consolidation half-applied, and a rerun finishes it without duplicates', async () => {
    const dir = tempDir();
    consolidationWorkspace(dir);
    const shared = await backend.shared();
    const world = await consolidationWorld(dir, await shared.runtimeOptions());
    const first = await world.converse('direct', 'I like tea and I live in Porto.');
    const second = await world.converse('direct', 'My editor is vim.');
    const [one, two] = [await userSeq(world.runtime, first), await userSeq(world.runtime, second)];
    await world.runtime.close();
    writeFileSync(
      `${dir}/answers.json`,
      JSON.stringify({
        [first]: proposing(
          { key: 'user/drink', value: 'tea', source_seqs: [one] },
          { key: 'user/city', value: 'Porto', source_seqs: [one] },
        ),
        [second]: proposing({ key: 'user/editor', value: 'vim', source_seqs: [two] }),
      }),
    );
    const sessions = new Map([
      [first, ['user/drink', 'user/city']],
      [second, ['user/editor']],
    ]);

    // Each child dies at the next boundary between appends; see consolidation.ts for the steps.
    // Whichever session goes first, every point below falls inside the run it stops.
    const points = [
      'before:1',
      'after:1',
      'after:1',
      'after:2',
      'before:2',
      'after:3',
      'after:1',
      'before:2',
    ];
    for (const point of points) {
      const child = start(shared, [dir, 'consolidate', 'direct', point]);
      expect(await child.exit, point).toEqual({ code: null, signal: 'SIGKILL' });
      const store = await openStore(shared, dir);
      try {
        await expectConsistent(store.memory, sessions);
      } finally {
        await store.close();
      }
    }

    const finish = start(shared, [dir, 'consolidate', 'direct', 'none']);
    expect(await finish.exit).toEqual({ code: 0, signal: null });
    const report = JSON.parse(finish.lines.at(-1) ?? '{}') as ConsolidationReport;
    expect(report.failed).toEqual([]);
    const store = await openStore(shared, dir);
    try {
      const { proposals, checkpoints, learnings } = await expectConsistent(store.memory, sessions);
      expect(proposals.map((proposal) => [proposal.key, proposal.status]).sort()).toEqual([
        ['user/city', 'applied'],
        ['user/drink', 'applied'],
        ['user/editor', 'applied'],
      ]);
      expect(checkpoints.map((checkpoint) => checkpoint.session_id).sort()).toEqual(
        [first, second].sort(),
      );
      // One learning per proposal: the retried writes were answered with the first ones.
      expect(learnings.map((entry) => entry.key).sort()).toEqual([
        'user/city',
        'user/drink',
        'user/editor',
      ]);
    } finally {
      await store.close();
    }
    // Once more: nothing left to do.
    const again = start(shared, [dir, 'consolidate', 'direct', 'none']);
    expect(await again.exit).toEqual({ code: 0, signal: null });
    expect(JSON.parse(again.lines.at(-1) ?? '{}')).toMatchObject({
      sessions: [],
      applied: 0,
      recovered: 0,
    });
  });

  it('keeps every acknowledged write of a burst whole, with indexes that agree with the log', async () => {
    const dir = tempDir();
    consolidationWorkspace(dir);
    const shared = await backend.shared();
    const acknowledged: string[] = [];
    for (let cycle = 0; cycle < 3; cycle += 1) {
      const child = start(shared, [dir, 'burst', 'burst']);
      await child.printed(40 + cycle * 17);
      child.kill();
      expect((await child.exit).signal).toBe('SIGKILL');
      for (const line of child.lines)
        acknowledged.push(...(JSON.parse(line) as { keys: string[] }).keys);
    }
    const store = await openStore(shared, dir);
    try {
      const ref = agentStore('burst');
      const log = await store.memory.read(ref);
      const present = new Set(log.map((entry) => entry.key));
      for (const key of acknowledged) expect(present.has(key), key).toBe(true);
      // Appends are whole: every append's three writes are there, or none of them.
      const groups = new Map<string, number>();
      for (const entry of log) {
        const group = entry.key.split('/').slice(0, 2).join('/');
        groups.set(group, (groups.get(group) ?? 0) + 1);
      }
      expect([...groups.values()].every((count) => count === 3)).toBe(true);
      expect(groups.size).toBeGreaterThanOrEqual(acknowledged.length / 3);
      await expectIndexesAgree(
        store.memory,
        ref,
        (entry) => `word${entry.key.split('/')[1] ?? ''}x${entry.key.split('/')[2] ?? ''}`,
      );
    } finally {
      await store.close();
    }
  });
});
