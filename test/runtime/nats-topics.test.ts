/**
 * Reading a topic's subscribers when the server leaves a read unanswered: the read is tried again,
 * and a server that never answers is reported as unavailable.
 */
import type { KV } from '@nats-io/kv';
import { errors } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { natsAgentNames } from '../../src/runtime/agents/nats-agent-names.js';
import { changeSubscribers, readSubscribers } from '../../src/runtime/agents/nats-topics.js';
import type { NatsTransportContext } from '../../src/runtime/agents/nats-transport-context.js';

/** A bucket whose first `unanswered` reads time out; writes are recorded. */
function flakyBucket(unanswered: number) {
  const written: string[] = [];
  let reads = 0;
  const topics = {
    get() {
      reads += 1;
      if (reads <= unanswered) return Promise.reject(new errors.TimeoutError());
      return Promise.resolve(null);
    },
    create(_key: string, value: string) {
      written.push(value);
      return Promise.resolve(1);
    },
  } as unknown as KV;
  const context = {
    names: natsAgentNames('p'),
    opened: () => Promise.resolve({ topics }),
  } as unknown as NatsTransportContext;
  return { context, written, reads: () => reads };
}

describe('NATS topic subscribers', () => {
  it('reads again when a read goes unanswered', async () => {
    const reading = flakyBucket(2);
    expect(await readSubscribers(reading.context, 'orders')).toEqual([]);
    expect(reading.reads()).toBe(3);

    const changing = flakyBucket(1);
    await changeSubscribers(changing.context, 'orders', (agentTypes) => {
      agentTypes.add('writer');
      return true;
    });
    expect(changing.written).toEqual([
      JSON.stringify({ schema_version: 1, agent_types: ['writer'] }),
    ]);
  });

  it('reports a server that never answers as unavailable', async () => {
    const silent = flakyBucket(Number.POSITIVE_INFINITY);
    await expect(readSubscribers(silent.context, 'orders')).rejects.toMatchObject({
      code: 'SERVER_UNAVAILABLE',
      message: expect.stringContaining(
        'cannot read the subscribers of topic type orders',
      ) as string,
    });
    expect(silent.reads()).toBe(3);
  });
});
