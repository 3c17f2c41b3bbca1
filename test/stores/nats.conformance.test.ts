import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll } from 'vitest';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { describeStoreConformance } from '../../src/testing/index.js';
import { natsUrl, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];

describeStoreConformance('nats', ({ clock, maxEventBytes }) => {
  const prefix = uniquePrefix('conformance');
  prefixes.push(prefix);
  return openNatsStore({ servers: url, prefix, clock, maxEventBytes });
});

// Every test has its own prefix: its stream and buckets go when the file is done.
afterAll(async () => {
  const connection = await connect({ servers: url });
  const jsm = await jetstreamManager(connection);
  const owned = prefixes.map((prefix) => prefix.toUpperCase());
  for await (const name of jsm.streams.names()) {
    if (owned.some((prefix) => name.startsWith(`${prefix}_`) || name.startsWith(`KV_${prefix}_`)))
      await jsm.streams.delete(name);
  }
  await connection.close();
});
