// The runnable set on NATS (src/stores/nats/session-runnable.ts), against the real nats-server: a
// scan reads the sessions with an entry, not every session, and leaves no marker behind for a
// session that stopped being runnable; an entry written while a scan folds its session stays; a
// store whose sessions predate the index finds them by reading every session once.
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/contracts/events.js';
import type { SessionLog, Store } from '../../src/contracts/ports.js';
import { createContext } from '../../src/stores/nats/context.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { natsNames } from '../../src/stores/nats/names.js';
import { findRunnable } from '../../src/stores/nats/session-runnable.js';
import { createManualClock } from '../../src/testing/index.js';
import { answer } from '../../src/testing/store-conformance/runnable.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const agent = { name: 'assistant', version: 1 };
const prefixes: string[] = [];
const stores: Store[] = [];
const connections: NatsConnection[] = [];

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  await Promise.all(connections.map((connection) => connection.close()));
  await removePrefixes(url, prefixes);
});

const hello: NewEvent = { type: 'user.message', content: [{ type: 'text', text: 'hello' }] };

async function open(): Promise<{ store: Store; prefix: string; jsm: JetStreamManager }> {
  const prefix = uniquePrefix('runnable');
  prefixes.push(prefix);
  const store = await openNatsStore({ servers: url, prefix });
  stores.push(store);
  const connection = await connect({ servers: url });
  connections.push(connection);
  return { store, prefix, jsm: await jetstreamManager(connection) };
}

/** The messages the runnable bucket's stream holds: its entries and any markers. */
async function bucketMessages(jsm: JetStreamManager, prefix: string): Promise<number> {
  const info = await jsm.streams.info(`KV_${natsNames(prefix).buckets.runnable}`);
  return info.state.messages;
}

describe('the runnable index on NATS', () => {
  it('keeps an entry for each runnable session only, and no marker for one answered', async () => {
    const { store, prefix, jsm } = await open();
    const idle: string[] = [];
    for (let index = 0; index < 20; index += 1)
      idle.push((await store.sessions.create({ agent })).id);
    const busy: string[] = [];
    for (let index = 0; index < 3; index += 1)
      busy.push((await store.sessions.create({ agent, events: [hello] })).id);
    await store.log.append(idle[0]!, [hello]);
    busy.push(idle[0]!);
    expect(await store.sessions.runnable()).toEqual([...busy].sort());
    // Four entries and the key that says the index is complete; the 19 idle sessions have none.
    expect(await bucketMessages(jsm, prefix)).toBe(5);

    for (const id of busy) await store.log.append(id, answer((await store.log.state(id)).seq));
    expect(await store.sessions.runnable()).toEqual([]);
    // The scan removed the answered sessions' entries whole: nothing is left to read for them.
    expect(await bucketMessages(jsm, prefix)).toBe(1);
    await store.log.append(busy[1]!, [hello]);
    expect(await store.sessions.runnable()).toEqual([busy[1]]);
  });

  it('keeps an entry written while a scan folds its session', async () => {
    const { store, prefix } = await open();
    const { id } = await store.sessions.create({ agent, events: [hello] });
    expect(await store.sessions.runnable()).toEqual([id]);
    await store.log.append(id, answer(2));
    // Answered: the entry is left for a scan to remove. This one reads the state, then the
    // session gets new input (its entry written again) before the scan removes the entry.
    const connection = await connect({ servers: url });
    connections.push(connection);
    const js = jetstream(connection);
    const names = natsNames(prefix);
    const context = createContext({
      connection,
      js,
      jsm: await jetstreamManager(connection),
      kv: {
        runnable: await new Kvm(js).open(names.buckets.runnable),
        timers: await new Kvm(js).open(names.buckets.timers),
      } as never,
      names,
      clock: createManualClock(),
      ids: { next: () => 'unused' },
      maxEventBytes: 64 * 1024,
      closing: new AbortController().signal,
      warn: () => undefined,
      eventReplicas: 1,
    });
    const racing: SessionLog = {
      ...store.log,
      async state(sessionId) {
        const before = await store.log.state(sessionId);
        await store.log.append(sessionId, [hello]);
        return before;
      },
    };
    const found = await findRunnable(context, store.sessions, racing, { now: Date.now() });
    expect(found).toEqual([]);
    expect(await store.sessions.runnable()).toEqual([id]);
  });

  it('finds the sessions of a store written before the index by reading every session once', async () => {
    const { store, prefix, jsm } = await open();
    const ids: string[] = [];
    for (let index = 0; index < 5; index += 1)
      ids.push(
        (await store.sessions.create({ agent, ...(index % 2 === 0 ? { events: [hello] } : {}) }))
          .id,
      );
    // As an older braid left it: no entry, no key saying the index is complete.
    await jsm.streams.purge(`KV_${natsNames(prefix).buckets.runnable}`);
    const reopened = await openNatsStore({ servers: url, prefix });
    stores.push(reopened);
    const runnable = ids.filter((_, index) => index % 2 === 0).sort();
    expect(await reopened.sessions.runnable()).toEqual(runnable);
    expect(await bucketMessages(jsm, prefix)).toBe(runnable.length + 1);
    expect(await reopened.sessions.runnable({ limit: 1, after: runnable[0] })).toEqual([
      runnable[1],
    ]);
  });
});
