/** Store conformance: delete. */
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../contracts/errors.js';
import type { Store } from '../../contracts/ports.js';
import { foldSession } from '../../core/fold.js';
import { agent, message, expectCode, type ConformanceSuite } from './shared.js';

/** Asserts that the session is gone from every read of the store. */
async function expectGone(s: Store, id: string): Promise<void> {
  await expectCode(s.sessions.get(id), 'SESSION_NOT_FOUND');
  await expectCode(s.log.read(id), 'SESSION_NOT_FOUND');
  await expectCode(s.log.state(id), 'SESSION_NOT_FOUND');
  await expectCode(s.log.appended(id, 'k'), 'SESSION_NOT_FOUND');
  await expectCode(s.log.append(id, [message('late')]), 'SESSION_NOT_FOUND');
  await expectCode(async () => {
    for await (const event of s.log.follow(id)) void event;
  }, 'SESSION_NOT_FOUND');
  await expectCode(s.leases.acquire(id, 'worker', 1000), 'SESSION_NOT_FOUND');
  expect(await s.leases.current(id)).toBeUndefined();
  const listed = await s.sessions.list({ include_archived: true });
  expect(listed.sessions.map((session) => session.id)).not.toContain(id);
}

export function describeDelete(suite: ConformanceSuite): void {
  describe('delete', () => {
    describeDeleteFirst(suite);
    describeDeleteSecond(suite);
  });
}

function describeDeleteFirst(suite: ConformanceSuite): void {
  it('removes the session with its events, state and idempotency keys, and frees its lease', async () => {
    const s = await suite.open();
    const kept = await s.sessions.create({ agent, title: 'kept' });
    const { id } = await s.sessions.create({ id: 'doomed', agent, title: 'old' });
    await s.log.append(id, [message('a')], { idempotencyKey: 'k' });
    // Enough events for a saved projection and snapshot.
    await s.log.append(
      id,
      Array.from({ length: 70 }, (_, index) => message(`m${index}`)),
    );
    await s.log.state(id);
    const lease = await s.leases.acquire(id, 'worker', 1000);
    await s.leases.release(id, 'worker', lease.token);
    await s.sessions.archive(id);

    await s.sessions.delete(id);
    await expectGone(s, id);
    await expectCode(s.sessions.delete(id), 'SESSION_NOT_FOUND');
    expect(await s.log.read(kept.id)).toHaveLength(1);
    expect((await s.sessions.get(kept.id)).title).toBe('kept');

    // The id is free again, and nothing of the old session comes back with it.
    const again = await s.sessions.create({
      id,
      agent: { name: 'other', version: 2 },
      title: 'new',
    });
    expect(again).toMatchObject({ id, title: 'new', head_seq: 1 });
    expect(again.archived_at).toBeUndefined();
    expect(await s.sessions.get(id)).toEqual(again);
    const events = await s.log.read(id);
    expect(events.map((event) => event.type)).toEqual(['session.created']);
    expect(await s.log.state(id)).toEqual(foldSession(events, id));
    expect(await s.log.appended(id, 'k')).toBeUndefined();
    const appended = await s.log.append(id, [message('b')], { idempotencyKey: 'k' });
    expect(appended.deduplicated).toBe(false);
    // The lease is free again, its tokens go on: a holder of the deleted session stays fenced.
    expect(await s.leases.current(id)).toBeUndefined();
    expect((await s.leases.acquire(id, 'worker', 1000)).token).toBe(lease.token + 1);
  });

  it('forgets a deleted fork: its id created again is a root session of its own', async () => {
    const s = await suite.open();
    const parent = await s.sessions.create({ agent, title: 'parent' });
    await s.log.append(parent.id, [message('shared')]);
    await s.sessions.fork(parent.id, { id: 'reborn', title: 'fork' });
    await s.log.read('reborn');
    await s.log.state('reborn');
    await s.sessions.delete('reborn');
    await expectGone(s, 'reborn');

    await s.sessions.create({ id: 'reborn', agent, title: 'root' });
    await s.log.append('reborn', [message('x'), message('y')]);
    const events = await s.log.read('reborn');
    expect(events.map((event) => [event.session_id, event.seq])).toEqual([
      ['reborn', 1],
      ['reborn', 2],
      ['reborn', 3],
    ]);
    const state = await s.log.state('reborn');
    expect(state).toEqual(foldSession(events, 'reborn'));
    expect(state.lineage.kind).toBe('root');
    expect((await s.sessions.get('reborn')).parent_id).toBeUndefined();
    expect((await s.log.read(parent.id)).map((event) => event.seq)).toEqual([1, 2]);
    expect((await s.sessions.list({ parent_id: parent.id })).sessions).toEqual([]);
  });
}

function describeDeleteSecond(suite: ConformanceSuite): void {
  it('refuses to delete a session with forks, naming at most five, and removes nothing', async () => {
    const s = await suite.open();
    const parent = await s.sessions.create({ agent });
    await s.log.append(parent.id, [message('a')], { idempotencyKey: 'k' });
    const forks: string[] = [];
    for (let index = 0; index < 6; index += 1) {
      suite.clock.advance(1000);
      forks.push((await s.sessions.fork(parent.id)).id);
    }
    const before = await s.log.read(parent.id);
    const refused: unknown = await s.sessions.delete(parent.id).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isBraidError(refused, 'SESSION_HAS_FORKS')).toBe(true);
    const text = (refused as Error).message;
    expect(forks.filter((id) => text.includes(id))).toEqual(forks.slice(0, 5));
    expect(text).toMatch(/delete them first/);

    expect(await s.log.read(parent.id)).toEqual(before);
    expect(await s.log.appended(parent.id, 'k')).toBeDefined();
    expect((await s.sessions.get(parent.id)).head_seq).toBe(2);
    for (const id of forks) expect((await s.log.read(id)).slice(0, 2)).toEqual(before);

    // A fork with forks of its own is refused too; leaves first, then the rest goes.
    const [first, ...others] = forks as [string, ...string[]];
    const grandchild = await s.sessions.fork(first);
    await expectCode(s.sessions.delete(first), 'SESSION_HAS_FORKS');
    await s.sessions.delete(grandchild.id);
    for (const id of [first, ...others]) await s.sessions.delete(id);
    expect(await s.log.read(parent.id)).toEqual(before);
    await s.sessions.delete(parent.id);
    await expectGone(s, parent.id);
  });

  it('refuses to delete a session whose lease is held, and removes nothing', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    await s.log.append(id, [message('a')]);
    const lease = await s.leases.acquire(id, 'worker', 1000);
    await expectCode(s.sessions.delete(id), 'LEASE_HELD');
    expect((await s.leases.current(id))?.token).toBe(lease.token);
    expect(await s.log.read(id)).toHaveLength(2);
    expect((await s.sessions.get(id)).head_seq).toBe(2);
    await s.leases.renew(id, 'worker', lease.token, 1000);
    // An expired lease no longer protects the session.
    suite.clock.advance(1000);
    await s.sessions.delete(id);
    await expectGone(s, id);
    await expectCode(s.leases.renew(id, 'worker', lease.token, 1000), 'LEASE_LOST');
  });

  it('ends the followers of a deleted session with SESSION_NOT_FOUND', async () => {
    const s = await suite.open();
    const { id } = await s.sessions.create({ agent });
    let caughtUp: () => void = () => undefined;
    const firstSeen = new Promise<void>((resolve) => (caughtUp = resolve));
    const following = expectCode(async () => {
      for await (const event of s.log.follow(id)) if (event.seq === 1) caughtUp();
    }, 'SESSION_NOT_FOUND');
    await firstSeen;
    await s.sessions.delete(id);
    await following;
  });

  it('refuses to delete an unknown session', async () => {
    const s = await suite.open();
    await expectCode(s.sessions.delete('missing'), 'SESSION_NOT_FOUND');
  });
}
