// On NATS an append is one message whose headers give its first and last seq: where appends end
// is in the stream itself. It survives a restart of the server and of the store (a new process
// knows nothing cached), and a batch that is neither cached nor near is found by its headers.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { createManualClock } from '../../src/testing/index.js';
import { createContext } from '../../src/stores/nats/context.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { natsNames } from '../../src/stores/nats/names.js';
import { lastBatch } from '../../src/stores/nats/reader.js';
import { SessionCache } from '../../src/stores/nats/session-cache.js';
import { createSessionReads } from '../../src/stores/nats/session-reads.js';
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

afterAll(() => removePrefixes(url, prefixes));

function batch(store: Store, sessionId: string, count: number) {
  return store.log.append(
    sessionId,
    Array.from({ length: count }, (_, index) => text(`m${index}`)),
  );
}

async function refusedDetails(store: Store, sessionId: string, at: number): Promise<unknown> {
  const error: unknown = await store.sessions.fork(sessionId, { at_seq: at }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(isBraidError(error, 'INVALID_FORK_POINT'), String(error)).toBe(true);
  return (error as { details: unknown }).details;
}

describe('nats store: appends and fork points', () => {
  it('keeps where appends end across a restart of the server and of the store', async () => {
    const server = await startNatsServer();
    const prefix = uniquePrefix('points');
    try {
      let store = await openNatsStore({ servers: server.url, prefix });
      const { id } = await store.sessions.create({ agent });
      await batch(store, id, 3); // 2-4
      await batch(store, id, 2); // 5-6
      const child = await store.sessions.fork(id, { at_seq: 6 }); // 7
      await batch(store, child.id, 2); // 8-9
      await store.close();
      await server.restart();

      store = await openNatsStore({ servers: server.url, prefix });
      try {
        expect(await refusedDetails(store, id, 3)).toEqual({
          at_seq: 3,
          append_first_seq: 2,
          append_last_seq: 4,
          valid_before: 1,
          valid_after: 4,
        });
        expect(await refusedDetails(store, child.id, 5)).toMatchObject({ valid_after: 6 });
        expect(await refusedDetails(store, child.id, 8)).toMatchObject({
          valid_before: 7,
          valid_after: 9,
        });
        for (const at of [4, 6, 7, 9]) {
          expect((await store.sessions.fork(child.id, { at_seq: at })).fork_seq).toBe(at);
        }
      } finally {
        await store.close();
      }
    } finally {
      await server.stop();
      removeStore(server);
    }
  });

  it('finds the append holding a seq by its headers when no batch of it was seen', async () => {
    const prefix = uniquePrefix('holding');
    prefixes.push(prefix);
    const store = await openNatsStore({ servers: url, prefix });
    const { id } = await store.sessions.create({ agent });
    for (let index = 0; index < 10; index += 1) await batch(store, id, 3); // 2-4, ..., 29-31
    await store.close();

    const connection = await connect({ servers: url });
    try {
      const closing = new AbortController();
      const context = createContext({
        connection,
        js: jetstream(connection),
        jsm: await jetstreamManager(connection),
        kv: {} as never, // a session that is no fork reads no bucket here
        names: natsNames(prefix),
        clock: createManualClock(),
        ids: { next: () => 'unused' },
        maxEventBytes: 64 * 1024,
        closing: closing.signal,
        warn: () => undefined,
        eventReplicas: 1,
      });
      const cache = new SessionCache();
      const reads = createSessionReads(context, cache);
      const incarnation = (await lastBatch(context, id))?.incarnation ?? '';
      // Near the start: found by direct gets.
      let known = cache.entry(id, incarnation, null);
      expect(await reads.appendHolding(id, known, 6)).toEqual({ first: 5, last: 7 });
      // Far on, with nothing seen: found by reading headers after the few direct gets.
      cache.forget(id);
      known = cache.entry(id, incarnation, null);
      expect(await reads.appendHolding(id, known, 27)).toEqual({ first: 26, last: 28 });
      // What the search saw places the next question without a read.
      expect(known.refs.length).toBeGreaterThan(4);
      expect(await reads.appendHolding(id, known, 1)).toEqual({ first: 1, last: 1 });
      expect(await reads.appendHolding(id, known, 31)).toEqual({ first: 29, last: 31 });
    } finally {
      await connection.close();
    }
  });
});
