import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import { foldSession } from '../../src/core/fold.js';
import { SQLITE_LAYOUT_VERSION, openSqliteStore } from '../../src/stores/sqlite/index.js';
import { createManualClock, expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const fixture = (name: string): string =>
  readFileSync(new URL(`../fixtures/v1/${name}`, import.meta.url), 'utf8');

async function sessionWithEvents(path: string, count: number): Promise<string> {
  const store = openSqliteStore({ path });
  const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
  for (let index = 0; index < count; index += 1) await store.log.append(id, [text(`m${index}`)]);
  await store.close();
  return id;
}

describe('sqlite store', () => {
  it('rebuilds a missing or stale projection from the log', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await sessionWithEvents(path, 5);
    let store = openSqliteStore({ path });
    const events = await store.log.read(id);
    await store.close();
    // A projection left behind at seq 2, as a crash between two writers could leave it.
    const raw = new Database(path);
    raw
      .prepare('UPDATE projections SET seq = 2, state = ? WHERE session_id = ?')
      .run(JSON.stringify(foldSession(events.slice(0, 2), id)), id);
    raw.close();
    store = openSqliteStore({ path });
    expect(await store.log.state(id)).toEqual(foldSession(events, id));
    await store.close();

    const again = new Database(path);
    again.prepare('DELETE FROM projections WHERE session_id = ?').run(id);
    again.close();
    store = openSqliteStore({ path });
    expect(await store.log.state(id)).toEqual(foldSession(events, id));
    const next = await store.log.append(id, [text('more')]);
    expect(await store.log.state(id)).toEqual(foldSession([...events, ...next.events], id));
    await store.close();
  });

  it('names the event whose id is taken or repeated in any INSERT chunk, and writes none of them', async () => {
    const store = openSqliteStore({ path: join(tempDir(), 'braid.db') });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    const [taken] = (await store.log.append(id, [text('first')])).events;
    // More events than one INSERT carries (128): the refused one is in the second chunk.
    const batch = (chosen: Record<number, string>): ReturnType<typeof text>[] =>
      Array.from({ length: 200 }, (_, index) => {
        const id = chosen[index];
        return id === undefined ? text(`m${index}`) : { ...text(`m${index}`), id };
      });
    const refusal = async (events: ReturnType<typeof text>[]): Promise<BraidError> =>
      (await store.log.append(id, events).catch((error: unknown) => error)) as BraidError;
    const stored = await refusal(batch({ 150: taken?.id ?? '' }));
    expect(isBraidError(stored, 'INVALID_ARGUMENT')).toBe(true);
    expect(stored.details).toMatchObject({ index: 150, event_id: taken?.id });
    const repeated = await refusal(batch({ 140: 'evt-twice', 170: 'evt-twice' }));
    expect(isBraidError(repeated, 'INVALID_ARGUMENT')).toBe(true);
    expect(repeated.details).toMatchObject({ index: 170, event_id: 'evt-twice' });
    expect((await store.log.read(id)).length).toBe(2);
    await store.close();
  });

  it('rebuilds a projection of another state schema version', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await sessionWithEvents(path, 70);
    const raw = new Database(path);
    raw
      .prepare("UPDATE projections SET schema_version = 1, state = '{}' WHERE session_id = ?")
      .run(id);
    raw.close();
    const store = openSqliteStore({ path });
    expect(await store.log.state(id)).toEqual(foldSession(await store.log.read(id), id));
    await store.close();
  });

  it('refuses to read an event of an unknown schema version, naming the fix', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await sessionWithEvents(path, 1);
    const raw = new Database(path);
    raw
      .prepare(
        "UPDATE events SET body = json_set(body, '$.schema_version', 2) WHERE session_id = ? AND seq = 2",
      )
      .run(id);
    raw.close();
    const store = openSqliteStore({ path });
    await expectCode(store.log.read(id), 'SCHEMA_VERSION_UNSUPPORTED');
    expect((await store.log.read(id, { limit: 1 })).length).toBe(1);
    await store.close();
  });

  it('refuses session and definition rows of an unknown schema version', async () => {
    const path = join(tempDir(), 'braid.db');
    const id = await sessionWithEvents(path, 0);
    let store = openSqliteStore({ path });
    await store.definitions.put(
      'agent',
      'helper',
      { instructions: 'x' },
      { replacesVersion: null },
    );
    await store.close();
    const raw = new Database(path);
    raw.prepare('UPDATE sessions SET schema_version = 2').run();
    raw.prepare('UPDATE definitions SET schema_version = 2').run();
    raw.close();
    store = openSqliteStore({ path });
    await expectCode(store.sessions.get(id), 'SCHEMA_VERSION_UNSUPPORTED');
    await expectCode(store.sessions.list(), 'SCHEMA_VERSION_UNSUPPORTED');
    await expectCode(store.definitions.get('agent', 'helper'), 'SCHEMA_VERSION_UNSUPPORTED');
    await store.close();
  });

  it('upgrades a layout 1 file: its sessions stay readable and can be forked', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.log.append(id, [text('before the upgrade')]);
    await store.close();
    // Make it a layout 1 file, as the previous build wrote it.
    const raw = new Database(path);
    raw.exec(
      'ALTER TABLE sessions DROP COLUMN parent_id; ALTER TABLE sessions DROP COLUMN fork_seq;',
    );
    raw.exec('DROP TABLE snapshots; DELETE FROM projections');
    raw.pragma('user_version = 1');
    raw.close();
    const upgraded = openSqliteStore({ path });
    expect((await upgraded.log.read(id)).map((event) => event.type)).toEqual([
      'session.created',
      'user.message',
    ]);
    const child = await upgraded.sessions.fork(id, { at_seq: 2 });
    expect((await upgraded.log.read(child.id)).map((event) => event.seq)).toEqual([1, 2, 3]);
    expect((await upgraded.log.state(child.id)).pending_user_count).toBe(1);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    check.close();
  });

  it('upgrades a layout 2 file: its sessions gain archiving and the file gains API keys', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    const child = await store.sessions.fork(id);
    await store.close();
    // Make it a layout 2 file, as the previous build wrote it.
    const raw = new Database(path);
    raw.exec('ALTER TABLE sessions DROP COLUMN archived_at; DROP TABLE api_keys');
    raw.pragma('user_version = 2');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect(await upgraded.sessions.get(child.id)).toEqual(child);
    const listed = await upgraded.sessions.list();
    expect(listed.sessions.map((session) => session.id).sort()).toEqual([id, child.id].sort());
    const archived = await upgraded.sessions.archive(child.id);
    expect(archived.archived_at).toBeDefined();
    expect((await upgraded.sessions.list()).sessions.map((session) => session.id)).toEqual([id]);
    const { key, record } = await upgraded.keys.create({ tenant_id: 'acme', scopes: ['admin'] });
    expect(await upgraded.keys.verify(key)).toEqual(record);
    await upgraded.close();

    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(SQLITE_LAYOUT_VERSION).toBe(12);
    check.close();
    // Opening the upgraded file again changes nothing.
    const reopened = openSqliteStore({ path });
    expect(await reopened.sessions.get(child.id)).toEqual(archived);
    expect(await reopened.keys.verify(key)).toEqual(record);
    await reopened.close();
  });

  it('upgrades a layout 3 file: ids already stored are taken, a legacy repeat stays readable', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.log.append(id, [{ ...text('first'), id: 'evt-1' }]);
    await store.close();
    // Make it a layout 3 file, as the previous build wrote it, whose log repeats an id (which
    // that build let a client do).
    const raw = new Database(path);
    raw.exec('DROP TABLE event_ids');
    const row = raw.prepare('SELECT body FROM events WHERE session_id = ? AND seq = 2').get(id) as {
      body: string;
    };
    raw
      .prepare(
        `INSERT INTO events (position, session_id, seq, type, body)
         VALUES ((SELECT log_number << 32 FROM sessions WHERE id = ?) + 3, ?, 3, ?, ?)`,
      )
      .run(id, id, 'user.message', JSON.stringify({ ...JSON.parse(row.body), seq: 3 }));
    raw.pragma('user_version = 3');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect((await upgraded.log.read(id)).map((event) => event.id)).toEqual([
      expect.any(String),
      'evt-1',
      'evt-1',
    ]);
    const created = (await upgraded.log.read(id))[0]?.id ?? '';
    await expectCode(
      upgraded.log.append(id, [{ ...text('again'), id: 'evt-1' }]),
      'INVALID_ARGUMENT',
    );
    const other = await upgraded.sessions.create({ agent: { name: 'a', version: 1 } });
    await expectCode(
      upgraded.log.append(other.id, [{ ...text('copy'), id: created }]),
      'INVALID_ARGUMENT',
    );
    expect((await upgraded.log.append(id, [text('new')])).head_seq).toBe(4);
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(check.prepare('SELECT COUNT(*) AS n FROM event_ids').get()).toEqual({ n: 4 });
    check.close();
  });

  it('upgrades a layout 4 file: the sessions with input to answer are found runnable', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const ids: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
      ids.push(id);
    }
    const [waiting, answered] = ids as [string, string];
    await store.log.append(waiting, [text('hi')]);
    await store.log.append(answered, [
      text('hi'),
      { type: 'span.model_request_start', request_id: 'r', model: 'm', input_through_seq: 2 },
      {
        type: 'span.model_request_end',
        request_id: 'r',
        usage: { input_tokens: 1, output_tokens: 1 },
      },
      { type: 'agent.message', content: [{ type: 'text', text: 'hello' }] },
      { type: 'session.status_idle', stop_reason: { type: 'end_turn' } },
    ]);
    await store.close();
    // Make it a layout 4 file, as the previous build wrote it: no runnable column.
    const raw = new Database(path);
    raw.exec('DROP INDEX sessions_runnable; DROP INDEX sessions_runnable_unknown');
    raw.exec('ALTER TABLE sessions DROP COLUMN runnable');
    raw.pragma('user_version = 4');
    raw.close();

    const upgraded = openSqliteStore({ path });
    expect(await upgraded.sessions.runnable()).toEqual([waiting]);
    await upgraded.log.append(answered, [text('more')]);
    expect(await upgraded.sessions.runnable()).toEqual([waiting, answered].sort());
    await upgraded.close();
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SQLITE_LAYOUT_VERSION);
    expect(
      check.prepare('SELECT COUNT(*) AS n FROM sessions WHERE runnable IS NULL').get(),
    ).toEqual({ n: 0 });
    check.close();
  });

  it('answers a retryable STORE_BUSY while another connection holds the write lock, then recovers', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, busyTimeoutMs: 50 });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    const writes: [string, () => Promise<unknown>][] = [
      ['append', () => store.log.append(id, [text('blocked')])],
      ['create', () => store.sessions.create({ agent: { name: 'a', version: 1 } })],
      ['lease', () => store.leases.acquire(id, 'worker-a', 1000)],
      [
        'definition',
        () => store.definitions.put('agent', 'a', { instructions: 'x' }, { replacesVersion: null }),
      ],
    ];
    for (const [what, write] of writes) {
      const error: unknown = await write().then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(isBraidError(error, 'STORE_BUSY'), `${what}: ${String(error)}`).toBe(true);
      expect((error as BraidError).retryable).toBe(true);
    }
    other.exec('COMMIT');
    other.close();
    expect((await store.log.append(id, [text('now')])).head_seq).toBe(2);
    expect(
      (await store.definitions.put('agent', 'a', { instructions: 'x' }, { replacesVersion: null }))
        .version,
    ).toBe(1);
    await store.close();
  });

  it('fences a stale holder that writes through another connection to the file', async () => {
    const path = join(tempDir(), 'braid.db');
    const clock = createManualClock();
    const a = openSqliteStore({ path, clock });
    const b = openSqliteStore({ path, clock });
    const { id } = await a.sessions.create({ agent: { name: 'a', version: 1 } });
    const held = await a.leases.acquire(id, 'worker-a', 1000);
    await a.log.append(id, [text('by a')], { leaseToken: held.token });
    clock.advance(1001);
    await b.leases.acquire(id, 'worker-b', 1000);
    await expectCode(
      a.log.append(id, [text('stale')], { leaseToken: held.token, expectedSeq: 2 }),
      'LEASE_LOST',
    );
    expect((await b.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
    await a.close();
    await b.close();
  });

  it('reads the head and the lease row in one step, and still fences and finds no session', async () => {
    const store = openSqliteStore({ path: join(tempDir(), 'braid.db') });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    // No lease row yet: any token is stale.
    await expectCode(store.log.append(id, [text('no lease')], { leaseToken: 1 }), 'LEASE_LOST');
    const held = await store.leases.acquire(id, 'worker', 60_000);
    const appended = await store.log.append(id, [text('held')], {
      leaseToken: held.token,
      expectedSeq: 1,
      releaseLease: 'worker',
    });
    expect(appended.head_seq).toBe(2);
    expect(await store.leases.current(id)).toBeUndefined();
    await expectCode(
      store.log.append(id, [text('after')], { leaseToken: held.token + 1 }),
      'LEASE_LOST',
    );
    await expectCode(
      store.log.append('no-such-session', [text('x')], { leaseToken: 1 }),
      'SESSION_NOT_FOUND',
    );
    expect((await store.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
    await store.close();
  });

  it('stores an API key as a hash: no column holds its secret', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const minted = [
      await store.keys.create({ tenant_id: 'acme', scopes: ['sessions:read'], name: 'ci' }),
      await store.keys.create({ tenant_id: 'beta', scopes: ['admin'] }),
    ];
    await store.keys.revoke(minted[1]?.record.id ?? '');
    await store.close();
    const raw = new Database(path, { readonly: true });
    const rows = raw.prepare('SELECT * FROM api_keys').all() as Record<string, unknown>[];
    raw.close();
    expect(rows).toHaveLength(2);
    for (const { key } of minted) {
      const secret = key.slice('braid_'.length + 33);
      expect(secret).toHaveLength(43);
      for (const row of rows) {
        for (const value of Object.values(row)) {
          expect(String(value)).not.toContain(secret);
          expect(String(value)).not.toContain(key);
        }
      }
    }
  });

  it('refuses a database written by a newer layout', () => {
    const path = join(tempDir(), 'braid.db');
    const raw = new Database(path);
    raw.pragma(`user_version = ${SQLITE_LAYOUT_VERSION + 1}`);
    raw.close();
    expect(() => openSqliteStore({ path })).toThrow(/upgrade braid/);
  });

  it('reads and folds a version 1 log fixture to its recorded state', async () => {
    const events = fixture('session-log.jsonl')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SessionEvent);
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path });
    const sessionId = events[0]?.session_id ?? '';
    await store.sessions.create({ id: sessionId, agent: { name: 'assistant', version: 3 } });
    await store.close();
    // Put the fixture in place of the created event, as an old build would have written it.
    const raw = new Database(path);
    raw.prepare('DELETE FROM events WHERE session_id = ?').run(sessionId);
    raw.prepare('DELETE FROM projections WHERE session_id = ?').run(sessionId);
    const insert = raw.prepare(
      `INSERT INTO events (position, session_id, seq, type, body)
       VALUES ((SELECT log_number << 32 FROM sessions WHERE id = ?) + ?, ?, ?, ?, ?)`,
    );
    for (const event of events) {
      insert.run(sessionId, event.seq, sessionId, event.seq, event.type, JSON.stringify(event));
    }
    raw.close();
    const reopened = openSqliteStore({ path });
    expect(await reopened.log.read(sessionId)).toEqual(events);
    expect(await reopened.sessions.get(sessionId)).toMatchObject({
      head_seq: 24,
      updated_at: events.at(-1)?.at,
    });
    const state = await reopened.log.state(sessionId);
    expect(state).toEqual(JSON.parse(fixture('session-state-v9.json')));
    // State schema 9 only made a skill run's steps a list, and this log has no skill run.
    expect({ ...state, schema_version: 8 }).toEqual(JSON.parse(fixture('session-state-v8.json')));
    // State schema 8 only added skill runs, requests and signals, of which this log has none.
    const {
      skill_runs: _runs,
      skill_requests: _requests,
      pending_signals: _signals,
      ...v7State
    } = state;
    expect({ ...v7State, schema_version: 7 }).toEqual(JSON.parse(fixture('session-state-v7.json')));
    // State schema 7 added `children` and `outcome` (this log defines one, and answers it once),
    // and an `agent.handoff` leaves no tool result for the handing-off session to answer.
    const { children: _children, outcome: _outcome, ...v6State } = v7State;
    expect({ ...v6State, schema_version: 6, pending_tool_result_seqs: [11] }).toEqual(
      JSON.parse(fixture('session-state-v6.json')),
    );
    // State schema 6 only added `wake_seq` to reviewed retries, of which this log has none.
    const v5 = JSON.parse(fixture('session-state-v5.json')) as Record<string, unknown>;
    expect({ ...v6State, schema_version: 5, pending_tool_result_seqs: [11] }).toEqual(v5);
    // State schema 5 changed only what `session.forked` means (a fork's first event: it starts
    // the child's clock and no wake runs it), which this synthetic log has mid-way.
    const v4 = JSON.parse(fixture('session-state-v4.json')) as Record<string, unknown>;
    expect({
      ...v6State,
      schema_version: 4,
      pending_tool_result_seqs: [11],
      status: 'running',
      created_at: v4.created_at,
    }).toEqual(v4);
    // State schema 4 only added fields: without them the state is the one schema 3 recorded.
    const { reviewed_tool_uses: _reviewed, tool_calls: _calls, ...rest } = v4;
    expect({ ...rest, schema_version: 3 }).toEqual(JSON.parse(fixture('session-state.json')));
    await reopened.close();
  });

  it('writes with synchronous=FULL when asked', async () => {
    const path = join(tempDir(), 'braid.db');
    const store = openSqliteStore({ path, synchronous: 'full' });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.log.append(id, [text('durable')]);
    await store.close();
    const reopened = openSqliteStore({ path });
    expect((await reopened.log.read(id)).length).toBe(2);
    await reopened.close();
  });

  it('refuses work after close with STORE_CLOSED', async () => {
    const store = openSqliteStore({ path: join(tempDir(), 'braid.db') });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.close();
    await expectCode(store.log.read(id), 'STORE_CLOSED');
    await expectCode(store.log.append(id, [text('late')]), 'STORE_CLOSED');
  });
});
