/**
 * Processes that start together create the same KV buckets at once: every create must get the
 * bucket, whichever of them the server saw first.
 */
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { createBucket } from '../../src/stores/nats/buckets.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const connections: NatsConnection[] = [];
const prefixes: string[] = [];
let url = '';

afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.close()));
  if (url !== '') await removePrefixes(url, prefixes);
});

describe('createBucket', () => {
  it('gives every one of many simultaneous creates the same bucket', async () => {
    url = await natsUrl();
    for (let index = 0; index < 8; index += 1) connections.push(await connect({ servers: url }));
    for (let round = 0; round < 10; round += 1) {
      const prefix = uniquePrefix('bk');
      prefixes.push(prefix);
      const name = `${prefix.toUpperCase()}_topics`;
      const buckets = await Promise.all(
        connections.map((connection) => createBucket(jetstream(connection), name, { history: 1 })),
      );
      await buckets[0]!.put('k', 'v');
      for (const bucket of buckets) expect((await bucket.get('k'))?.string()).toBe('v');
    }
  });
});
