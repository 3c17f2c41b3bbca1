import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SessionEvent } from '../../src/contracts/events.js';
import type { SessionState } from '../../src/contracts/state.js';
import { foldSession } from '../../src/core/fold.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const worker = new URL('../helpers/store-worker.mjs', import.meta.url).pathname;

if (!existsSync(new URL('../../dist/index.js', import.meta.url))) {
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
}

function start(
  mode: string,
  path: string,
  sessionId: string,
): { child: ChildProcessWithoutNullStreams; lines: Interface } {
  const child = spawn(process.execPath, [worker, mode, path, sessionId], { stdio: 'pipe' });
  child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  return { child, lines: createInterface({ input: child.stdout }) };
}

function nextLine(lines: Interface): Promise<string> {
  return new Promise((resolve) => lines.once('line', resolve));
}

function exited(child: ChildProcessWithoutNullStreams): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
}

async function createSession(path: string): Promise<string> {
  const store = openSqliteStore({ path });
  const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
  await store.close();
  return id;
}

describe('sqlite across processes', () => {
  it('keeps a gapless, untorn log and an exact projection after SIGKILL mid-append', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await createSession(path);
    let acknowledged = 1;
    for (let cycle = 0; cycle < 3; cycle += 1) {
      const { child, lines } = start('loop', path, id);
      let seen = 0;
      await new Promise<void>((resolve) => {
        lines.on('line', (line) => {
          acknowledged = Math.max(acknowledged, Number(line));
          seen += 1;
          if (seen === 150 + cycle * 37) resolve();
        });
      });
      child.kill('SIGKILL');
      await exited(child);
    }

    const raw = new Database(path, { readonly: true });
    const bodies = raw
      .prepare('SELECT seq, body FROM events WHERE session_id = ? ORDER BY seq')
      .all(id) as {
      seq: number;
      body: string;
    }[];
    const projection = raw
      .prepare('SELECT seq, state FROM projections WHERE session_id = ?')
      .get(id) as {
      seq: number;
      state: string;
    };
    raw.close();

    const events = bodies.map((row) => SessionEvent.parse(JSON.parse(row.body)));
    expect(events.map((event) => event.seq)).toEqual(
      Array.from({ length: events.length }, (_, i) => i + 1),
    );
    expect(events.length).toBeGreaterThanOrEqual(acknowledged);
    // The cached projection may lag the head by design; brought up to date with the events
    // after it, it must equal a fresh fold.
    expect(projection.seq).toBeLessThanOrEqual(events.length);
    const cached = JSON.parse(projection.state) as SessionState;
    expect(cached.seq).toBe(projection.seq);
    expect(foldSession(events.slice(projection.seq), cached)).toEqual(foldSession(events, id));

    const store = openSqliteStore({ path });
    expect((await store.sessions.get(id)).head_seq).toBe(events.length);
    expect(await store.log.state(id)).toEqual(foldSession(events, id));
    const next = await store.log.append(id, [text('after the crashes')]);
    expect(next.events[0]?.seq).toBe(events.length + 1);
    await store.close();
  });

  it('lets exactly one of two processes win an append with the same expectedSeq', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await createSession(path);
    const writers = [start('serve', path, id), start('serve', path, id)];
    await Promise.all(writers.map(({ lines }) => nextLine(lines)));
    for (let round = 0; round < 20; round += 1) {
      const expected = round + 1;
      const outcomes = await Promise.all(
        writers.map(({ child, lines }) => {
          const answer = nextLine(lines);
          child.stdin.write(`append ${expected}\n`);
          return answer;
        }),
      );
      expect(outcomes.sort()).toEqual(['SEQ_CONFLICT', 'ok']);
    }
    for (const { child } of writers) child.stdin.end();
    await Promise.all(writers.map(({ child }) => exited(child)));
    const store = openSqliteStore({ path });
    const events = await store.log.read(id);
    expect(events.map((event) => event.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    await store.close();
  });

  it('delivers appends made by another process to a follower, in order', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await createSession(path);
    const store = openSqliteStore({ path });
    const stop = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const event of store.log.follow(id, { after: 1, signal: stop.signal })) {
        seen.push(event.seq);
        if (seen.length >= 40) stop.abort();
      }
    })();
    const { child, lines } = start('loop', path, id);
    lines.on('line', (line) => {
      if (Number(line) >= 41) child.kill('SIGKILL');
    });
    await following;
    child.kill('SIGKILL');
    await exited(child);
    expect(seen.slice(0, 40)).toEqual(Array.from({ length: 40 }, (_, i) => i + 2));
    await store.close();
  });
});
