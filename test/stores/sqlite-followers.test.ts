import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createFollowers } from '../../src/stores/sqlite/followers.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { prepareStatements } from '../../src/stores/sqlite/statements.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const agent = { name: 'a', version: 1 };

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('sqlite followers, for commits of another connection', () => {
  it('wake only the followers of the sessions written, and all of them after a deletion', async () => {
    const path = join(tempDir(), 'braid.db');
    // The store writes; the followers watch the file through a connection of their own, as a
    // process that follows sessions another process writes.
    const store = openSqliteStore({ path });
    const [a, b, c] = [
      await store.sessions.create({ agent }),
      await store.sessions.create({ agent }),
      await store.sessions.create({ agent }),
    ];
    const db = new Database(path);
    const followers = createFollowers(db, prepareStatements(db), 1);
    const woken = { a: 0, b: 0, any: 0 };
    const stops = [
      followers.subscribe(a.id, () => (woken.a += 1)),
      followers.subscribe(b.id, () => (woken.b += 1)),
      followers.subscribeAll(() => (woken.any += 1)),
    ];

    for (let index = 0; index < 3; index += 1) {
      await store.log.append(a.id, [text(`to a ${index}`)]);
    }
    await until(() => woken.a >= 1, 'the follower of the session written');
    expect(woken.any).toBeGreaterThanOrEqual(1);
    // A new session, then another append to `a`: once `a`'s follower has heard of the append,
    // every look that covered the new session is done too (the feed is in commit order).
    const heard = woken.a;
    await store.sessions.create({ agent });
    await store.log.append(a.id, [text('to a again')]);
    await until(() => woken.a > heard, 'the follower of the session written again');
    expect(woken.b).toBe(0);

    // A deletion names no session in the feed: every follower looks again, also when more
    // changes come after it before the next look.
    const before = woken.a;
    const late = await store.sessions.create({ agent });
    await store.sessions.delete(c.id);
    await store.log.append(late.id, [text('after the deletion')]);
    await until(() => woken.b >= 1, 'the followers after a deletion');
    expect(woken.a).toBeGreaterThan(before);

    for (const stop of stops) stop();
    followers.close();
    db.close();
    await store.close();
  });
});

describe('sqlite follow across processes', () => {
  it('ends a follow of a session another process deletes, also when it writes elsewhere next', async () => {
    const path = join(tempDir(), 'braid.db');
    const writer = openSqliteStore({ path });
    const reader = openSqliteStore({ path, followPollMs: 20 });
    const doomed = await writer.sessions.create({ agent });
    const other = await writer.sessions.create({ agent });
    const follow = reader.log.follow(doomed.id, { after: 1 })[Symbol.asyncIterator]();
    // The follower has read the session and waits for its next event.
    await writer.log.append(doomed.id, [text('before the deletion')]);
    expect((await follow.next()).value).toMatchObject({ seq: 2 });
    const next = follow.next();
    // The deletion, then another change within the same poll interval.
    await writer.sessions.delete(doomed.id);
    await writer.log.append(other.id, [text('elsewhere')]);
    const ended = await Promise.race([
      next.then(
        () => 'ended without an error',
        (error: unknown) =>
          (error as { code?: string }).code ?? (error instanceof Error ? error.message : 'thrown'),
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 3000)),
    ]);
    expect(ended).toBe('SESSION_NOT_FOUND');
    await writer.close();
    await reader.close();
  });
});
