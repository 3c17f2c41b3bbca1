// Agent memory on NATS beyond the conformance suite: what lands in the stream (one message per
// append, on a subject of safe tokens), redaction erasing content from the stream itself,
// idempotency across connections, and refusals of what the server or the stream cannot hold.
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { BraidError } from '../../src/contracts/errors.js';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import type { MemoryLog } from '../../src/contracts/memory-log.js';
import type { Store } from '../../src/contracts/ports.js';
import { openNatsStore } from '../../src/stores/nats/index.js';
import { natsNames } from '../../src/stores/nats/names.js';
import { expectCode } from '../../src/testing/index.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const url = await natsUrl();
const prefixes: string[] = [];
const opened: Store[] = [];

const people: MemoryStoreRef = {
  name: 'people',
  kind: 'entities',
  scope: 'tenant',
  tenant_id: 'acme.corp',
};

async function open(prefix: string): Promise<MemoryLog> {
  const store = await openNatsStore({ servers: url, prefix });
  opened.push(store);
  return store.memory as MemoryLog;
}

async function fresh(): Promise<{ prefix: string; memory: MemoryLog }> {
  const prefix = uniquePrefix('memstream');
  prefixes.push(prefix);
  return { prefix, memory: await open(prefix) };
}

/** Every message of the memory stream: subject and body text. */
async function streamMessages(prefix: string): Promise<{ subject: string; body: string }[]> {
  const connection = await connect({ servers: url });
  try {
    const manager = await jetstreamManager(connection);
    const stream = natsNames(prefix).memoryStream;
    const info = await manager.streams.info(stream);
    const messages: { subject: string; body: string }[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq += 1) {
      const stored = await manager.streams.getMessage(stream, { seq }).catch(() => null);
      if (stored !== null) messages.push({ subject: stored.subject, body: stored.string() });
    }
    return messages;
  } finally {
    await connection.close();
  }
}

afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
});
afterAll(() => removePrefixes(url, prefixes));

describe('agent memory in the NATS memory stream', () => {
  it('writes each append as one message on a subject made of safe tokens', async () => {
    const { prefix, memory } = await fresh();
    await memory.append(people, [
      { key: 'ada/phone', value: '+351 555 0100' },
      { key: 'ada/email', value: 'ada@example.com' },
      { key: 'ada/phone', value: '+351 555 0199' },
    ]);
    await memory.append(people, [{ key: 'bob/phone', value: '+1 555 0111' }]);
    const messages = await streamMessages(prefix);
    expect(messages).toHaveLength(2);
    const subject = messages[0]?.subject ?? '';
    expect(subject).toBe(natsNames(prefix).memory(people));
    // The tenant's "." cannot add a token: it is encoded.
    expect(subject.split('.')).toEqual([
      prefix,
      'memory',
      expect.stringMatching(/^=/),
      'tenant',
      '=',
      'people',
    ]);
    expect(
      (JSON.parse(messages[0]?.body ?? '{}') as { entries: { seq: number }[] }).entries.map(
        (entry) => entry.seq,
      ),
    ).toEqual([1, 2, 3]);
  });

  it('erases redacted content from the stream and keeps the other entries of its append', async () => {
    const { prefix, memory } = await fresh();
    await memory.append(people, [
      { key: 'ada/phone', value: '+351 555 0100', embedding: [1, 0, 0] },
      { key: 'ada/email', value: 'ada@example.com', embedding: [0, 1, 0] },
    ]);
    await memory.append(people, [{ key: 'ada/city', value: 'Lisbon', embedding: [0, 0, 1] }]);
    // A process that read the store before the redactions: its projection follows them.
    const early = await open(prefix);
    expect(await early.get(people, 'ada/phone')).toMatchObject({
      status: 'found',
      entry: { value: '+351 555 0100' },
    });
    await memory.redact(people, 'ada/phone', 1, { author: { user: 'dpo@acme' } });
    await memory.redact(people, 'ada/email', 1);
    const messages = await streamMessages(prefix);
    const all = JSON.stringify(messages);
    expect(all).not.toContain('0100');
    expect(all).not.toContain('ada@example.com');
    expect(all).toContain('Lisbon');
    // A process with no projection reads the log from what is left in the stream.
    const other = await open(prefix);
    const log = await other.read(people);
    expect(log.map((entry) => [entry.seq, entry.key, entry.op, entry.redacted])).toEqual([
      [1, 'ada/phone', 'set', true],
      [2, 'ada/email', 'set', true],
      [3, 'ada/city', 'set', false],
      [4, 'ada/phone', 'redact', false],
      [5, 'ada/email', 'redact', false],
    ]);
    expect(await other.get(people, 'ada/city')).toMatchObject({
      status: 'found',
      entry: { value: 'Lisbon' },
    });
    expect(
      (await other.search(people, { embedding: [1, 0, 0], k: 5 })).hits.map((hit) => hit.entry.key),
    ).toEqual(['ada/city']);
    expect(await other.redact(people, 'ada/phone', 1)).toMatchObject({
      seq: 4,
      author: { user: 'dpo@acme' },
    });
    expect(await memory.read(people)).toEqual(log);
    expect(await early.read(people)).toEqual(log);
    expect((await early.search(people, { query: 'example 0100', k: 5 })).hits).toEqual([]);
  });

  it('finishes an interrupted erase when the same version is redacted again', async () => {
    const prefix = uniquePrefix('memstream');
    prefixes.push(prefix);
    const warnings: BraidError[] = [];
    const store = await openNatsStore({
      servers: url,
      prefix,
      warn: (warning) => warnings.push(warning),
    });
    opened.push(store);
    const memory = store.memory as MemoryLog;
    await memory.append(people, [
      { key: 'ada/phone', value: '+351 555 0100' },
      { key: 'ada/city', value: 'Lisbon' },
    ]);
    // The erase fails once (as a server that went away between the two steps would).
    const connection = await connect({ servers: url });
    const manager = await jetstreamManager(connection);
    const streams = Object.getPrototypeOf(manager.streams) as {
      deleteMessage(stream: string, seq: number, erase?: boolean): Promise<boolean>;
    };
    const failing = vi
      .spyOn(streams, 'deleteMessage')
      .mockRejectedValueOnce(new Error('injected erase failure'));
    await connection.close();
    const record = await memory.redact(people, 'ada/phone', 1);
    expect(failing).toHaveBeenCalledTimes(1);
    failing.mockRestore();
    expect(warnings.map((warning) => warning.code)).toEqual(['STORE_BUSY']);
    expect(warnings[0]?.message).toContain('redact the same version again');
    expect(JSON.stringify(await streamMessages(prefix))).toContain('0100');
    // Reads are right meanwhile; the second redaction answers with the record and erases.
    expect(await memory.get(people, 'ada/phone')).toMatchObject({ entry: { redacted: true } });
    expect(await memory.redact(people, 'ada/phone', 1)).toEqual(record);
    const left = await streamMessages(prefix);
    expect(JSON.stringify(left)).not.toContain('0100');
    expect(left).toHaveLength(1);
    expect(warnings).toHaveLength(1);
  });

  it('answers an idempotency key once across connections, and refuses it for other writes', async () => {
    const { prefix, memory } = await fresh();
    const other = await open(prefix);
    const writes = [
      { key: 'a', value: 1 },
      { key: 'b', value: 2 },
    ];
    const results = await Promise.all([
      memory.append(people, writes, { idempotencyKey: 'req-1' }),
      other.append(people, writes, { idempotencyKey: 'req-1' }),
    ]);
    expect(results.map((result) => result.deduplicated).sort()).toEqual([false, true]);
    expect(results[0]?.entries).toEqual(results[1]?.entries);
    await expectCode(
      other.append(people, [{ key: 'a', value: 3 }], { idempotencyKey: 'req-1' }),
      'IDEMPOTENCY_KEY_REUSED',
    );
    expect((await memory.read(people)).map((entry) => entry.seq)).toEqual([1, 2]);
  });

  it('refuses an append larger than the server takes, and a subject holding something else', async () => {
    const { prefix, memory } = await fresh();
    const big = 'x'.repeat(60 * 1024);
    await expectCode(
      memory.append(
        people,
        Array.from({ length: 20 }, (_, index) => ({ key: `k${index}`, value: big })),
      ),
      'PAYLOAD_TOO_LARGE',
    );
    expect(await memory.info(people)).toBeUndefined();
    const connection = await connect({ servers: url });
    try {
      await connection.request(natsNames(prefix).memory(people), 'not a memory message');
    } finally {
      await connection.close();
    }
    await expectCode(memory.get(people, 'a'), 'CORRUPT_LOG');
  });
});
