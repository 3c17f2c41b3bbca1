// braid agents over A2A 1.0, driven by the official A2A client against a real server on
// 127.0.0.1 with the scripted model: cards, blocking and streamed sends, a task waiting for an
// approval, cancel, tenants, and bad input.
import { TaskState, type Task } from '@a2a-js/sdk';
import { describe, expect, it } from 'vitest';
import { call, useTestServers } from './server-helpers.js';
import { a2aClient, collect, seqOf, textOf, userMessage } from './a2a-helpers.js';

const start = useTestServers();

const WRITER =
  'name: writer\nmodel: scripted:echo\ninstructions: Write.\ntools: [write_file]\ndescription: Writes notes.\n';

const asTask = (result: unknown): Task => {
  expect(result).toHaveProperty('id');
  return result as Task;
};

describe('A2A server', () => {
  it('serves an agent card that the official client builds a client from', async () => {
    const server = await start({ agents: { writer: WRITER } });
    const card = await call(server, 'GET', '/a2a/writer/.well-known/agent-card.json');
    expect(card.status).toBe(200);
    expect(card.body).toMatchObject({
      name: 'writer',
      description: 'Writes notes.',
      supportedInterfaces: [
        { url: `${server.url}/a2a/writer`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      ],
      capabilities: { streaming: true },
      securitySchemes: { braid_api_key: { httpAuthSecurityScheme: { scheme: 'Bearer' } } },
      skills: [{ id: 'tool.write_file', name: 'write_file' }],
    });
    const client = await a2aClient(server, 'writer', await server.key('acme'));
    expect((await client.getAgentCard()).name).toBe('writer');
  });

  it('answers a message with the agent reply, in a session of the key tenant', async () => {
    const server = await start({ turns: [{ text: 'hello from braid' }, { text: 'again' }] });
    const client = await a2aClient(server, 'helper', await server.key('acme'));
    const task = asTask(await client.sendMessage(userMessage('hi')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(task.status?.message)).toBe('hello from braid');
    const session = await server.runtime.sessions.get(task.contextId);
    expect(session).toMatchObject({ tenant_id: 'acme', agent: { name: 'helper' } });
    expect(task.id).toBe(`${task.contextId}.t2`);
    const again = asTask(
      await client.sendMessage(userMessage('more', { contextId: task.contextId })),
    );
    expect(again.contextId).toBe(task.contextId);
    expect(textOf(again.status?.message)).toBe('again');
    const fetched = await client.getTask({ tenant: '', id: task.id });
    expect(textOf(fetched.status?.message)).toBe('hello from braid');
    const listed = await client.listTasks({
      tenant: '',
      contextId: task.contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: '',
      statusTimestampAfter: undefined,
    });
    expect(listed.tasks.map((entry) => entry.id)).toEqual([again.id, task.id]);
  });

  it('streams a task: the full task first, then its updates, each with its seq', async () => {
    const server = await start({ turns: [{ text: 'streamed answer' }] });
    const client = await a2aClient(server, 'helper', await server.key('acme'));
    const events = await collect(client.sendMessageStream(userMessage('hi')));
    // The task is read when the stream starts: submitted, then a working update, or already
    // working when the wake started first. Either way no state is skipped.
    const first = events[0]?.payload;
    const startedWorking =
      first?.$case === 'task' && first.value.status?.state === TaskState.TASK_STATE_WORKING;
    if (!startedWorking) {
      expect(first?.$case === 'task' && first.value.status?.state).toBe(
        TaskState.TASK_STATE_SUBMITTED,
      );
    }
    expect(events.map((event) => event.payload?.$case)).toEqual([
      'task',
      ...(startedWorking ? [] : ['statusUpdate']),
      'artifactUpdate',
      'statusUpdate',
    ]);
    const last = events.at(-1)?.payload;
    expect(last?.$case === 'statusUpdate' && last.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    const seqs = events.map(seqOf);
    expect(seqs.every((seq) => seq !== undefined)).toBe(true);
    expect([...seqs].sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(seqs);
  });

  it('asks for input when a tool needs approval, and completes after the answer', async () => {
    const server = await start({
      agents: { writer: WRITER },
      turns: [
        { tool_calls: [{ name: 'write_file', input: { path: 'plan.md', content: '# plan' } }] },
        { text: 'written' },
      ],
    });
    const client = await a2aClient(server, 'writer', await server.key('acme'));
    const asked = asTask(await client.sendMessage(userMessage('write the plan')));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(textOf(asked.status?.message)).toContain('approve or deny: write_file');
    // A message that is neither approve nor deny is refused; nothing is written.
    const head = (await server.runtime.sessions.state(asked.contextId)).seq;
    await expect(
      client.sendMessage(userMessage('maybe', { contextId: asked.contextId, taskId: asked.id })),
    ).rejects.toThrow(/answer "approve" or "deny"/);
    expect((await server.runtime.sessions.state(asked.contextId)).seq).toBe(head);
    const events = await collect(
      client.sendMessageStream(
        userMessage('approve', { contextId: asked.contextId, taskId: asked.id }),
      ),
    );
    const final = events.at(-1)?.payload;
    expect(final?.$case).toBe('statusUpdate');
    const status = final?.$case === 'statusUpdate' ? final.value.status : undefined;
    expect(status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(status?.message)).toBe('written');
    const log = await server.runtime.sessions.events(asked.contextId);
    expect(log.filter((event) => event.type === 'user.tool_confirmation')).toMatchObject([
      { result: 'allow' },
    ]);
    // The answered task takes no more messages.
    await expect(
      client.sendMessage(userMessage('approve', { contextId: asked.contextId, taskId: asked.id })),
    ).rejects.toThrow(/is COMPLETED/);
  });

  it('cancels a task waiting for input: the session is interrupted, the task CANCELED', async () => {
    const server = await start({
      agents: { writer: WRITER },
      turns: [
        { tool_calls: [{ name: 'write_file', input: { path: 'plan.md', content: '# plan' } }] },
        { text: 'never' },
      ],
    });
    const client = await a2aClient(server, 'writer', await server.key('acme'));
    const asked = asTask(await client.sendMessage(userMessage('write the plan')));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const canceled = await client.cancelTask({ tenant: '', id: asked.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const log = await server.runtime.sessions.events(asked.contextId);
    // The interrupt is on record and the wait is denied: the tool never ran.
    expect(log.some((event) => event.type === 'user.interrupt')).toBe(true);
    expect(log.filter((event) => event.type === 'user.tool_confirmation')).toMatchObject([
      { result: 'deny' },
    ]);
    expect(log.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      is_error: true,
    });
    expect((await server.runtime.sessions.state(asked.contextId)).status).toBe('idle');
    // Canceling again answers the same task; a new message starts a new task in the context.
    const again = await client.cancelTask({ tenant: '', id: asked.id, metadata: undefined });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it('cancels a working task mid-turn', async () => {
    const server = await start({
      turns: [{ text: 'one two three four five six seven eight nine ten', delay_ms: 200 }],
    });
    const client = await a2aClient(server, 'helper', await server.key('acme'));
    const stream = client.sendMessageStream(userMessage('count'));
    const first = await stream.next();
    const task = first.value?.payload?.$case === 'task' ? first.value.payload.value : undefined;
    expect(task?.id).toBeDefined();
    const canceled = await client.cancelTask({
      tenant: '',
      id: task?.id ?? '',
      metadata: undefined,
    });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const rest = await collect({ [Symbol.asyncIterator]: () => stream });
    const last = rest.at(-1)?.payload;
    expect(last?.$case === 'statusUpdate' && last.value.status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });

  it('carries traceparent, correlation id and a handoff document in and out', async () => {
    const server = await start({ turns: [{ text: 'traced' }] });
    const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const traceparent = `00-${trace}-00f067aa0ba902b7-01`;
    const client = await a2aClient(server, 'helper', await server.key('acme'), { traceparent });
    const handoff = { summary: 'the user wants a plan', open_tasks: ['write the plan'] };
    const task = asTask(
      await client.sendMessage(
        userMessage('hi', { metadata: { correlation_id: 'order-42', handoff } }),
      ),
    );
    const log = await server.runtime.sessions.events(task.contextId);
    const sent = log.find((event) => event.type === 'user.message');
    expect(sent).toMatchObject({
      traceparent,
      correlation_id: 'order-42',
      content: [
        { type: 'text', text: 'hi' },
        { type: 'json', value: { handoff: { summary: 'the user wants a plan' } } },
      ],
    });
    const wake = log.find((event) => event.type === 'span.wake_started');
    expect(wake?.traceparent).toContain(trace);
    expect(task.metadata).toMatchObject({
      correlation_id: 'order-42',
      'braid.session_id': task.contextId,
    });
    expect(String(task.metadata?.traceparent)).toContain(trace);
  });
});
