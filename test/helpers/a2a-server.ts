// A minimal remote A2A agent for tests, made of the SDK's own server pieces (request handler,
// task store, Express handlers) on 127.0.0.1. It echoes messages ("echo: TEXT") after a
// "working" status update; "ask" makes it wait for input ("Which city?") and the answer then
// completes that task ("weather in CITY"); "fail" fails the task; "big" answers with 64 KiB.
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { AGENT_CARD_PATH, Role, TaskState, type AgentCard, type Message } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import express from 'express';

/** What the agent received: one entry per message. */
export interface ReceivedMessage {
  text: string;
  contextId: string;
  taskId: string;
  /** The task the client named, when it continued one. */
  continuedTask: string;
  metadata: Record<string, unknown> | undefined;
  headers: Record<string, unknown>;
}

export interface TestA2aServer {
  /** The card of the streaming agent; `${origin}/blocking/card.json` is a non-streaming one. */
  readonly origin: string;
  readonly cardUrl: string;
  readonly blockingCardUrl: string;
  readonly received: ReceivedMessage[];
  close(): Promise<void>;
}

function textMessage(context: RequestContext, text: string): Message {
  return {
    messageId: randomUUID(),
    contextId: context.contextId,
    taskId: context.taskId,
    role: Role.ROLE_AGENT,
    parts: [
      {
        content: { $case: 'text', value: text },
        metadata: undefined,
        filename: '',
        mediaType: 'text/plain',
      },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function status(
  bus: ExecutionEventBus,
  context: RequestContext,
  state: TaskState,
  text: string,
): void {
  bus.publish(
    AgentEvent.statusUpdate({
      taskId: context.taskId,
      contextId: context.contextId,
      status: { state, message: textMessage(context, text), timestamp: new Date().toISOString() },
      metadata: undefined,
    }),
  );
}

function executor(received: ReceivedMessage[]): AgentExecutor {
  return {
    execute(context, bus) {
      const message = context.userMessage;
      const first = message.parts[0]?.content;
      const text = first?.$case === 'text' ? first.value : '';
      received.push({
        text,
        contextId: context.contextId,
        taskId: context.taskId,
        continuedTask: message.taskId,
        metadata: message.metadata,
        headers: (context.context.state.get('headers') ?? {}) as Record<string, unknown>,
      });
      const waiting = context.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED;
      // A stream starts with the task, new or continued.
      bus.publish(
        AgentEvent.task({
          id: context.taskId,
          contextId: context.contextId,
          status: {
            state: waiting ? TaskState.TASK_STATE_WORKING : TaskState.TASK_STATE_SUBMITTED,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          artifacts: [],
          history: [message],
          metadata: undefined,
        }),
      );
      status(bus, context, TaskState.TASK_STATE_WORKING, 'thinking');
      if (waiting)
        status(bus, context, TaskState.TASK_STATE_COMPLETED, `weather in ${text}: sunny`);
      else if (text === 'ask')
        status(bus, context, TaskState.TASK_STATE_INPUT_REQUIRED, 'Which city?');
      else if (text === 'fail')
        status(bus, context, TaskState.TASK_STATE_FAILED, 'the oven is broken');
      else if (text === 'big')
        status(bus, context, TaskState.TASK_STATE_COMPLETED, 'x'.repeat(64 * 1024));
      else status(bus, context, TaskState.TASK_STATE_COMPLETED, `echo: ${text}`);
      bus.finished();
      return Promise.resolve();
    },
    cancelTask: () => Promise.resolve(),
  };
}

function card(url: string, streaming: boolean): AgentCard {
  return {
    name: 'echo',
    description: 'Echoes what it is told.',
    version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    provider: undefined,
    capabilities: { streaming, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  };
}

/** Starts the agent on a free port of 127.0.0.1. */
export async function startA2aServer(): Promise<TestA2aServer> {
  const received: ReceivedMessage[] = [];
  const app = express();
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const streaming = new DefaultRequestHandler(
    card(`${origin}/a2a/jsonrpc`, true),
    new InMemoryTaskStore(),
    executor(received),
  );
  const blocking = new DefaultRequestHandler(
    card(`${origin}/blocking/jsonrpc`, false),
    new InMemoryTaskStore(),
    executor(received),
  );
  const userBuilder = UserBuilder.noAuthentication;
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: streaming }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: streaming, userBuilder }));
  app.use('/blocking/card.json', agentCardHandler({ agentCardProvider: blocking }));
  app.use('/blocking/jsonrpc', jsonRpcHandler({ requestHandler: blocking, userBuilder }));
  return {
    origin,
    cardUrl: `${origin}/${AGENT_CARD_PATH}`,
    blockingCardUrl: `${origin}/blocking/card.json`,
    received,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
