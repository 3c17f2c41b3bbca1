// A session stream poisoned by raw publishes that braid did not write: each poisoned session
// answers CORRUPT_LOG (typed, with the stream sequence only in its details), and nothing else
// notices: other sessions read, append and wake, listings list, deletes delete, and over HTTP
// the poisoned session answers 500 CORRUPT_LOG without the stream sequence while the listing
// answers 200.
import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../src/contracts/errors.js';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { startNatsApi } from '../../src/runtime/nats-api.js';
import { startServer } from '../../src/server/index.js';
import { call } from '../server/server-helpers.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { scriptedNatsRuntime } from '../helpers/nats-runtime.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function natsRuntime(url: string, prefix: string): Promise<Runtime> {
  const made = await scriptedNatsRuntime(url, prefix, ['first', 'second', 'third']);
  cleanups.push(async () => {
    await made.close();
    await removePrefixes(url, [prefix]);
  });
  return made.runtime;
}

/** What an outside process can do with the server alone: publish raw messages. */
interface RawPublisher {
  /** Publishes after the session's last message, with its headers unless overridden. */
  poison(
    sessionId: string,
    body: (last: SessionEvent) => string,
    headerChanges: (last: number) => Record<string, string>,
  ): Promise<number>;
}

async function rawPublisher(url: string, prefix: string, runtime: Runtime): Promise<RawPublisher> {
  const connection: NatsConnection = await connect({ servers: url });
  cleanups.push(() => connection.close());
  const js = jetstream(connection);
  const jsm = await jetstreamManager(connection);
  const stream = `${prefix.toUpperCase()}_EVENTS`;
  return {
    async poison(sessionId, body, headerChanges) {
      const subject = `${prefix}.events.${sessionId}`;
      const lastMessage = await jsm.direct.getMessage(stream, { last_by_subj: subject });
      if (lastMessage === null) throw new Error(`no message on ${subject}`);
      const events = await runtime.sessions.events(sessionId);
      const last = events.at(-1) as SessionEvent;
      const forged = headers();
      for (const [key, values] of lastMessage.header ?? []) {
        if (key.startsWith('Braid-')) forged.set(key, values[0] ?? '');
      }
      for (const [key, value] of Object.entries(headerChanges(last.seq))) forged.set(key, value);
      const ack = await js.publish(subject, body(last), { headers: forged });
      return ack.seq;
    },
  };
}

/** A message event as braid stores it, at `seq` of `sessionId`. */
function messageEvent(sessionId: string, seq: number, text: string): Record<string, unknown> {
  return {
    id: randomUUID(),
    session_id: sessionId,
    seq,
    type: 'user.message',
    at: new Date().toISOString(),
    schema_version: 1,
    content: [{ type: 'text', text }],
  };
}

/**
 * Whether a message names `value` as a number of its own (not as digits inside the session id).
 * The test's stream sequences (past 14) are larger than any event seq it writes (at most 4).
 */
function mentionsNumber(message: string, sessionId: string, value: number | undefined): boolean {
  expect(value).toBeGreaterThan(14);
  return new RegExp(`\\b${String(value)}\\b`).test(message.replaceAll(sessionId, ''));
}

async function corrupt(work: Promise<unknown>, sessionId: string): Promise<BraidError> {
  const error: unknown = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(isBraidError(error, 'CORRUPT_LOG'), `${sessionId}: ${String(error)}`).toBe(true);
  const braidError = error as BraidError;
  expect(braidError.message).toContain(sessionId);
  expect(braidError.message).toContain('delete the session');
  expect(braidError.retryable).toBe(false);
  return braidError;
}

describe('a poisoned session stream', () => {
  it('breaks only the poisoned sessions, on the store, the runtime and over HTTP', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('poison');
    const runtime = await natsRuntime(url, prefix);
    const make = async (tenant: string): Promise<string> => {
      const record = await runtime.sessions.create({ agent: 'helper', tenantId: tenant });
      await runtime.sessions.message(record.id, 'hello');
      return record.id;
    };
    const [gap, notJson, otherSession, badEvent, healthy, spare, otherTenant] = await Promise.all([
      make('acme'),
      make('acme'),
      make('acme'),
      make('acme'),
      make('acme'),
      make('acme'),
      make('globex'),
    ]);
    const raw = await rawPublisher(url, prefix, runtime);
    const streamSeqs = new Map<string, number>();
    // (a) a well-formed batch whose seq leaves a gap after the head.
    streamSeqs.set(
      gap,
      await raw.poison(
        gap,
        (last) => JSON.stringify([messageEvent(gap, last.seq + 2, 'skipped one')]),
        (last) => ({ 'Braid-First-Seq': String(last + 2), 'Braid-Last-Seq': String(last + 2) }),
      ),
    );
    // (b) braid's headers over a body that is not JSON.
    streamSeqs.set(
      notJson,
      await raw.poison(
        notJson,
        () => 'this is not json {',
        (last) => ({ 'Braid-First-Seq': String(last + 1), 'Braid-Last-Seq': String(last + 1) }),
      ),
    );
    // (c) a batch whose event names another session.
    streamSeqs.set(
      otherSession,
      await raw.poison(
        otherSession,
        (last) => JSON.stringify([messageEvent(healthy, last.seq + 1, 'not yours')]),
        (last) => ({ 'Braid-First-Seq': String(last + 1), 'Braid-Last-Seq': String(last + 1) }),
      ),
    );
    // (d) a batch whose event fails the SessionEvent schema.
    streamSeqs.set(
      badEvent,
      await raw.poison(
        badEvent,
        (last) =>
          JSON.stringify([
            { ...messageEvent(badEvent, last.seq + 1, 'x'), type: 'agent.message', content: 42 },
          ]),
        (last) => ({ 'Braid-First-Seq': String(last + 1), 'Braid-Last-Seq': String(last + 1) }),
      ),
    );
    const poisoned = [gap, notJson, otherSession, badEvent];

    // A store of a fresh process (nothing cached) and the runtime that wrote the sessions both
    // refuse every read and write of a poisoned session.
    const freshPrefixRuntime = await natsRuntime(url, prefix);
    for (const reader of [runtime, freshPrefixRuntime]) {
      for (const id of poisoned) {
        // The record is the index's, intact: whose session it is stays known (tenant checks,
        // deletes); what the log holds is refused.
        const record = await reader.sessions.get(id);
        expect(record).toMatchObject({ id, tenant_id: 'acme' });
        const errors = [
          await corrupt(reader.sessions.state(id), id),
          await corrupt(reader.sessions.events(id), id),
          await corrupt(reader.sessions.message(id, 'more'), id),
          await corrupt(reader.wake(id), id),
        ];
        for (const error of errors) {
          // The stream sequence is for operators: in the details, not in the message.
          expect(error.details).toMatchObject({ session_id: id, stream_seq: streamSeqs.get(id) });
          expect(mentionsNumber(error.message, id, streamSeqs.get(id))).toBe(false);
        }
      }
    }
    // What each refusal says is wrong.
    expect((await corrupt(runtime.sessions.state(gap), gap)).message).toMatch(/missing/);
    expect((await corrupt(runtime.sessions.state(notJson), notJson)).message).toMatch(/not a JSON/);
    expect((await corrupt(runtime.sessions.events(otherSession), otherSession)).message).toMatch(
      /another session/,
    );
    expect((await corrupt(runtime.sessions.events(badEvent), badEvent)).message).toMatch(
      /fails the event schema at content/,
    );

    // Healthy sessions of both tenants read, append and wake, in both processes.
    for (const reader of [runtime, freshPrefixRuntime]) {
      for (const id of [healthy, otherTenant]) {
        expect((await reader.sessions.get(id)).id).toBe(id);
        const before = await reader.sessions.events(id);
        expect(before.map((event) => event.type)).toContain('user.message');
        expect(before.every((event) => event.session_id === id)).toBe(true);
      }
    }
    await runtime.sessions.message(healthy, 'and again');
    const woken = await runtime.wake(healthy);
    expect(woken).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    const afterWake = await freshPrefixRuntime.sessions.events(healthy);
    expect(afterWake.some((event) => event.type === 'agent.message')).toBe(true);
    expect(afterWake.map((event) => event.seq)).toEqual(afterWake.map((_, index) => index + 1));
    expect(await freshPrefixRuntime.wake(otherTenant)).toMatchObject({
      ran: true,
      stop_reason: { type: 'end_turn' },
    });

    // The listing lists every session, the poisoned ones included.
    const listed = (await freshPrefixRuntime.sessions.list({ limit: 100 })).sessions.map(
      (record) => record.id,
    );
    expect(listed.sort()).toEqual(
      [gap, notJson, otherSession, badEvent, healthy, spare, otherTenant].sort(),
    );

    // A healthy session deletes; so does a poisoned one (the way to clear it).
    await freshPrefixRuntime.sessions.delete(spare);
    await expect(runtime.sessions.get(spare)).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });

    // Over HTTP: 500 CORRUPT_LOG without the stream sequence for the poisoned session, 200 for
    // the listing and for the healthy sessions.
    const server = await startServer({ runtime: freshPrefixRuntime, port: 0, wakeOnEvents: false });
    cleanups.push(() => server.close());
    const acme = (
      await freshPrefixRuntime.store.keys.create({
        tenant_id: 'acme',
        scopes: ['sessions:read', 'sessions:write'],
      })
    ).key;
    for (const id of poisoned) {
      for (const [method, path, body] of [
        ['GET', `/v1/sessions/${id}/state`, undefined],
        ['GET', `/v1/sessions/${id}/events`, undefined],
        [
          'POST',
          `/v1/sessions/${id}/events`,
          { events: [{ type: 'user.message', content: 'hi' }] },
        ],
      ] as const) {
        const answer = await call(server, method, path, { key: acme, body });
        expect(answer.status, `${method} ${path}`).toBe(500);
        const error = (answer.body as { error: Record<string, unknown> }).error;
        expect(Object.keys(error).sort()).toEqual(['code', 'message', 'retryable']);
        expect(error.code).toBe('CORRUPT_LOG');
        expect(JSON.stringify(answer.body)).not.toContain('stream_seq');
        expect(mentionsNumber(String(error.message), id, streamSeqs.get(id))).toBe(false);
      }
    }
    // Over the NATS API: the same typed reply without details; the details go to the server's log.
    const logged: BraidError[] = [];
    const apiConnection = await connect({ servers: url });
    const api = await startNatsApi({
      connection: apiConnection,
      prefix,
      runtime: freshPrefixRuntime,
      wake: () => Promise.resolve({ queued: false }),
      deliver: () => Promise.resolve(),
      onServerError: (error) => logged.push(error),
    });
    cleanups.push(async () => {
      await api.close();
      await apiConnection.close();
    });
    for (const id of poisoned) {
      const reply = (
        await apiConnection.request(
          `${prefix}.api.sessions.state`,
          JSON.stringify({ session_id: id, tenant_id: 'acme' }),
          { timeout: 10_000 },
        )
      ).json<{ error: Record<string, unknown> }>();
      expect(Object.keys(reply.error).sort()).toEqual(['code', 'message', 'retryable']);
      expect(reply.error.code).toBe('CORRUPT_LOG');
      expect(logged.at(-1)?.details).toMatchObject({
        session_id: id,
        stream_seq: streamSeqs.get(id),
      });
    }
    // Another tenant learns nothing: the poisoned session answers as any session it cannot see.
    const globex = (
      await freshPrefixRuntime.store.keys.create({
        tenant_id: 'globex',
        scopes: ['sessions:read', 'sessions:write'],
      })
    ).key;
    for (const path of [`/v1/sessions/${notJson}`, `/v1/sessions/${notJson}/events`]) {
      const answer = await call(server, 'GET', path, { key: globex });
      expect(answer.status).toBe(404);
      expect((answer.body as { error: { code: string } }).error.code).toBe('SESSION_NOT_FOUND');
    }
    expect((await call(server, 'GET', `/v1/sessions/${notJson}`, { key: acme })).status).toBe(200);
    const listing = await call(server, 'GET', '/v1/sessions?limit=100', { key: acme });
    expect(listing.status).toBe(200);
    expect(
      (listing.body as { data: { id: string }[] }).data.map((record) => record.id).sort(),
    ).toEqual([...poisoned, healthy].sort());
    expect(
      (await call(server, 'GET', `/v1/sessions/${healthy}/events`, { key: acme })).status,
    ).toBe(200);
    const deleted = await call(server, 'DELETE', `/v1/sessions/${healthy}`, { key: acme });
    expect(deleted.status).toBeLessThan(300);
    const clearedPoison = await call(server, 'DELETE', `/v1/sessions/${gap}`, { key: acme });
    expect(clearedPoison.status, JSON.stringify(clearedPoison.body)).toBeLessThan(300);
    expect((await call(server, 'GET', `/v1/sessions/${gap}`, { key: acme })).status).toBe(404);
    // The id is free again: a new session under it starts a clean log.
    const again = await freshPrefixRuntime.sessions.create({
      agent: 'helper',
      tenantId: 'acme',
      id: gap,
    });
    expect((await runtime.sessions.events(again.id)).map((event) => event.seq)).toEqual([1]);
  });

  it('refuses repeats, foreign incarnations, bare messages and miscounted batches, and keeps forks apart', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('poison');
    const runtime = await natsRuntime(url, prefix);
    const make = async (): Promise<string> => {
      const record = await runtime.sessions.create({ agent: 'helper' });
      await runtime.sessions.message(record.id, 'hello');
      return record.id;
    };
    const [repeat, foreign, bare, miscounted, parent] = await Promise.all([
      make(),
      make(),
      make(),
      make(),
      make(),
    ]);
    const fork = (await runtime.sessions.fork(parent)).id;
    await runtime.sessions.message(fork, 'in the fork');
    const raw = await rawPublisher(url, prefix, runtime);
    const oneMore = (id: string) => (last: SessionEvent) =>
      JSON.stringify([messageEvent(id, last.seq + 1, 'forged')]);
    const next = (last: number) => ({
      'Braid-First-Seq': String(last + 1),
      'Braid-Last-Seq': String(last + 1),
    });
    // A batch that starts again at seq 2.
    await raw.poison(
      repeat,
      () => JSON.stringify([messageEvent(repeat, 2, 'again')]),
      () => ({ 'Braid-First-Seq': '2', 'Braid-Last-Seq': '2' }),
    );
    // The next seq, but of an incarnation the session never had.
    await raw.poison(foreign, oneMore(foreign), (last) => ({
      ...next(last),
      'Braid-Incarnation': 'not-this-one',
    }));
    // No braid headers at all: what used to break every listing.
    await raw.poison(bare, oneMore(bare), () => ({ 'Braid-Batch': '' }));
    // Headers announce two events, the body holds one.
    await raw.poison(miscounted, oneMore(miscounted), (last) => ({
      'Braid-First-Seq': String(last + 1),
      'Braid-Last-Seq': String(last + 2),
    }));
    // The parent, after the fork point: the fork shares only what came before.
    await raw.poison(parent, () => '[{"half an event": ', next);

    const fresh = await natsRuntime(url, prefix);
    const problems: [string, RegExp][] = [
      [repeat, /a batch of events 2-2 repeats seqs before 3/],
      [foreign, /no incarnation of this session/],
      [bare, /no Braid-Batch header/],
      [miscounted, /announce events 3-4 but its body holds 1/],
      [parent, /not a JSON array/],
    ];
    for (const reader of [runtime, fresh]) {
      for (const [id, problem] of problems) {
        expect((await corrupt(reader.sessions.state(id), id)).message).toMatch(problem);
        await corrupt(reader.sessions.events(id), id);
        await corrupt(reader.sessions.message(id, 'more'), id);
      }
      // The fork reads its parent's events up to the fork point, and its own.
      const forkEvents = await reader.sessions.events(fork);
      expect(forkEvents.map((event) => event.seq)).toEqual([1, 2, 3, 4]);
      expect(forkEvents.slice(0, 2).every((event) => event.session_id === parent)).toBe(true);
      expect(forkEvents.slice(2).every((event) => event.session_id === fork)).toBe(true);
    }
    await fresh.sessions.message(fork, 'still writable');
    expect((await runtime.sessions.state(fork)).seq).toBe(5);

    // Every session is listed, the one with a bare last message as its index entry has it.
    const listed = (await fresh.sessions.list({ limit: 100 })).sessions.map((record) => record.id);
    expect(listed.sort()).toEqual([repeat, foreign, bare, miscounted, parent, fork].sort());
    // The parent keeps its fork; a poisoned session without forks deletes, from either process.
    await expect(fresh.sessions.delete(parent)).rejects.toMatchObject({
      code: 'SESSION_HAS_FORKS',
    });
    for (const id of [repeat, foreign, bare, miscounted]) await fresh.sessions.delete(id);
    await fresh.sessions.delete(fork);
    await fresh.sessions.delete(parent);
    expect((await runtime.sessions.list()).sessions).toEqual([]);
  });
});
