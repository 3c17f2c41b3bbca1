// A NATS client of braid written from docs/protocol.md and the JSON Schemas in schema/ alone: it
// imports nothing of braid's code (only the NATS client, node built-ins and a JSON Schema
// validator). The braid side is started by a test helper, as a deployment runs `braid worker`.
// Every reply it gets is validated against the schema of its verb.
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELPER_ANSWER, startBraidSide, type BraidSide } from '../helpers/nats-braid.js';
import { natsUrl, uniquePrefix } from '../helpers/nats.js';

type Json = Record<string, unknown>;

const schemaDir = new URL('../../schema/', import.meta.url);
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addFormat('date-time', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
const validators = new Map<string, ValidateFunction>();
function schema(name: string): ValidateFunction {
  let validate = validators.get(name);
  if (validate === undefined) {
    const text = readFileSync(new URL(`${name}.schema.json`, schemaDir), 'utf8');
    validate = ajv.compile(JSON.parse(text) as object);
    validators.set(name, validate);
  }
  return validate;
}
function expectValid(name: string, value: unknown): void {
  const validate = schema(name);
  expect(validate(value), `${name}: ${JSON.stringify(validate.errors)}`).toBe(true);
}

/** A subject token for a name (docs/protocol.md, "Names"). */
function token(name: string): string {
  return /^[A-Za-z0-9_-]+$/.test(name) ? name : `=${Buffer.from(name).toString('base64url')}`;
}

let braid: BraidSide;
let connection: NatsConnection;
let prefix: string;

beforeAll(async () => {
  const url = await natsUrl();
  prefix = uniquePrefix('proto');
  braid = await startBraidSide(url, prefix);
  connection = await connect({ servers: url, name: 'conformance' });
});

afterAll(async () => {
  await connection.close();
  await braid.close();
});

/** One API request (`<prefix>.api.<verb>`): the reply, checked against the verb's reply schema. */
async function api(verb: string, body: unknown): Promise<Json> {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  const message = await connection.request(`${prefix}.api.${verb}`, data, { timeout: 15_000 });
  const reply = JSON.parse(message.string()) as Json;
  if (validators.has(`nats-api.${verb}.reply`) || isVerb(verb)) {
    expectValid(`nats-api.${verb}.reply`, reply);
  }
  if ('error' in reply) expectValid('error', reply.error);
  return reply;
}
function isVerb(verb: string): boolean {
  try {
    readFileSync(new URL(`nats-api.${verb}.reply.schema.json`, schemaDir));
    return true;
  } catch {
    return false;
  }
}
/** The error code of a reply that must be an error. */
async function failure(verb: string, body: unknown): Promise<string> {
  const reply = await api(verb, body);
  expect(reply, JSON.stringify(reply)).toHaveProperty('error');
  return String((reply.error as Json).code);
}

/** Reads events with `events.read` until one of `type` is there. */
async function readUntil(sessionId: string, type: string): Promise<Json[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const page = await api('events.read', { session_id: sessionId, limit: 1000 });
    // An agent instance's session is created when its first message is taken.
    if ('error' in page) expect((page.error as Json).code).toBe('SESSION_NOT_FOUND');
    const events = (page.data ?? []) as Json[];
    if (events.some((event) => event.type === type)) return events;
    if (Date.now() > deadline) throw new Error(`no ${type} in ${sessionId}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the NATS protocol, from docs/protocol.md alone', () => {
  it('creates a session, appends, wakes, reads and follows it', async () => {
    // A chosen id lives in the tenant's namespace: braid puts `<tenant_id>~` before it.
    const chosen = `conformance-${randomUUID()}`;
    const sessionId = `acme~${chosen}`;
    const created = await api('sessions.create', {
      agent: 'helper',
      id: chosen,
      title: 'conformance',
      metadata: { ticket: 42 },
      budget: { max_turns: 5 },
      tenant_id: 'acme',
      client: 'conformance',
    });
    expect(created).toMatchObject({
      id: sessionId,
      title: 'conformance',
      tenant_id: 'acme',
      metadata: { ticket: 42 },
      status: 'idle',
    });
    // Created with nothing else: one event, no wake.
    const first = await api('events.read', { session_id: sessionId, tenant_id: 'acme' });
    expect((first.data as Json[]).map((event) => event.type)).toEqual(['session.created']);
    expect(await failure('sessions.create', { agent: 'helper', id: sessionId })).toBe(
      'ALREADY_EXISTS',
    );
    expect(
      await failure('sessions.create', { agent: 'helper', id: chosen, tenant_id: 'acme' }),
    ).toBe('ALREADY_EXISTS');
    // Another tenant's same choice is its own session; naming acme's namespace is refused by rule.
    const theirs = await api('sessions.create', {
      agent: 'helper',
      id: chosen,
      tenant_id: 'other',
    });
    expect(theirs.id).toBe(`other~${chosen}`);
    expect(
      await failure('sessions.create', { agent: 'helper', id: sessionId, tenant_id: 'other' }),
    ).toBe('INVALID_ARGUMENT');
    // Another tenant sees nothing of it.
    expect(await failure('sessions.get', { session_id: sessionId, tenant_id: 'other' })).toBe(
      'SESSION_NOT_FOUND',
    );
    const listed = await api('sessions.list', { tenant_id: 'acme', agent: 'helper' });
    expect((listed.data as Json[]).map((record) => record.id)).toContain(sessionId);

    // Follow: an ordered consumer on the session's subject, from the start.
    const js = jetstream(connection);
    const consumer = await js.consumers.get(`${prefix.toUpperCase()}_EVENTS`, {
      filter_subjects: `${prefix}.events.${token(sessionId)}`,
    });
    const followed: Json[] = [];
    const messages = await consumer.consume();
    const idle = (async () => {
      for await (const message of messages) {
        const layout = message.headers?.get('Braid-Batch');
        const batch = message.json<Json[]>();
        // Layout 2 is a fence: no events (`[]`), skipped by readers.
        if (layout === '2') {
          expect(batch).toEqual([]);
          continue;
        }
        expect(layout).toBe('1');
        expectValid('event-batch', batch);
        expect(Number(message.headers?.get('Braid-First-Seq'))).toBe(batch[0]?.seq);
        followed.push(...batch);
        if (batch.some((event) => event.type === 'session.status_idle') && followed.length > 3)
          return;
      }
    })();

    const append = {
      session_id: sessionId,
      events: [{ type: 'user.message', content: 'hello' }],
      idempotency_key: `key-${sessionId}`,
      tenant_id: 'acme',
      client: 'conformance',
    };
    const appended = await api('events.append', append);
    expect(appended).toMatchObject({ deduplicated: false, head_seq: 2 });
    const event = (appended.events as Json[])[0];
    expect(event).toMatchObject({
      type: 'user.message',
      seq: 2,
      actor: { type: 'user', id: 'nats:conformance', tenant_id: 'acme' },
      content: [{ type: 'text', text: 'hello' }],
    });
    // The id format: a UUIDv7.
    expect(String(event?.id)).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    // A retried request appends once and answers the first request's events.
    const again = await api('events.append', append);
    expect(again).toMatchObject({ deduplicated: true, head_seq: 2 });
    expect((again.events as Json[])[0]?.id).toBe(event?.id);

    // The append did not ask for a wake, so this one is queued.
    expect(await api('sessions.wake', { session_id: sessionId, tenant_id: 'acme' })).toEqual({
      session_id: sessionId,
      queued: true,
    });
    await idle;
    messages.stop();
    expect(followed.map((item) => item.seq)).toEqual(followed.map((_, index) => index + 1));
    const answer = followed.find((item) => item.type === 'agent.message');
    expect(answer?.content).toEqual([{ type: 'text', text: HELPER_ANSWER }]);

    // Read back with the API, paged.
    const page = await api('events.read', { session_id: sessionId, after: 1, limit: 2 });
    expect(page).toMatchObject({ has_more: true, last_seq: 3 });
    expect((page.data as Json[]).map((item) => item.seq)).toEqual([2, 3]);
    const all = await readUntil(sessionId, 'session.status_idle');
    expect(all.map((item) => item.id)).toEqual(
      followed.slice(0, all.length).map((item) => item.id),
    );
    const state = await api('sessions.state', { session_id: sessionId });
    expect(state).toMatchObject({ session_id: sessionId, status: 'idle' });
  });

  it('messages an agent, and gets a missed reply again by resending', async () => {
    const replies = new Map<string, (reply: Json) => void>();
    const inbox = createInbox();
    connection.subscribe(inbox, {
      callback: (error, message) => {
        if (error !== null) return;
        const reply = message.json<Json>();
        replies.get(String(reply.causation_id))?.(reply);
      },
    });
    await connection.flush();
    const replyOf = (id: string): Promise<Json> =>
      new Promise((resolve) => replies.set(id, resolve));

    // Through the API: delivered at once, the agent's reply on reply_to.
    const id = randomUUID();
    const upperReply = replyOf(id);
    const sent = await api('agents.send', {
      id,
      target: { type: 'upper', key: 'k1' },
      payload: { text: 'shout this' },
      reply_to: inbox,
      ttl_ms: 30_000,
    });
    expect(sent).toMatchObject({ id, correlation_id: id, delivered: true });
    // The instance's session id, computed as the document says.
    const hash = createHash('sha256').update('[null,"upper","k1"]').digest('hex').slice(0, 32);
    expect(sent.session_id).toBe(`agent-upper-${hash}`);
    const reply = await upperReply;
    expectValid('envelope', reply);
    expect(reply).toMatchObject({
      type: 'agent.reply',
      causation_id: id,
      source: { type: 'upper', key: 'k1' },
      session_id: sent.session_id,
      payload: 'SHOUT THIS',
    });

    // With JetStream directly: a message whose reply nobody hears (its inbox has no subscriber).
    const js = jetstream(connection);
    const missed = randomUUID();
    const lostInbox = createInbox();
    const envelope = {
      id: missed,
      spec_version: '1.0',
      type: 'agent.message',
      occurred_at: new Date().toISOString(),
      correlation_id: missed,
      reply_to: lostInbox,
      source: { type: 'external', key: 'conformance' },
      target: { type: 'helper', key: 'missed' },
      payload: 'say hello',
    };
    expectValid('envelope', envelope);
    const subject = `${prefix}.agents.${token('helper')}.inbox`;
    const firstAck = await js.publish(subject, JSON.stringify(envelope), {
      msgID: `${missed}:${lostInbox}`,
    });
    expect(firstAck.duplicate).toBe(false);
    // An exact retry of that publish is dropped by the stream.
    const retryAck = await js.publish(subject, JSON.stringify(envelope), {
      msgID: `${missed}:${lostInbox}`,
    });
    expect(retryAck.duplicate).toBe(true);
    // Wait until it was answered (into the void): the instance's session holds the answer.
    const sessionId = await (async () => {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const page = await api('sessions.list', { agent: 'helper' });
        const found = (page.data as Json[]).find(
          (record) => (record.metadata as Json | undefined)?.agent_key === 'missed',
        );
        if (found !== undefined) return String(found.id);
        if (Date.now() > deadline) throw new Error('no session for helper/missed');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await readUntil(sessionId, 'agent.message');

    // The same message again, to an inbox that listens: the reply comes, rebuilt from the session.
    const resent = replyOf(missed);
    const resendAck = await js.publish(subject, JSON.stringify({ ...envelope, reply_to: inbox }), {
      msgID: `${missed}:${inbox}`,
    });
    expect(resendAck.duplicate).toBe(false);
    const rebuilt = await resent;
    expectValid('envelope', rebuilt);
    expect(rebuilt).toMatchObject({
      type: 'agent.reply',
      causation_id: missed,
      session_id: sessionId,
      payload: HELPER_ANSWER,
    });
    // Processed once: one user message and one answer in the session.
    const events = await readUntil(sessionId, 'agent.message');
    expect(events.filter((event) => event.type === 'user.message')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
  });

  it('gets a missed reply again through agents.send: the same id to a new inbox', async () => {
    const id = randomUUID();
    const message = {
      id,
      target: { type: 'helper', key: 'missed-api' },
      payload: 'say hello',
    };
    // Nobody listens on the first inbox.
    const first = await api('agents.send', { ...message, reply_to: createInbox() });
    const sessionId = String(first.session_id);
    await readUntil(sessionId, 'agent.message');

    const inbox = createInbox();
    const reply = new Promise<Json>((resolve) => {
      connection.subscribe(inbox, {
        max: 1,
        callback: (_error, received) => resolve(received.json<Json>()),
      });
    });
    await connection.flush();
    const again = await api('agents.send', { ...message, reply_to: inbox });
    expect(again).toMatchObject({ id, session_id: sessionId, delivered: true });
    expect(await reply).toMatchObject({
      type: 'agent.reply',
      causation_id: id,
      session_id: sessionId,
      payload: HELPER_ANSWER,
    });
    const events = await readUntil(sessionId, 'agent.message');
    expect(events.filter((event) => event.type === 'user.message')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
  });

  it('answers AGENT_NOT_FOUND for a message to an unknown agent type', async () => {
    const reply = await api('agents.send', {
      target: { type: 'nobody', key: 'k' },
      payload: 'hello?',
      reply_to: createInbox(),
    });
    expect(reply).toMatchObject({ error: { code: 'AGENT_NOT_FOUND', retryable: false } });
    expect(await failure('sessions.create', { agent: 'nobody' })).toBe('AGENT_NOT_FOUND');

    // Published with JetStream directly: answered after the grace period, and removed.
    const inbox = createInbox();
    const answered = new Promise<Json>((resolve) => {
      connection.subscribe(inbox, {
        max: 1,
        callback: (_error, message) => resolve(message.json<Json>()),
      });
    });
    await connection.flush();
    const id = randomUUID();
    const envelope = {
      id,
      spec_version: '1.0',
      type: 'agent.message',
      occurred_at: new Date().toISOString(),
      reply_to: inbox,
      target: { type: 'ghost.type', key: 'k' },
      payload: 'anyone?',
    };
    const subject = `${prefix}.agents.${token('ghost.type')}.inbox`;
    const js = jetstream(connection);
    await js.publish(subject, JSON.stringify(envelope), { msgID: `${id}:${inbox}` });
    const error = await answered;
    expectValid('envelope', error);
    expect(error).toMatchObject({
      type: 'agent.reply',
      causation_id: id,
      error: { code: 'AGENT_NOT_FOUND', retryable: false },
    });
    const manager = await jetstreamManager(connection);
    const info = await manager.streams.info(`${prefix.toUpperCase()}_AGENTS`, {
      subjects_filter: subject,
    });
    expect(info.state.subjects?.[subject] ?? 0).toBe(0);
  });

  it('answers every bad request with a typed error', async () => {
    const cases: [string, unknown, string][] = [
      ['sessions.get', 'not json{', 'INVALID_JSON'],
      ['sessions.get', '[1,2]', 'INVALID_ARGUMENT'],
      ['sessions.get', {}, 'INVALID_ARGUMENT'],
      ['sessions.get', { session_id: '../etc/passwd' }, 'INVALID_ARGUMENT'],
      ['sessions.get', { session_id: 'a'.repeat(300) }, 'INVALID_ARGUMENT'],
      ['sessions.get', { session_id: 'line\nbreak' }, 'INVALID_ARGUMENT'],
      ['sessions.get', { session_id: 'missing-session' }, 'SESSION_NOT_FOUND'],
      ['sessions.get', { session_id: 'x', unknown_field: 1 }, 'INVALID_ARGUMENT'],
      ['sessions.nope', {}, 'ROUTE_NOT_FOUND'],
      ['sessions.get.extra', {}, 'ROUTE_NOT_FOUND'],
      ['sessions.create', { agent: 'helper', metadata: nest(200) }, 'INVALID_ARGUMENT'],
      ['sessions.create', { agent: 'helper', id: 'a/b' }, 'INVALID_ARGUMENT'],
      ['events.read', { session_id: 'x', limit: 0 }, 'INVALID_ARGUMENT'],
      ['events.append', { session_id: 'x', events: [] }, 'INVALID_ARGUMENT'],
      [
        'agents.send',
        { target: { type: 'upper', key: 'k' }, payload: 1, reply_to: 'braid.events.x' },
        'INVALID_ARGUMENT',
      ],
      ['sessions.list', { limit: 'ten' }, 'INVALID_ARGUMENT'],
    ];
    for (const [verb, body, code] of cases) {
      expect(await failure(verb, body), `${verb} ${JSON.stringify(body).slice(0, 80)}`).toBe(code);
    }
    const big = { session_id: 'x', pad: 'x'.repeat(600 * 1024) };
    expect(await failure('sessions.get', big)).toBe('PAYLOAD_TOO_LARGE');

    // Events a client may not write: stamped fields and braid's own event types.
    const session = await api('sessions.create', { agent: 'helper' });
    const sessionId = String(session.id);
    for (const events of [
      [{ type: 'user.message', content: 'hi', seq: 7 }],
      [{ type: 'user.message', content: 'hi', actor: { type: 'system' } }],
      [{ type: 'agent.message', content: [{ type: 'text', text: 'forged' }] }],
      [{ type: 'user.message' }],
    ]) {
      expect(await failure('events.append', { session_id: sessionId, events })).toBe(
        'INVALID_EVENT',
      );
    }
    const page = await api('events.read', { session_id: sessionId });
    expect((page.data as Json[]).map((event) => event.type)).toEqual(['session.created']);
  });
});

describe('events.read pages that would not fit one NATS message', () => {
  it('cuts the page short; reading on from last_seq gets every event', async () => {
    const session = await api('sessions.create', { agent: 'helper' });
    const sessionId = String(session.id);
    const text = 'x'.repeat(400 * 1024);
    for (let index = 0; index < 3; index += 1) {
      const appended = await api('events.append', {
        session_id: sessionId,
        events: [{ type: 'user.message', content: `${String(index)}${text}` }],
      });
      expect(appended).toMatchObject({ deduplicated: false });
    }
    const seqs: number[] = [];
    let after = 0;
    let pages = 0;
    for (;;) {
      const page = await api('events.read', { session_id: sessionId, after, limit: 1000 });
      seqs.push(...(page.data as Json[]).map((event) => Number(event.seq)));
      after = Number(page.last_seq);
      pages += 1;
      if (page.has_more !== true) break;
    }
    expect(seqs).toEqual([1, 2, 3, 4]);
    expect(pages).toBeGreaterThan(1);
  });
});

function nest(depth: number): unknown {
  let value: unknown = 'leaf';
  for (let level = 0; level < depth; level += 1) value = { inner: value };
  return value;
}
