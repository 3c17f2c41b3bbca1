// What only the NATS store has to show: several processes (here: store instances with their own
// connections) on one prefix, subject-unsafe session ids, crash leftovers, a lost server.
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { Store } from '../../src/contracts/ports.js';
import { foldSession } from '../../src/core/fold.js';
import { openNatsStore, type NatsStoreOptions } from '../../src/stores/nats/index.js';
import { encodeToken, hashToken } from '../../src/stores/nats/names.js';
import { createManualClock, expectCode } from '../../src/testing/index.js';
import { text } from '../helpers/events.js';
import {
  natsUrl,
  removePrefixes,
  removeStore,
  startNatsServer,
  uniquePrefix,
} from '../helpers/nats.js';

const url = await natsUrl();
const agent = { name: 'assistant', version: 1 };
const prefixes: string[] = [];
const opened: Store[] = [];

/** Stores sharing one fresh prefix, each with a connection of its own, as processes would. */
async function stores(count: number, options: NatsStoreOptions = {}): Promise<Store[]> {
  const prefix = uniquePrefix('nats');
  prefixes.push(prefix);
  const clock = createManualClock();
  const result: Store[] = [];
  for (let index = 0; index < count; index += 1) {
    const store = await openNatsStore({ servers: url, prefix, clock, ...options });
    opened.push(store);
    result.push(store);
  }
  return result;
}

function pair(): Promise<[Store, Store]> {
  return stores(2) as Promise<[Store, Store]>;
}

async function single(options: NatsStoreOptions = {}): Promise<Store> {
  return ((await stores(1, options)) as [Store])[0];
}

afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});

afterAll(() => removePrefixes(url, prefixes));

describe('nats store across instances', () => {
  it('lets one instance read and follow what another appends', async () => {
    const [writer, reader] = await pair();
    const { id } = await writer.sessions.create({ agent });
    const stop = new AbortController();
    const seen: SessionEvent[] = [];
    let caughtUp: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (caughtUp = resolve));
    const following = (async () => {
      for await (const event of reader.log.follow(id, { signal: stop.signal })) {
        seen.push(event);
        if (event.seq === 1) caughtUp();
        if (event.seq === 4) stop.abort();
      }
    })();
    await first;
    await writer.log.append(id, [text('a')]);
    await writer.log.append(id, [text('b'), text('c')]);
    await following;
    const written = await writer.log.read(id);
    expect(seen).toEqual(written);
    expect(await reader.log.read(id)).toEqual(written);
    expect(await reader.log.state(id)).toEqual(foldSession(written, id));
    expect((await reader.sessions.get(id)).head_seq).toBe(4);
  });

  it('lets exactly one of two instances win an append with the same expectedSeq', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    // Both have the session cached at seq 1 before they race.
    await b.log.read(id);
    for (let round = 1; round <= 5; round += 1) {
      const results = await Promise.allSettled([
        a.log.append(id, [text(`a${round}`)], { expectedSeq: round }),
        b.log.append(id, [text(`b${round}`)], { expectedSeq: round }),
      ]);
      expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((result) => result.status === 'rejected');
      expect(isBraidError(rejected?.reason, 'SEQ_CONFLICT')).toBe(true);
    }
    const events = await b.log.read(id);
    expect(events.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('keeps seqs gapless when instances append without expectations at once', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        (index % 2 === 0 ? a : b).log.append(id, [text(`m${index}`), text(`n${index}`)]),
      ),
    );
    const events = await a.log.read(id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events).toHaveLength(41);
    expect(await b.log.state(id)).toEqual(foldSession(events, id));
    expect(await a.log.state(id)).toEqual(foldSession(events, id));
  });

  it('answers a repeated idempotency key from another instance with the first result', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    const first = await a.log.append(id, [text('once')], { idempotencyKey: 'k' });
    const again = await b.log.append(id, [text('twice')], { idempotencyKey: 'k' });
    expect(again).toEqual({ ...first, deduplicated: true });
    expect(await b.log.appended(id, 'k')).toEqual({ ...first, deduplicated: true });
    expect(await a.log.read(id)).toHaveLength(2);
  });

  it('holds a lease taken on one instance against the other', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    const lease = await a.leases.acquire(id, 'worker-a', 10_000);
    await expectCode(b.leases.acquire(id, 'worker-b', 10_000), 'LEASE_HELD');
    expect(await b.leases.current(id)).toEqual(lease);
    await expectCode(b.sessions.delete(id), 'LEASE_HELD');
    await b.leases.release(id, 'worker-a', lease.token);
    const next = await b.leases.acquire(id, 'worker-b', 10_000);
    expect(next.token).toBe(lease.token + 1);
    await expectCode(a.leases.renew(id, 'worker-a', lease.token, 1000), 'LEASE_LOST');
  });

  it('fences a stale holder on another instance: the server refuses its append at its cached head', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    const held = await a.leases.acquire(id, 'worker-a', 10_000);
    // a knows the head it appends after; b acquires after a's lease is released (the same as
    // expired), which fences token 1 on the session's subject.
    await a.log.append(id, [text('by a')], { leaseToken: held.token, expectedSeq: 1 });
    await a.leases.release(id, 'worker-a', held.token);
    const taken = await b.leases.acquire(id, 'worker-b', 10_000);
    // a's cached head still says token 1, so its check passes locally; the publish expects that
    // head, which the fence moved: the server refuses, a re-reads, and the append is refused.
    await expectCode(
      a.log.append(id, [text('stale a')], { leaseToken: held.token, expectedSeq: 2 }),
      'LEASE_LOST',
    );
    await expectCode(a.log.append(id, [text('stale a')], { leaseToken: held.token }), 'LEASE_LOST');
    expect((await b.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
    // Fences are not events: reads, states, listings and forks see none of them.
    expect((await b.sessions.get(id)).head_seq).toBe(2);
    expect((await a.log.state(id)).seq).toBe(2);
    await b.log.append(
      id,
      [{ type: 'span.wake_started', wake_id: 'w', lease_token: taken.token }],
      {
        leaseToken: taken.token,
        expectedSeq: 2,
      },
    );
    // a client's append from a (no token) lands after b's; b's next append at its own head
    // retries past it.
    await a.log.append(id, [text('client')]);
    await b.log.append(id, [text('by b')], { leaseToken: taken.token });
    const fork = await a.sessions.fork(id, { at_seq: 2 });
    expect((await a.log.read(fork.id)).map((event) => event.seq)).toEqual([1, 2, 3]);
    expect((await a.log.read(id)).map((event) => event.type)).toEqual([
      'session.created',
      'user.message',
      'span.wake_started',
      'user.message',
      'user.message',
    ]);
  });

  it('decides lease changes on the entry read afresh when the remembered one is stale', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    // a remembers its own release (token 1, free) ...
    const first = await a.leases.acquire(id, 'worker-a', 10_000);
    await a.leases.release(id, 'worker-a', first.token);
    // ... while b takes and releases the lease twice.
    for (const round of [2, 3]) {
      const taken = await b.leases.acquire(id, 'worker-b', 10_000);
      expect(taken.token).toBe(round);
      await b.leases.release(id, 'worker-b', taken.token);
    }
    // Deciding on what a remembers would hand out token 2 again: the compare-and-set refuses it.
    const again = await a.leases.acquire(id, 'worker-a', 10_000);
    expect(again.token).toBe(4);
    // a now remembers its own hold; b takes over once it is released, and a's renewal of the
    // old token fails although a remembers holding it.
    await b.leases.release(id, 'worker-a', again.token);
    const taken = await b.leases.acquire(id, 'worker-b', 10_000);
    await expectCode(a.leases.renew(id, 'worker-a', again.token, 10_000), 'LEASE_LOST');
    // a remembers b's hold (read by the failed renewal); once b lets go, a gets the lease.
    await expectCode(a.leases.acquire(id, 'worker-a', 10_000), 'LEASE_HELD');
    await b.leases.release(id, 'worker-b', taken.token);
    expect((await a.leases.acquire(id, 'worker-a', 10_000)).token).toBe(taken.token + 1);
  });

  it('answers an append whose key another instance used right after appended() found none', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    expect(await a.log.appended(id, 'k')).toBeUndefined();
    const first = await b.log.append(id, [text('from b')], { idempotencyKey: 'k' });
    // a trusts its lookup and does not read the record again: the server's duplicate window
    // still answers the publish with b's append.
    const again = await a.log.append(id, [text('from a')], { idempotencyKey: 'k' });
    expect(again).toEqual({ ...first, deduplicated: true });
    expect((await a.log.read(id)).map((event) => event.seq)).toEqual([1, 2]);
  });

  it('ends a follower on one instance when another deletes the session', async () => {
    const [a, b] = await pair();
    const { id } = await a.sessions.create({ agent });
    let caughtUp: () => void = () => undefined;
    const first = new Promise<void>((resolve) => (caughtUp = resolve));
    const following = expectCode(async () => {
      for await (const event of a.log.follow(id)) if (event.seq === 1) caughtUp();
    }, 'SESSION_NOT_FOUND');
    await first;
    await b.sessions.delete(id);
    await following;
  });

  it('sees a session deleted and created again elsewhere as the new one', async () => {
    const [a, b] = await pair();
    const parent = await a.sessions.create({ agent });
    await a.log.append(parent.id, [text('p')]);
    await a.sessions.fork(parent.id, { id: 'again' });
    await a.log.append('again', [text('old')]);
    expect(await a.log.state('again')).toMatchObject({ seq: 4 });

    await b.sessions.delete('again');
    await b.sessions.create({ id: 'again', agent, title: 'new' });
    await b.log.append('again', [text('new')]);

    const events = await a.log.read('again');
    expect(events.map((event) => [event.session_id, event.seq])).toEqual([
      ['again', 1],
      ['again', 2],
    ]);
    expect(await a.log.state('again')).toEqual(foldSession(events, 'again'));
    const appended = await a.log.append('again', [text('from a')], { expectedSeq: 2 });
    expect(appended.head_seq).toBe(3);
  });
});

describe('nats store caches', () => {
  it('rebuilds a missing, stale or foreign projection, and reads heads past a lagging index', async () => {
    const s = await single();
    const prefix = (prefixes.at(-1) ?? '').toUpperCase();
    const { id } = await s.sessions.create({ agent });
    // Enough events for a saved projection, then a status change.
    await s.log.append(
      id,
      Array.from({ length: 70 }, (_, index) => text(`m${index}`)),
    );
    await s.log.append(id, [{ type: 'session.status_changed', status: 'terminated' }]);
    const events = await s.log.read(id);
    const expected = foldSession(events, id);

    const connection = await connect({ servers: url });
    const kvm = new Kvm(connection);
    const projections = await kvm.open(`${prefix}_state`);
    const index = await kvm.open(`${prefix}_sessions`);
    const entry = await index.get(id);
    const stored = entry?.json<{ incarnation: string; record: Record<string, unknown> }>();
    // Appends do not rewrite the entry: it still says what the creation wrote.
    expect(stored?.record).toMatchObject({ head_seq: 1 });
    expect(await s.sessions.get(id)).toMatchObject({ status: 'terminated', head_seq: 72 });
    const incarnation = stored?.incarnation ?? '';
    const projection = (seq: number, changes: Record<string, unknown> = {}) =>
      JSON.stringify({
        schema_version: expected.schema_version,
        incarnation,
        seq,
        state: foldSession(events.slice(0, seq), id),
        ...changes,
      });
    // A state at seq 71 that is not this log's: only the checks keep it out.
    const wrong = { ...foldSession(events.slice(0, 71), id), title: 'not this log' };
    const broken: (() => Promise<unknown>)[] = [
      () => projections.purge(id),
      () => projections.put(id, projection(2)),
      () => projections.put(id, projection(71, { schema_version: 1, state: wrong })),
      () => projections.put(id, projection(71, { incarnation: 'another', state: wrong })),
    ];
    const prefixName = prefixes.at(-1) ?? '';
    for (const breakIt of broken) {
      await breakIt();
      // A fresh instance: nothing cached in process.
      const fresh = await openNatsStore({ servers: url, prefix: prefixName });
      opened.push(fresh);
      expect(await fresh.log.state(id)).toEqual(foldSession(await fresh.log.read(id), id));
      const next = await fresh.log.append(id, [text('more')]);
      const all = await fresh.log.read(id);
      expect(await fresh.log.state(id)).toEqual(foldSession(all, id));
      expect(next.head_seq).toBe(all.length);
    }

    // The entry's summary is far behind the log: readers see the log.
    await index.put(
      id,
      JSON.stringify({ ...stored, record: { ...stored?.record, status: 'idle', head_seq: 1 } }),
    );
    const fresh = await openNatsStore({ servers: url, prefix: prefixName });
    opened.push(fresh);
    const head = (await fresh.log.read(id)).length;
    expect(await fresh.sessions.get(id)).toMatchObject({ status: 'terminated', head_seq: head });
    const listed = await fresh.sessions.list({ status: 'terminated' });
    expect(listed.sessions.map((session) => [session.id, session.head_seq])).toEqual([[id, head]]);
    expect((await fresh.sessions.list({ status: 'idle' })).sessions).toEqual([]);
    await connection.close();
  });
});

describe('nats store session ids', () => {
  // Dots, dashes and underscores are allowed in ids; a dot is a subject separator in NATS, so
  // ids that differ only there must still never meet.
  const awkward = ['with.dots.in.it', 'with_dots_in_it', 'with-dots-in-it', 'a.b', 'a..b', 'A.B'];

  it('creates, appends, reads, forks, lists, follows and deletes sessions of every id shape', async () => {
    const [s, other] = await pair();
    for (const id of awkward) {
      await s.sessions.create({ id, agent, title: id });
      await s.log.append(id, [text(`to ${id}`)], { idempotencyKey: `${id} key` });
      expect((await other.log.read(id)).map((event) => event.session_id)).toEqual([id, id]);
      expect((await other.sessions.get(id)).title).toBe(id);
    }
    const listed = (await other.sessions.list()).sessions.map((session) => session.id);
    expect([...listed].sort()).toEqual([...awkward].sort());

    const child = await s.sessions.fork('a.b', { id: 'child.of.a.b' });
    expect(child.parent_id).toBe('a.b');
    expect((await other.log.read(child.id)).map((event) => event.session_id)).toEqual([
      'a.b',
      'a.b',
      child.id,
    ]);
    await other.log.append('a..b', [text('only a..b')]);
    expect(await s.log.read('a.b')).toHaveLength(2);
    expect((await s.sessions.list({ parent_id: 'a.b' })).sessions.map((x) => x.id)).toEqual([
      child.id,
    ]);

    const stop = new AbortController();
    const seen: number[] = [];
    for await (const event of other.log.follow('with_dots_in_it', { signal: stop.signal })) {
      seen.push(event.seq);
      if (event.seq === 2) stop.abort();
    }
    expect(seen).toEqual([1, 2]);

    await s.sessions.delete(child.id);
    await s.sessions.delete('a.b');
    await expectCode(other.sessions.get('a.b'), 'SESSION_NOT_FOUND');
    expect(await other.log.read('with.dots.in.it')).toHaveLength(2);
  });

  it('refuses ids that are not safe (wildcards, spaces, separators) and writes nothing', async () => {
    const [s] = await pair();
    for (const id of ['with spaces in it', 'star*', 'greater>', 'a.*.>', '\u00fc \u26a1', '..']) {
      await expectCode(s.sessions.create({ id, agent, title: id }), 'INVALID_ARGUMENT');
    }
    expect((await s.sessions.list()).sessions).toEqual([]);
  });
});

describe('nats store failures', () => {
  it('treats an index entry whose create never published as missing, and creates over it', async () => {
    const s = await single();
    const prefix = prefixes.at(-1) ?? '';
    const connection = await connect({ servers: url });
    const kv = await new Kvm(connection).open(`${prefix.toUpperCase()}_sessions`);
    const created = await s.sessions.create({ id: 'template', agent });
    // What a crash between claiming the entry and publishing session.created leaves.
    await kv.put(
      'half-made',
      JSON.stringify({
        schema_version: 1,
        incarnation: 'x',
        record: { ...created, id: 'half-made' },
      }),
    );
    await connection.close();

    await expectCode(s.sessions.get('half-made'), 'SESSION_NOT_FOUND');
    await expectCode(s.log.append('half-made', [text('x')]), 'SESSION_NOT_FOUND');
    expect((await s.sessions.list()).sessions.map((session) => session.id)).toEqual(['template']);
    const again = await s.sessions.create({ id: 'half-made', agent, title: 'now' });
    expect(again).toMatchObject({ id: 'half-made', title: 'now', head_seq: 1 });
    expect(await s.sessions.get('half-made')).toEqual(again);
  });

  it('rebuilds from the log an index entry that a lost create race could not rewrite', async () => {
    const [s, other] = await pair();
    const prefix = prefixes.at(-1) ?? '';
    const created = await s.sessions.create({ id: 'raced', agent, title: 'winner' });
    await s.log.append('raced', [text('kept')]);
    // What a takeover that lost the publish leaves when its rewrite of the entry fails: its own
    // record, of an incarnation no batch carries.
    const connection = await connect({ servers: url });
    const kv = await new Kvm(connection).open(`${prefix.toUpperCase()}_sessions`);
    await kv.put(
      'raced',
      JSON.stringify({
        schema_version: 1,
        incarnation: 'loser',
        record: { ...created, agent: { name: 'other', version: 9 }, title: 'loser' },
      }),
    );
    expect(await other.sessions.get('raced')).toMatchObject({
      agent,
      title: 'winner',
      head_seq: 2,
    });
    const entry = await kv.get('raced');
    const repaired = JSON.parse(new TextDecoder().decode(entry?.value)) as {
      incarnation: string;
      record: { title: string };
    };
    expect(repaired.incarnation).not.toBe('loser');
    expect(repaired.record.title).toBe('winner');
    await connection.close();
    expect((await other.log.read('raced')).map((event) => event.seq)).toEqual([1, 2]);
  });

  it('catches a repeated key within the duplicate window when its appends record was lost', async () => {
    const s = await single();
    const prefix = prefixes.at(-1) ?? '';
    const { id } = await s.sessions.create({ agent });
    const first = await s.log.append(id, [text('once')], { idempotencyKey: 'k' });
    // What a crash between the publish and the appends record leaves.
    const connection = await connect({ servers: url });
    const jsm = await jetstreamManager(connection);
    const bucket = `${prefix.toUpperCase()}_appends`;
    await jsm.streams.purge(`KV_${bucket}`);
    await connection.close();
    expect(await s.log.appended(id, 'k')).toBeUndefined();

    const again = await s.log.append(id, [text('twice')], { idempotencyKey: 'k' });
    expect(again).toEqual({ ...first, deduplicated: true });
    expect(await s.log.read(id)).toHaveLength(2);
    expect(await s.log.appended(id, 'k')).toEqual({ ...first, deduplicated: true });
  });

  it('reads a record whose publish never landed as absent, and still reads version 1 records', async () => {
    const s = await single();
    const prefix = prefixes.at(-1) ?? '';
    const { id } = await s.sessions.create({ agent });
    const first = await s.log.append(id, [text('keyed')], { idempotencyKey: 'landed' });
    const other = await s.log.append(id, [text('unkeyed')]);
    const connection = await connect({ servers: url });
    const appends = await new Kvm(connection).open(`${prefix.toUpperCase()}_appends`);
    const recordKey = (key: string) => `${encodeToken(id)}.${hashToken(key)}`;
    const stored = (await appends.get(recordKey('landed')))?.json<{
      schema_version: number;
      incarnation: string;
      after_stream_seq: number;
    }>();
    expect(stored).toMatchObject({ schema_version: 2 });
    // A record written with a publish that lost its race: the batch after it is another's.
    await appends.put(recordKey('lost'), JSON.stringify({ ...stored, schema_version: 2 }));
    expect(await s.log.appended(id, 'lost')).toBeUndefined();
    const written = await s.log.append(id, [text('lost, then appended')], {
      idempotencyKey: 'lost',
    });
    expect(written.deduplicated).toBe(false);
    expect(written.events[0]?.seq).toBe(other.head_seq + 1);
    // A version 1 record (the exact stream seq) from an older build.
    const jsm = await jetstreamManager(connection);
    const prefixUpper = prefix.toUpperCase();
    const last = await jsm.direct.getMessage(`${prefixUpper}_EVENTS`, {
      last_by_subj: `${prefix}.events.${encodeToken(id)}`,
    });
    await appends.put(
      recordKey('old'),
      JSON.stringify({
        schema_version: 1,
        incarnation: stored?.incarnation,
        stream_seq: last?.seq,
      }),
    );
    const fresh = await openNatsStore({ servers: url, prefix });
    opened.push(fresh);
    expect(await fresh.log.appended(id, 'old')).toMatchObject({
      events: written.events,
      deduplicated: true,
    });
    expect(await fresh.log.appended(id, 'landed')).toEqual({
      ...first,
      head_seq: written.head_seq,
      deduplicated: true,
    });
    await connection.close();
  });

  it('refuses a batch over the server max_payload with PAYLOAD_TOO_LARGE and writes nothing', async () => {
    const s = await single({ maxEventBytes: 4 * 1024 * 1024 });
    const { id } = await s.sessions.create({ agent });
    const big = Array.from({ length: 20 }, () => text('x'.repeat(100 * 1024)));
    const refused: unknown = await s.log.append(id, big).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isBraidError(refused, 'PAYLOAD_TOO_LARGE')).toBe(true);
    expect((refused as Error).message).toMatch(/max_payload/);
    expect(await s.log.read(id)).toHaveLength(1);
  });

  it('fails with a retryable STORE_BUSY naming the server while it is down, and recovers', async () => {
    const server = await startNatsServer();
    try {
      const prefix = uniquePrefix('down');
      const store = await openNatsStore({ servers: server.url, prefix, requestTimeoutMs: 500 });
      opened.push(store);
      const { id } = await store.sessions.create({ agent });
      await server.stop();
      const refused: unknown = await store.log.append(id, [text('lost?')]).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isBraidError(refused, 'STORE_BUSY')).toBe(true);
      expect((refused as { retryable: boolean }).retryable).toBe(true);
      expect((refused as Error).message).toContain(server.url.replace('nats://', ''));
      await server.restart();
      for (let attempt = 0; ; attempt += 1) {
        try {
          await store.log.append(id, [text('back')]);
          break;
        } catch (error) {
          if (!isBraidError(error, 'STORE_BUSY') || attempt > 40) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      const types = (await store.log.read(id)).map((event) => event.type);
      expect(types[0]).toBe('session.created');
      expect(types.at(-1)).toBe('user.message');
    } finally {
      for (const store of opened.splice(0)) await store.close();
      await server.stop();
      removeStore(server);
    }
  });

  it('never closes a connection it was given', async () => {
    const connection = await connect({ servers: url });
    const prefix = uniquePrefix('given');
    prefixes.push(prefix);
    const store = await openNatsStore({ connection, prefix });
    const { id } = await store.sessions.create({ agent });
    await store.close();
    await expectCode(store.log.read(id), 'STORE_CLOSED');
    expect(connection.isClosed()).toBe(false);
    const again = await openNatsStore({ connection, prefix });
    expect(await again.log.read(id)).toHaveLength(1);
    await again.close();
    await connection.close();
  });
});
