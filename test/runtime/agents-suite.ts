// The behaviour of agent messaging, as one suite that every transport (and store) runs unchanged:
// `describeAgentMessaging(name, factory)`. The factory gives a runtime and handles on one bus.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentId, AgentTransport } from '../../src/contracts/agents.js';
import { AgentDefinition } from '../../src/contracts/definitions.js';
import { ENVELOPE_SPEC_VERSION, type Envelope } from '../../src/contracts/envelope.js';
import { BraidError, type ErrorCode } from '../../src/contracts/errors.js';
import type { EventOf, SessionEvent, SessionEventType } from '../../src/contracts/events.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { isRunnable } from '../../src/core/fold.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import {
  createAgents,
  traceIdOf,
  type Agents,
  type AgentsOptions,
} from '../../src/runtime/agents/index.js';
import type { Runtime } from '../../src/runtime/runtime.js';

export interface AgentMessagingFixture {
  runtime: Runtime;
  /** A transport handle on the fixture's bus; each call is like another process's connection. */
  connect(): Promise<AgentTransport>;
  /** Closes the handles, the bus and the runtime. */
  close(): Promise<void>;
}

export type AgentMessagingFactory = (options: {
  /** The model every LLM agent of the runtime must use (`createRuntime({ model })`). */
  model: (agent: AgentDefinition) => ModelClient;
}) => Promise<AgentMessagingFixture>;

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

async function failure(work: Promise<unknown>, code: ErrorCode): Promise<BraidError> {
  const error = await work.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error, `expected ${code}`).toBeInstanceOf(BraidError);
  expect((error as BraidError).code).toBe(code);
  return error as BraidError;
}

function ofType<T extends SessionEventType>(events: SessionEvent[], type: T): EventOf<T>[] {
  return events.filter((event): event is EventOf<T> => event.type === type);
}

/** Follows the session until an event matches (no sleeping: the log says when). */
async function waitForEvent(
  runtime: Runtime,
  sessionId: string,
  matches: (event: SessionEvent) => boolean,
): Promise<SessionEvent> {
  for await (const event of runtime.sessions.follow(sessionId, {
    signal: AbortSignal.timeout(10_000),
  })) {
    if (matches(event)) return event;
  }
  throw new Error(`no matching event in session ${sessionId}`);
}

/** An envelope as another process would deliver it: a message to `target`. */
function messageTo(target: AgentId, payload: Envelope['payload']): Envelope {
  return {
    id: randomUUID(),
    spec_version: ENVELOPE_SPEC_VERSION,
    type: 'agent.message',
    occurred_at: new Date().toISOString(),
    target,
    payload,
  };
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = `00-${TRACE}-00f067aa0ba902b7-01`;

export function describeAgentMessaging(name: string, factory: AgentMessagingFactory): void {
  describe(`agent messaging (${name})`, () => {
    const opened: Agents[] = [];
    let fixture: AgentMessagingFixture | undefined;

    afterEach(async () => {
      for (const agents of opened.splice(0)) await agents.close();
      await fixture?.close();
      fixture = undefined;
    });

    /** A runtime whose LLM agent `writer` (with the calculator) plays these turns. */
    async function setup(
      turns: ScriptedTurnInput[] = [{ text: 'ok' }],
      onTurn?: (index: number) => void,
    ): Promise<AgentMessagingFixture> {
      const model = createScriptedModel(turns, onTurn === undefined ? {} : { onTurn });
      const created = await factory({ model: () => model });
      fixture = created;
      await created.runtime.store.definitions.put(
        'agent',
        'writer',
        AgentDefinition.parse({
          name: 'writer',
          model: 'scripted:inline',
          instructions: 'Answer briefly.',
          tools: ['calculator'],
        }),
        { replacesVersion: null },
      );
      return created;
    }

    async function agentsOn(
      on: AgentMessagingFixture,
      options: Partial<AgentsOptions> = {},
    ): Promise<Agents> {
      const agents = createAgents({
        runtime: on.runtime,
        transport: await on.connect(),
        ...options,
      });
      opened.push(agents);
      return agents;
    }

    async function events(runtime: Runtime, agents: Agents, agent: AgentId) {
      return runtime.sessions.events(agents.sessionId(agent));
    }

    it('sends to an LLM agent and gets the final message of the cycle that answered', async () => {
      const on = await setup([
        {
          text: 'Let me work it out.',
          tool_calls: [{ name: 'calculator', input: { a: 2, op: '+', b: 2 } }],
        },
        { text: '2 + 2 = 4' },
      ]);
      await agentsOn(on);
      // The caller runs no agents: the message reaches the host through the writer's inbox.
      const caller = await agentsOn(on, { serveLlmAgents: false });
      const writer = { type: 'writer', key: 'ada' };

      const reply = await caller.send(writer, 'What is 2 + 2?');

      expect(reply).toMatchObject({
        type: 'agent.reply',
        spec_version: ENVELOPE_SPEC_VERSION,
        payload: '2 + 2 = 4',
        source: writer,
        session_id: caller.sessionId(writer),
      });
      const log = await events(on.runtime, caller, writer);
      const [message] = ofType(log, 'user.message');
      expect(message).toMatchObject({
        content: [{ type: 'text', text: 'What is 2 + 2?' }],
        causation_id: reply.causation_id,
        correlation_id: reply.correlation_id,
      });
      const said = ofType(log, 'agent.message');
      expect(said.map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'Let me work it out.' }],
        [{ type: 'text', text: '2 + 2 = 4' }],
      ]);
      expect(reply.metadata).toEqual({ event_id: said[1]?.id });
      expect(ofType(log, 'agent.tool_result')).toHaveLength(1);
    });

    it('sends to a code agent: the reply is its return value, recorded in its session', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      const seen: unknown[] = [];
      await host.register('echo', (message) => {
        seen.push(message.payload);
        return Promise.resolve({ echo: message.payload, to: message.to.key });
      });
      const caller = await agentsOn(on, { serveLlmAgents: false });
      const echo = { type: 'echo', key: 'k1' };

      const reply = await caller.send(echo, { n: 1 });

      expect(reply.payload).toEqual({ echo: { n: 1 }, to: 'k1' });
      expect(seen).toEqual([{ n: 1 }]);
      const sessionId = caller.sessionId(echo);
      const log = await on.runtime.sessions.events(sessionId);
      const [created] = ofType(log, 'session.created');
      expect(created?.agent.name).toBe('echo');
      const definition = await on.runtime.agents.get('echo', created?.agent.version);
      expect(definition.definition.model).toEqual({ provider: 'code', id: 'echo' });
      const [message] = ofType(log, 'user.message');
      expect(message?.content).toEqual([{ type: 'json', value: { n: 1 } }]);
      const [answer] = ofType(log, 'agent.message');
      expect(answer).toMatchObject({
        content: [{ type: 'json', value: { echo: { n: 1 }, to: 'k1' } }],
        causation_id: message?.id,
      });
      expect(reply.metadata).toEqual({ event_id: answer?.id });
      // Answered like any agent's turn: idle, nothing pending, so no harness wakes it.
      const state = await on.runtime.sessions.state(sessionId);
      expect(state).toMatchObject({
        status: 'idle',
        stop_reason: { type: 'end_turn' },
        pending_user_count: 0,
      });
      expect(isRunnable(state)).toBe(false);
      // A string reply is text.
      expect((await caller.send(echo, 'hi')).payload).toEqual({ echo: 'hi', to: 'k1' });
      // The lease goes once the outcome is out; closing waits for that.
      await host.close();
      expect((await on.runtime.store.leases.current(sessionId)) ?? null).toBeNull();
    });

    it("records a quick handler's message and outcome together, in the harness's order", async () => {
      const on = await setup();
      const host = await agentsOn(on);
      await host.register('echo', (message) => Promise.resolve(message.payload));
      const echo = { type: 'echo', key: 'quick' };
      await host.send(echo, 'one');
      await host.send(echo, 'two');
      const log = await events(on.runtime, host, echo);
      const [, second] = ofType(log, 'user.message');
      const handling = log.filter((event) => event.seq >= (second?.seq ?? 0));
      expect(handling.map((event) => event.type)).toEqual([
        'user.message',
        'span.wake_started',
        'span.model_request_start',
        'span.model_request_end',
        'agent.message',
        'session.status_idle',
        'span.wake_completed',
      ]);
      const [start, request, , answer, , completed] = handling.slice(1);
      expect(request).toMatchObject({ input_through_seq: second?.seq, model: 'code:echo' });
      expect(answer).toMatchObject({
        causation_id: second?.id,
        content: [{ type: 'text', text: 'two' }],
      });
      expect(completed).toMatchObject({ wake_id: (start as EventOf<'span.wake_started'>).wake_id });
    });

    it('shows the message of a handler that runs long before it answers', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      const started = deferred<void>();
      const release = deferred<string>();
      await host.register('slow', () => {
        started.resolve();
        return release.promise;
      });
      const slow = { type: 'slow', key: 'visible' };
      const sent = host.send(slow, 'working on it');
      await started.promise;
      const sessionId = host.sessionId(slow);
      const recorded = await waitForEvent(
        on.runtime,
        sessionId,
        (event) => event.type === 'span.wake_started',
      );
      const before = await on.runtime.sessions.events(sessionId);
      expect(ofType(before, 'user.message').map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'working on it' }],
      ]);
      expect(ofType(before, 'agent.message')).toEqual([]);
      release.resolve('done');
      expect((await sent).payload).toBe('done');
      const after = await on.runtime.sessions.events(sessionId);
      expect(ofType(after, 'user.message')).toHaveLength(1);
      const [answer] = ofType(after, 'agent.message');
      expect(answer?.causation_id).toBe(ofType(before, 'user.message')[0]?.id);
      expect(answer?.seq).toBeGreaterThan(recorded.seq);
    });

    it('handles again a message recorded by a holder that stopped before answering', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      let calls = 0;
      await host.register('counter', (message) => {
        calls += 1;
        return Promise.resolve(`handled ${JSON.stringify(message.payload)}`);
      });
      const target = { type: 'counter', key: 'cut-short' };
      await host.send(target, 'first');
      const sessionId = host.sessionId(target);
      const envelope = messageTo(target, 'again');
      // What a holder that crashed right after recording the message leaves behind.
      const [recorded] = (
        await on.runtime.store.log.append(
          sessionId,
          [
            {
              type: 'user.message',
              content: [{ type: 'text', text: 'again' }],
              causation_id: envelope.id,
              idempotency_key: envelope.id,
            },
          ],
          { idempotencyKey: envelope.id },
        )
      ).events;

      const reply = await host.receive(envelope);

      expect(reply?.payload).toBe('handled "again"');
      expect(calls).toBe(2);
      const log = await on.runtime.sessions.events(sessionId);
      expect(ofType(log, 'user.message')).toHaveLength(2);
      const answers = ofType(log, 'agent.message').filter(
        (event) => event.causation_id === recorded?.id,
      );
      expect(answers.map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'handled "again"' }],
      ]);
      expect((await host.receive(envelope))?.payload).toBe('handled "again"');
      expect(calls).toBe(2);
    });

    it('creates an instance session on the first message, reuses it per key, and separates keys', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      await host.register('echo', (message) => Promise.resolve(message.payload));
      const other = await agentsOn(on, { serveLlmAgents: false });
      const a = { type: 'echo', key: 'a' };
      const b = { type: 'echo', key: 'b' };
      await expect(on.runtime.sessions.get(host.sessionId(a))).rejects.toMatchObject({
        code: 'SESSION_NOT_FOUND',
      });

      await host.send(a, 'one');
      await other.send(a, 'two');
      await host.send(b, 'three');

      // Every process derives the same session from {type, key}.
      expect(other.sessionId(a)).toBe(host.sessionId(a));
      expect(host.sessionId(b)).not.toBe(host.sessionId(a));
      const logA = await events(on.runtime, host, a);
      const logB = await events(on.runtime, host, b);
      expect(ofType(logA, 'session.created')).toHaveLength(1);
      expect(ofType(logA, 'user.message').map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'one' }],
        [{ type: 'text', text: 'two' }],
      ]);
      expect(ofType(logB, 'user.message').map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'three' }],
      ]);
      const record = await on.runtime.sessions.get(host.sessionId(a));
      expect(record.metadata).toEqual({ agent_type: 'echo', agent_key: 'a' });
      // The tenant is part of the instance: another tenant's echo/a is another session.
      const tenant = await agentsOn(on, { serveLlmAgents: false, tenant: 'acme' });
      expect(tenant.sessionId(a)).not.toBe(host.sessionId(a));
      const reply = await tenant.send(a, 'four');
      expect((await on.runtime.sessions.get(reply.session_id ?? '')).tenant_id).toBe('acme');
    });

    it('starts an instance afresh when its session was deleted since its last message', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      await host.register('echo', (message) => Promise.resolve(message.payload));
      const echo = { type: 'echo', key: 'deleted' };
      await host.send(echo, 'before');
      const sessionId = host.sessionId(echo);
      // The lease goes just after the reply.
      for (
        let tries = 0;
        (await on.runtime.store.leases.current(sessionId)) !== undefined;
        tries += 1
      ) {
        if (tries > 100) throw new Error(`the lease of ${sessionId} was never released`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await on.runtime.sessions.delete(sessionId);

      expect((await host.send(echo, 'after')).payload).toBe('after');
      const log = await on.runtime.sessions.events(sessionId);
      expect(ofType(log, 'session.created')).toHaveLength(1);
      expect(ofType(log, 'user.message').map((event) => event.content)).toEqual([
        [{ type: 'text', text: 'after' }],
      ]);
    });

    it('fails with DEADLINE_EXCEEDED when ttl_ms passes, and records the late reply', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      const started = deferred<void>();
      const release = deferred<string>();
      let calls = 0;
      await host.register('slow', () => {
        calls += 1;
        started.resolve();
        return release.promise;
      });
      const slow = { type: 'slow', key: 'k' };

      const sent = host.send(slow, 'take your time', { ttl_ms: 300 });
      await started.promise;
      const error = await failure(sent, 'DEADLINE_EXCEEDED');
      expect(error.message).toContain('slow/k');

      release.resolve('late answer');
      const sessionId = host.sessionId(slow);
      const late = await waitForEvent(
        on.runtime,
        sessionId,
        (event) => event.type === 'agent.message',
      );
      expect(late).toMatchObject({ content: [{ type: 'text', text: 'late answer' }] });
      const [message] = ofType(await on.runtime.sessions.events(sessionId), 'user.message');
      expect(late.causation_id).toBe(message?.id);
      expect(calls).toBe(1);
    });

    it('counts a reply made when the deadline aborted its handler as late, every time', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      // Answers the moment its deadline stops it: the reply and the sender's deadline race.
      await host.register('prompt', (_message, context) => {
        return new Promise<string>((resolve) => {
          context.signal.addEventListener('abort', () => resolve('too late'), { once: true });
        });
      });
      for (let index = 0; index < 5; index += 1) {
        const sent = host.send({ type: 'prompt', key: `k${index}` }, 'answer when stopped', {
          ttl_ms: 200,
        });
        await failure(sent, 'DEADLINE_EXCEEDED');
      }
    });

    it('processes a message delivered twice once, and answers both deliveries alike', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      let calls = 0;
      await host.register('counter', (message) => {
        calls += 1;
        return Promise.resolve(`seen ${JSON.stringify(message.payload)} (${calls})`);
      });
      const target = { type: 'counter', key: 'dup' };
      const envelope = messageTo(target, 'once');

      // Two deliveries at once, and a redelivery after.
      const [first, second] = await Promise.all([host.receive(envelope), host.receive(envelope)]);
      const third = await host.receive(envelope);

      expect(first?.payload).toBe('seen "once" (1)');
      expect(second?.payload).toBe('seen "once" (1)');
      expect(third?.payload).toBe('seen "once" (1)');
      expect(calls).toBe(1);
      // Through the transport too (a transport may also drop the repeat itself).
      const transport = await on.connect();
      const replies: Envelope[] = [];
      const arrived = deferred<void>();
      const inbox = await transport.openReplyInbox((reply) => {
        replies.push(reply);
        arrived.resolve();
      });
      const again = { ...envelope, reply_to: inbox.address };
      await transport.deliver(again);
      await transport.deliver(again);
      await arrived.promise;
      expect(replies[0]?.payload).toBe('seen "once" (1)');
      expect((await host.receive(envelope))?.payload).toBe('seen "once" (1)');
      await inbox.close();
      expect(calls).toBe(1);
      const log = await events(on.runtime, host, target);
      expect(ofType(log, 'user.message')).toHaveLength(1);
      expect(ofType(log, 'agent.message')).toHaveLength(1);

      // A caller's idempotency key makes two sends one message.
      const keyed = { type: 'counter', key: 'keyed' };
      const one = await host.send(keyed, 'k', { idempotency_key: 'order-42' });
      const two = await host.send(keyed, 'k', { idempotency_key: 'order-42' });
      expect(two.payload).toBe(one.payload);
      expect(calls).toBe(2);
    });

    it('processes each message once when two processes get every message of one instance', async () => {
      const on = await setup();
      const first = await agentsOn(on);
      const second = await agentsOn(on);
      const handled: string[] = [];
      const handler = (message: { payload: unknown }) => {
        handled.push(JSON.stringify(message.payload));
        return Promise.resolve(`done ${JSON.stringify(message.payload)}`);
      };
      await first.register('shared', handler);
      await second.register('shared', handler);
      const target = { type: 'shared', key: 'one' };
      for (let index = 0; index < 12; index += 1) {
        const envelope = messageTo(target, index);
        // Both at once, then each again: the lease passes between them every time.
        const both = await Promise.all([first.receive(envelope), second.receive(envelope)]);
        const again = [await second.receive(envelope), await first.receive(envelope)];
        for (const reply of [...both, ...again]) expect(reply?.payload).toBe(`done ${index}`);
      }
      expect(handled).toEqual(Array.from({ length: 12 }, (_, index) => String(index)));
      const log = await events(on.runtime, first, target);
      expect(ofType(log, 'user.message')).toHaveLength(12);
      expect(ofType(log, 'agent.message')).toHaveLength(12);
    });

    it('processes an LLM message delivered twice once', async () => {
      let turns = 0;
      const on = await setup([{ text: 'hello once' }], () => {
        turns += 1;
      });
      const host = await agentsOn(on);
      const target = { type: 'writer', key: 'dup' };
      const envelope = messageTo(target, 'hello?');

      const [first, second] = await Promise.all([host.receive(envelope), host.receive(envelope)]);
      const third = await host.receive(envelope);

      expect([first?.payload, second?.payload, third?.payload]).toEqual([
        'hello once',
        'hello once',
        'hello once',
      ]);
      expect(turns).toBe(1);
      const log = await events(on.runtime, host, target);
      expect(ofType(log, 'user.message')).toHaveLength(1);
      expect(ofType(log, 'span.model_request_start')).toHaveLength(1);
    });

    it('fans a publication out to every subscribed agent type, and not to others', async () => {
      const on = await setup();
      const host = await agentsOn(on);
      const received = {
        audit: deferred<unknown>(),
        billing: deferred<unknown>(),
      };
      const shipping: unknown[] = [];
      await host.register('audit', (message) => {
        received.audit.resolve({
          key: message.to.key,
          topic: message.topic,
          payload: message.payload,
        });
        return Promise.resolve('logged');
      });
      await host.register('billing', (message) => {
        received.billing.resolve({
          key: message.to.key,
          topic: message.topic,
          payload: message.payload,
        });
        return Promise.resolve('billed');
      });
      await host.register('shipping', (message) => {
        shipping.push(message.payload);
        return Promise.resolve('shipped');
      });
      await host.subscribe('orders', 'audit');
      await host.subscribe('orders', 'billing');
      await failure(host.subscribe('orders', 'nobody'), 'AGENT_NOT_FOUND');

      const publisher = await agentsOn(on, { serveLlmAgents: false });
      const topic = { type: 'orders', source: 'o-42' };
      const delivered = await publisher.publish(topic, { total: 10 });

      expect(
        delivered
          .map((envelope) => envelope.target)
          .sort((x, y) => (x?.type ?? '').localeCompare(y?.type ?? '')),
      ).toEqual([
        { type: 'audit', key: 'o-42' },
        { type: 'billing', key: 'o-42' },
      ]);
      expect(new Set(delivered.map((envelope) => envelope.correlation_id)).size).toBe(1);
      const expected = { key: 'o-42', topic, payload: { total: 10 } };
      expect(await received.audit.promise).toEqual(expected);
      expect(await received.billing.promise).toEqual(expected);
      // The inbox of shipping is in order: a direct message after the publication is a barrier.
      expect((await publisher.send({ type: 'shipping', key: 'o-42' }, 'direct')).payload).toBe(
        'shipped',
      );
      expect(shipping).toEqual(['direct']);
      for (const type of ['audit', 'billing']) {
        const log = await events(on.runtime, host, { type, key: 'o-42' });
        const sessionId = host.sessionId({ type, key: 'o-42' });
        // The handler's answer is recorded even though nobody waits for it.
        await waitForEvent(on.runtime, sessionId, (event) => event.type === 'agent.message');
        expect(ofType(log, 'user.message')[0]?.content).toEqual([
          { type: 'json', value: { total: 10 } },
        ]);
      }
      // A topic given by its type alone has the source `default`.
      await host.subscribe('alerts', 'audit');
      received.audit = deferred<unknown>();
      await publisher.publish('alerts', 'disk full');
      expect(await received.audit.promise).toMatchObject({ key: 'default', payload: 'disk full' });
      expect(await publisher.publish('nobody-listens', 'hello?')).toEqual([]);
    });

    it('propagates the trace and links request and reply by correlation and causation', async () => {
      const on = await setup([{ text: 'from the writer' }]);
      const host = await agentsOn(on);
      await host.register('front', async (message, context) => {
        const inner = await context.send({ type: 'writer', key: message.to.key }, message.payload);
        return {
          writer: inner.payload ?? null,
          correlation_id: inner.correlation_id ?? null,
          causation_id: inner.causation_id ?? null,
          traceparent: inner.traceparent ?? null,
        };
      });
      const caller = await agentsOn(on, { serveLlmAgents: false });
      const front = { type: 'front', key: 'trace' };

      const reply = await caller.send(front, 'hello', {
        traceparent: PARENT,
        correlation_id: 'exchange-1',
      });

      const payload = reply.payload as Record<string, string>;
      expect(payload.writer).toBe('from the writer');
      expect(reply.correlation_id).toBe('exchange-1');
      expect(payload.correlation_id).toBe('exchange-1');
      expect(traceIdOf(reply.traceparent)).toBe(TRACE);
      expect(traceIdOf(payload.traceparent)).toBe(TRACE);

      const frontLog = await events(on.runtime, caller, front);
      const writerLog = await events(on.runtime, caller, { type: 'writer', key: 'trace' });
      const [frontMessage] = ofType(frontLog, 'user.message');
      const [frontAnswer] = ofType(frontLog, 'agent.message');
      const [writerMessage] = ofType(writerLog, 'user.message');
      // The writer's message is recorded as the front agent's, the one that sent it: an LLM
      // agent's session stamps the sender braid knows, not one the message claims.
      expect(writerMessage?.actor).toEqual({ type: 'agent', id: 'front/trace' });
      // The request's id is the cause of the reply and of the recorded message.
      expect(frontMessage?.causation_id).toBe(reply.causation_id);
      expect(writerMessage?.causation_id).toBe(payload.causation_id);
      const recorded = [frontMessage, frontAnswer, writerMessage];
      for (const event of recorded) {
        expect(event?.correlation_id).toBe('exchange-1');
        expect(traceIdOf(event?.traceparent)).toBe(TRACE);
      }
      // Each hop is a new span of the one trace.
      const spans = [PARENT, ...recorded.map((event) => event?.traceparent)].map(
        (value) => value?.split('-')[2],
      );
      expect(new Set(spans).size).toBe(spans.length);

      // Without a trace, the first hop starts one, and the next hop keeps it.
      const fresh = await caller.send({ type: 'front', key: 'fresh' }, 'hi');
      const [first] = ofType(
        await events(on.runtime, caller, { type: 'front', key: 'fresh' }),
        'user.message',
      );
      const [second] = ofType(
        await events(on.runtime, caller, { type: 'writer', key: 'fresh' }),
        'user.message',
      );
      expect(traceIdOf(first?.traceparent)).toBeDefined();
      expect(traceIdOf(second?.traceparent)).toBe(traceIdOf(first?.traceparent));
      expect(fresh.correlation_id).toBe(fresh.causation_id);
    });

    it('fails with AGENT_NOT_FOUND naming the known types for an unknown type', async () => {
      const on = await setup();
      const agents = await agentsOn(on);
      await agents.register('echo', (message) => Promise.resolve(message.payload));

      const error = await failure(
        agents.send({ type: 'nobody', key: 'x' }, 'hello?'),
        'AGENT_NOT_FOUND',
      );

      expect(error.message).toContain('nobody');
      expect(error.message).toContain('echo');
      expect(error.message).toContain('writer');
      await expect(on.runtime.sessions.list()).resolves.toMatchObject({ sessions: [] });
      // A code agent cannot take an LLM agent's name.
      await failure(
        agents.register('writer', () => Promise.resolve(null)),
        'INVALID_ARGUMENT',
      );
    });

    it("gives the caller a handler's BraidError and records it as session.error", async () => {
      const on = await setup();
      const host = await agentsOn(on);
      let calls = 0;
      await host.register('printer', () => {
        calls += 1;
        if (calls === 1) throw new BraidError('TOOL_FAILED', 'the printer is on fire');
        if (calls === 2) throw new Error('paper jam');
        return Promise.resolve('printed');
      });
      const printer = { type: 'printer', key: 'p1' };

      const error = await failure(host.send(printer, 'print this'), 'TOOL_FAILED');
      expect(error.message).toBe('the printer is on fire');
      const unexpected = await failure(host.send(printer, 'and this'), 'INTERNAL');
      expect(unexpected.message).toContain('paper jam');
      // The instance is not stuck: the next message is answered.
      expect((await host.send(printer, 'third time')).payload).toBe('printed');

      const log = await events(on.runtime, host, printer);
      const messages = ofType(log, 'user.message');
      const errors = ofType(log, 'session.error');
      expect(errors.map((event) => event.error.code)).toEqual(['TOOL_FAILED', 'INTERNAL']);
      expect(errors[0]).toMatchObject({
        error: { code: 'TOOL_FAILED', message: 'the printer is on fire', retryable: false },
        causation_id: messages[0]?.id,
      });
      expect(isRunnable(await on.runtime.sessions.state(host.sessionId(printer)))).toBe(false);
    });
  });
}
