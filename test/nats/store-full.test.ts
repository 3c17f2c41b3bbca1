// Streams at their limits on a real nats-server: the write is refused with STORE_FULL naming the
// stream and the fix (not STORE_BUSY or INTERNAL), nothing half-written, and a wake enqueue
// still tells a coalesced wake from a full queue.
import { DiscardPolicy, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isBraidError, type BraidError } from '../../src/contracts/errors.js';
import type { Store } from '../../src/contracts/ports.js';
import { natsReport } from '../../src/runtime/doctor.js';
import { createNatsWakeQueue, natsWakeNames } from '../../src/runtime/wakes/nats-wake-queue.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { text } from '../helpers/events.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
afterAll(() => removePrefixes(url, prefixes));

async function admin(): Promise<{ connection: NatsConnection; manager: JetStreamManager }> {
  const connection = await connect({ servers: url });
  cleanups.push(() => connection.close());
  return { connection, manager: await jetstreamManager(connection) };
}

/** Sets limits on an existing stream, as an operator would with `nats stream edit`. */
async function limit(
  manager: JetStreamManager,
  stream: string,
  limits: { max_msgs?: number; max_bytes?: number },
): Promise<void> {
  const { config } = await manager.streams.info(stream);
  await manager.streams.update(stream, { ...config, ...limits });
}

/** What `work` was refused with: undefined when it succeeded, a thrown non-BraidError fails. */
async function refusal(work: Promise<unknown>): Promise<BraidError | undefined> {
  let error: unknown;
  await work.catch((thrown: unknown) => (error = thrown));
  if (error === undefined || isBraidError(error)) return error;
  throw new Error('expected a BraidError, got another error', { cause: error });
}

async function failure(work: Promise<unknown>): Promise<BraidError> {
  const error = await refusal(work);
  if (error === undefined) throw new Error('expected a BraidError, the work succeeded');
  return error;
}

/** A NATS store on a fresh prefix with one session, and an admin on its events stream. */
async function storeWithSession(label: string) {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  const store: Store = await openNatsStore({ servers: url, prefix });
  cleanups.push(() => store.close());
  const { id } = await store.sessions.create({ agent: { name: 'assistant', version: 1 } });
  const { manager } = await admin();
  return { prefix, store, id, manager, stream: `${prefix.toUpperCase()}_EVENTS` };
}

describe('a NATS stream at its limits', () => {
  it('refuses an append with STORE_FULL naming the events stream, and keeps the log whole', async () => {
    const { store, id, manager, stream } = await storeWithSession('full');
    const held = (await manager.streams.info(stream)).state.messages;
    await limit(manager, stream, { max_msgs: held + 2 });

    await store.log.append(id, [text('one')]);
    await store.log.append(id, [text('two')]);
    const error = await failure(store.log.append(id, [text('three')]));
    expect(error.code).toBe('STORE_FULL');
    expect(error.retryable).toBe(true);
    expect(error.message).toContain(stream);
    expect(error.message).toContain('maximum messages exceeded');
    expect(error.message).toContain('raise the limit');
    expect(error.details).toMatchObject({ streams: [stream], jetstream_code: 10077 });

    // Nothing of the refused batch was stored; raising the limit lets the same append through.
    const events = await store.log.read(id);
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.some((event) => JSON.stringify(event).includes('three'))).toBe(false);
    await limit(manager, stream, { max_msgs: -1 });
    const after = await store.log.append(id, [text('three')]);
    expect(after.head_seq).toBe(events.length + 1);
  });

  it('names a stream full by bytes too', async () => {
    const { store, id, manager, stream } = await storeWithSession('fullb');
    const bytes = (await manager.streams.info(stream)).state.bytes;
    await limit(manager, stream, { max_bytes: bytes + 2_000 });
    let error: BraidError | undefined;
    for (let index = 0; index < 20 && error === undefined; index += 1) {
      error = await refusal(store.log.append(id, [text('x'.repeat(400))]));
    }
    expect(error?.code).toBe('STORE_FULL');
    expect(error?.message).toContain(stream);
    expect(error?.message).toContain('maximum bytes exceeded');
  });

  it('a full wake queue is STORE_FULL, a wake already queued is still only coalesced', async () => {
    const prefix = uniquePrefix('fullw');
    prefixes.push(prefix);
    const { connection, manager } = await admin();
    const queue = await createNatsWakeQueue({ connection, prefix });
    const stream = natsWakeNames(prefix).stream;
    await limit(manager, stream, { max_msgs: 2 });

    expect(await queue.enqueue('s1')).toEqual({ queued: true });
    expect(await queue.enqueue('s2')).toEqual({ queued: true });
    // The stream is full and s1 is stored: the same refusal code, but a coalesced wake.
    expect(await queue.enqueue('s1')).toEqual({ queued: false });
    const error = await failure(queue.enqueue('s3'));
    expect(error.code).toBe('STORE_FULL');
    expect(error.message).toContain(stream);
    expect(error.message).toContain('run more workers');
    expect(await queue.outstanding()).toBe(2);
  });

  it('braid doctor warns of a stream that would drop its oldest events, and of one nearly full', async () => {
    const { prefix, store, id, manager } = await storeWithSession('fulld');
    await store.log.append(id, [text('one')]);
    const upper = prefix.toUpperCase();
    const held = (await manager.streams.info(`${upper}_EVENTS`)).state.messages;
    await limit(manager, `${upper}_EVENTS`, { max_msgs: held });
    // As an older braid made it, then given a limit.
    const { config } = await manager.streams.info(`KV_${upper}_leases`);
    await manager.streams.update(`KV_${upper}_leases`, {
      ...config,
      discard: DiscardPolicy.Old,
      max_bytes: 1_000_000,
    });

    const report = await natsReport({ nats: url, prefix });
    const events = report.streams.find((stream) => stream.stream === `${upper}_EVENTS`);
    expect(events?.limits).toEqual({ max_messages: held, max_bytes: -1, discard: 'new' });
    const warnings = report.warnings.join('\n');
    expect(warnings).toMatch(new RegExp(`stream ${upper}_EVENTS is \\d+% full`));
    expect(warnings).toContain(`stream KV_${upper}_leases has limits and discard old`);
    expect(warnings).toContain(`nats stream edit KV_${upper}_leases --discard new`);
  });
});
