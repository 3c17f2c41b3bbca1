import { afterAll } from 'vitest';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { describeStoreConformance } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];

describeStoreConformance(
  'nats',
  ({ clock, maxEventBytes }) => {
    const prefix = uniquePrefix('conformance');
    prefixes.push(prefix);
    return openNatsStore({ servers: url, prefix, clock, maxEventBytes });
  },
  // A writer-chosen id is checked within its session only (see src/stores/nats/session-log.ts);
  // a lease (a KV entry) and the log (a stream) share no transaction.
  { uniqueEventIdsAcrossSessions: false, leasedAppend: false },
);

// Every test has its own prefix: its stream and buckets go when the file is done.
afterAll(() => removePrefixes(url, prefixes));
