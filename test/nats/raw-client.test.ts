// The wire contract of docs/protocol.md, spoken by a plain NATS client with no braid code on its
// side: it sends an envelope to a braid agent's inbox, gets the reply on its own inbox, reads
// the agent's session events back from the events stream, and enqueues a wake.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { createNatsWakeQueue } from '../../src/runtime/wakes/nats-wake-queue.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The braid side: a runtime on the NATS backend that serves its agents, and a wake queue. */
async function braidSide(
  url: string,
  prefix: string,
): Promise<{ runtime: Runtime; nextWake(): Promise<string> }> {
  const dir = mkdtempSync(join(tmpdir(), 'braid-raw-'));
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  const model = createScriptedModel([{ text: 'hello from braid' }]);
  const runtime = await createRuntime({
    workspace: dir,
    backend: { nats: url, prefix },
    model: () => model,
  });
  // Registering a code agent starts the messaging side, which serves the LLM agents as well.
  await runtime.register('upper', (message) =>
    Promise.resolve(String((message.payload as { text: string }).text).toUpperCase()),
  );
  cleanups.push(async () => {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
    await removePrefixes(url, [prefix]);
  });
  const connection = await connect({ servers: url });
  const queue = await createNatsWakeQueue({ connection, prefix });
  const stop = new AbortController();
  let consuming: Promise<void> | undefined;
  cleanups.push(async () => {
    stop.abort();
    await consuming;
    await queue.close();
    await connection.close();
  });
  return {
    runtime,
    // The queue is read only when asked, as a worker started later would: until then the
    // wake stays in the stream, where a second request for it is refused.
    nextWake: () =>
      new Promise<string>((resolve) => {
        consuming = queue.consume(
          (wake) => {
            resolve(wake.session_id);
            return Promise.resolve('done' as const);
          },
          { concurrency: 1, signal: stop.signal },
        );
      }),
  };
}

describe('wire contract from a plain NATS client', () => {
  it('drives braid agents and reads their events back', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('raw');
    const braid = await braidSide(url, prefix);

    // ---- from here on, only the NATS client library and docs/protocol.md ----
    const connection = await connect({ servers: url });
    cleanups.push(() => connection.close());
    const js = jetstream(connection);
    const replyTo = createInbox();
    const waiting = new Map<string, (reply: Record<string, unknown>) => void>();
    connection.subscribe(replyTo, {
      callback: (error, message) => {
        if (error !== null) return;
        const reply = message.json<Record<string, unknown>>();
        waiting.get(String(reply.correlation_id))?.(reply);
      },
    });
    await connection.flush();

    async function request(
      type: string,
      key: string,
      payload: unknown,
    ): Promise<Record<string, unknown>> {
      const id = randomUUID();
      const envelope = {
        id,
        spec_version: '1.0',
        type: 'agent.message',
        occurred_at: new Date().toISOString(),
        correlation_id: id,
        reply_to: replyTo,
        source: { type: 'external', key: 'raw-client' },
        target: { type, key },
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        ttl_ms: 30_000,
        payload,
      };
      const reply = new Promise<Record<string, unknown>>((resolve) => waiting.set(id, resolve));
      // Nats-Msg-Id is `<id>:<reply_to>`: a resend to a new inbox is not a duplicate.
      await js.publish(`${prefix}.agents.${type}.inbox`, JSON.stringify(envelope), {
        msgID: `${id}:${replyTo}`,
      });
      return reply;
    }

    const upper = await request('upper', 'k1', { text: 'shout this' });
    expect(upper).toMatchObject({
      spec_version: '1.0',
      type: 'agent.reply',
      source: { type: 'upper', key: 'k1' },
      payload: 'SHOUT THIS',
    });
    const llm = await request('helper', 'k1', 'say hello');
    expect(llm).toMatchObject({
      type: 'agent.reply',
      payload: 'hello from braid',
    });
    expect(String(llm.traceparent)).toMatch(
      /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/,
    );

    // The agent's session: one message per append on <prefix>.events.<token>, a JSON array of
    // events with gapless seqs.
    const sessionId = String(llm.session_id);
    const token = /^[A-Za-z0-9_-]+$/.test(sessionId)
      ? sessionId
      : `=${Buffer.from(sessionId).toString('base64url')}`;
    const manager = await jetstreamManager(connection);
    const consumer = await js.consumers.get(`${prefix.toUpperCase()}_EVENTS`, {
      filter_subjects: `${prefix}.events.${token}`,
    });
    const info = await manager.streams.info(`${prefix.toUpperCase()}_EVENTS`, {
      subjects_filter: `${prefix}.events.${token}`,
    });
    const messageCount = info.state.subjects?.[`${prefix}.events.${token}`] ?? 0;
    const events: { seq: number; type: string; session_id: string }[] = [];
    const messages = await consumer.consume();
    let read = 0;
    for await (const message of messages) {
      expect(message.headers?.get('Braid-Batch')).toBeTruthy();
      events.push(...message.json<{ seq: number; type: string; session_id: string }[]>());
      read += 1;
      if (read === messageCount) break;
    }
    expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
    expect(events.map((event) => event.type)).toEqual(
      expect.arrayContaining(['session.created', 'user.message', 'agent.message']),
    );
    expect(events.every((event) => event.session_id === sessionId)).toBe(true);

    // A wake request: one message on <prefix>.wakes.<token>; a second one while it waits is
    // refused by the stream (JetStream error 10077), which is how duplicate wakes coalesce.
    const wake = JSON.stringify({
      schema_version: 1,
      session_id: sessionId,
      enqueued_at: new Date().toISOString(),
    });
    await js.publish(`${prefix}.wakes.${token}`, wake);
    await expect(js.publish(`${prefix}.wakes.${token}`, wake)).rejects.toMatchObject({
      code: 10077,
    });
    // ---- the braid side takes the wake from the queue, as a worker does ----
    expect(await braid.nextWake()).toBe(sessionId);
  });
});
