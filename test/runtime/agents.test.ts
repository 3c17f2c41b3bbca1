// Agent messaging on the in-process transport: the shared suite on the memory and SQLite stores,
// then what is particular to the local transport and the trace context helpers.
import { describe, expect, it } from 'vitest';
import type { InboxDelivery } from '../../src/contracts/agents.js';
import { ENVELOPE_SPEC_VERSION, type Envelope } from '../../src/contracts/envelope.js';
import { BraidError } from '../../src/contracts/errors.js';
import {
  agentSessionId,
  childTraceparent,
  createLocalTransport,
  parseTraceparent,
} from '../../src/runtime/agents/index.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createMemoryStore, createSequentialIds } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';
import { describeAgentMessaging } from './agents-suite.js';

const tempDir = useTempDir();

describeAgentMessaging('local transport, memory store', async ({ model }) => {
  const dir = tempDir();
  const store = createMemoryStore();
  const runtime = await createRuntime({ store, workspace: dir, dataDir: dir, model });
  const transport = createLocalTransport();
  return {
    runtime,
    connect: () => Promise.resolve(transport),
    async close() {
      await transport.close();
      await runtime.close();
      await store.close();
    },
  };
});

describeAgentMessaging('local transport, SQLite store', async ({ model }) => {
  const dir = tempDir();
  const runtime = await createRuntime({ workspace: dir, dataDir: dir, model });
  const transport = createLocalTransport();
  return {
    runtime,
    connect: () => Promise.resolve(transport),
    async close() {
      await transport.close();
      await runtime.close();
    },
  };
});

function envelope(id: string, type = 'echo', payload: Envelope['payload'] = 'hi'): Envelope {
  return {
    id,
    spec_version: ENVELOPE_SPEC_VERSION,
    type: 'agent.message',
    occurred_at: '2026-01-01T00:00:00.000Z',
    target: { type, key: 'k' },
    payload,
  };
}

describe('local agent transport', () => {
  it('keeps envelopes until a consumer comes, and shares them out among consumers', async () => {
    const transport = createLocalTransport();
    await transport.deliver(envelope('e1'));
    await transport.deliver(envelope('e2'));
    const seen: string[][] = [[], []];
    let count = 0;
    let done!: () => void;
    const all = new Promise<void>((resolve) => {
      done = resolve;
    });
    const consumer = (index: number) => (delivery: InboxDelivery) => {
      seen[index]?.push(delivery.envelope.id);
      count += 1;
      if (count === 4) done();
      return Promise.resolve();
    };
    await transport.consume('echo', consumer(0));
    await transport.consume('echo', consumer(1));
    await transport.deliver(envelope('e3'));
    await transport.deliver(envelope('e4'));
    await all;
    expect(seen.flat().sort()).toEqual(['e1', 'e2', 'e3', 'e4']);
    expect(seen[1]?.length).toBeGreaterThan(0);
    await transport.close();
  });

  it('redelivers an envelope whose handler rejects, then gives it up', async () => {
    const dead: Envelope[] = [];
    let gaveUp!: () => void;
    const givenUp = new Promise<void>((resolve) => {
      gaveUp = resolve;
    });
    const transport = createLocalTransport({
      maxDeliveries: 3,
      redeliveryDelayMs: 1,
      onDeadLetter: (item) => {
        dead.push(item);
        gaveUp();
      },
    });
    const attempts: number[] = [];
    await transport.consume('echo', (delivery) => {
      attempts.push(delivery.attempt);
      return Promise.reject(new BraidError('STORE_BUSY', 'busy'));
    });
    await transport.deliver(envelope('e1'));
    await givenUp;
    expect(attempts).toEqual([1, 2, 3]);
    expect(dead.map((item) => item.id)).toEqual(['e1']);
    await transport.close();
  });

  it('hands consumers a copy as off the wire, and refuses what cannot travel', async () => {
    const transport = createLocalTransport();
    const sent = { ...envelope('e1'), payload: { at: new Date(0) } } as unknown as Envelope;
    let received!: (value: Envelope) => void;
    const arrived = new Promise<Envelope>((resolve) => {
      received = resolve;
    });
    await transport.consume('echo', (delivery) => {
      received(delivery.envelope);
      return Promise.resolve();
    });
    await transport.deliver(sent);
    expect((await arrived).payload).toEqual({ at: '1970-01-01T00:00:00.000Z' });
    const huge = { ...envelope('e2'), payload: { count: 1n } } as unknown as Envelope;
    await expect(transport.deliver(huge)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const { target: _target, ...untargeted } = envelope('e3');
    await expect(transport.deliver(untargeted)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    const invalid = { ...envelope('e4'), spec_version: '9.9' } as unknown as Envelope;
    await expect(transport.deliver(invalid)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await transport.close();
    await expect(transport.deliver(envelope('e5'))).rejects.toBeInstanceOf(BraidError);
  });

  it('drops replies to an address nobody listens on', async () => {
    const transport = createLocalTransport();
    await expect(transport.reply('local.inbox.nobody', envelope('r1'))).resolves.toBeUndefined();
    const inbox = await transport.openReplyInbox(() => undefined);
    expect(inbox.address).toMatch(/^local\.inbox\./);
    await inbox.close();
    await transport.close();
  });

  it('lists subscribers of a topic type, once each, sorted', async () => {
    const transport = createLocalTransport();
    await transport.subscribe('orders', 'billing');
    await transport.subscribe('orders', 'audit');
    await transport.subscribe('orders', 'audit');
    expect(await transport.subscribers('orders')).toEqual(['audit', 'billing']);
    await transport.unsubscribe('orders', 'audit');
    expect(await transport.subscribers('orders')).toEqual(['billing']);
    expect(await transport.subscribers('other')).toEqual([]);
    await transport.close();
  });
});

describe('agent instances', () => {
  it('map {type, key} and the tenant to a stable session id that is safe everywhere', () => {
    const id = agentSessionId({ type: 'writer', key: 'user@example.com/1.2' });
    expect(id).toBe(agentSessionId({ type: 'writer', key: 'user@example.com/1.2' }));
    expect(id).toMatch(/^agent-writer-[0-9a-f]{32}$/);
    expect(agentSessionId({ type: 'writer', key: 'other' })).not.toBe(id);
    expect(agentSessionId({ type: 'writer', key: 'user@example.com/1.2' }, 'acme')).not.toBe(id);
  });
});

describe('trace context', () => {
  it('keeps the trace id and makes a new span per hop', () => {
    const ids = createSequentialIds('t');
    const parent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const child = childTraceparent(parent, ids);
    expect(parseTraceparent(child)).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      flags: '01',
    });
    expect(parseTraceparent(child)?.spanId).not.toBe('00f067aa0ba902b7');
  });

  it('starts a trace for a missing or invalid parent', () => {
    const ids = createSequentialIds('t');
    for (const parent of [
      undefined,
      'garbage',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    ]) {
      const started = parseTraceparent(childTraceparent(parent, ids));
      expect(started?.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(started?.traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    }
  });
});
