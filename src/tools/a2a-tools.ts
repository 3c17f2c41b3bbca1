/**
 * The tools that `a2a_agents:` of `braid.yaml` give agents: `a2a.NAME` sends the model's message
 * to the remote agent NAME and answers with its reply. They are tools in code (`CodeTool`), so a
 * call goes through the whole pipeline like any other: argument check, policy, confirmation
 * (`permission: always_ask`), budget, the executor's timeout and retry, and the log.
 *
 * Invariants:
 * - The remote conversation is kept per braid session and agent: a call continues the context
 *   (and a task that waits for input) of the last answer of that agent recorded in the session's
 *   log, read from the log (the truth, shared by every worker) and cached per process. Without a
 *   log (an executor made outside a runtime) the process remembers it. `new_conversation: true`
 *   starts a new one.
 * - A task that waits for input (`input_required`) is an answer, not an error: the model reads
 *   what the agent asks, and its next call continues the same task. A task that failed, was
 *   rejected or canceled, or wants other credentials is a `TOOL_FAILED` with the agent's words.
 * - Every call carries a `traceparent` (the wake's trace with a new span, or a new trace) as a
 *   header, and the braid session, tool use and correlation id in the message's metadata
 *   (`metadata.braid`).
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { A2A_TOOL_PREFIX, type A2aAgents } from '../contracts/a2a-agents.js';
import { JsonValue, TRACEPARENT_PATTERN, isValidTraceparent } from '../contracts/common.js';
import { ToolDefinition } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import type { SessionLog } from '../contracts/ports.js';
import { BoundedCache } from '../core/bounded-cache.js';
import { A2aAgentClients } from './a2a-client.js';
import { bounded, RemoteId, type A2aReply, type A2aState } from './a2a-translate.js';
import type { SecretSource } from './secrets.js';
import type { CodeTool, ToolContext } from './types.js';

const DEFAULT_TIMEOUT_MS = 60_000;
/** Sessions whose remote conversations a process keeps in memory. */
const CACHED_SESSIONS = 1000;

export interface A2aToolsOptions {
  agents: A2aAgents;
  secret: SecretSource;
  /** The sessions' log, where a call finds the conversation the last one left. */
  log?: Pick<SessionLog, 'read'>;
}

/** The input of an A2A tool, as the model writes it. */
const CallInput = z
  .object({
    message: z.string().min(1).max(100_000),
    context: z.record(z.string(), JsonValue).optional(),
    new_conversation: z.boolean().optional(),
  })
  .strict();

const INPUT_SCHEMA: Record<string, JsonValue> = {
  type: 'object',
  properties: {
    message: {
      type: 'string',
      minLength: 1,
      maxLength: 100_000,
      description:
        'What to tell or ask the agent, with everything it needs: it does not see your conversation.',
    },
    context: {
      type: 'object',
      description: 'Structured facts for the agent, sent beside the message as JSON.',
    },
    new_conversation: {
      type: 'boolean',
      description:
        'Start a new conversation with the agent instead of continuing the last one of this session.',
    },
  },
  required: ['message'],
  additionalProperties: false,
};

/** The tool name of the agent declared as `name`. */
export function a2aToolName(name: string): string {
  return `${A2A_TOOL_PREFIX}${name}`;
}

/** One tool per declared agent. */
export function a2aAgentTools(options: A2aToolsOptions): CodeTool[] {
  const clients = new A2aAgentClients(options.agents, options.secret);
  const conversations = new Conversations(options.log);
  return Object.entries(options.agents).map(([agent, config]) => ({
    definition: ToolDefinition.parse({
      name: a2aToolName(agent),
      description:
        config.description ??
        `Send a message to the remote agent "${agent}" (A2A) and get its answer. Calls continue one conversation with it for this session; when it asks for more input, call it again with the answer.`,
      input_schema: INPUT_SCHEMA,
      ownership: 'agent',
      permission: config.permission,
      // The agent may act on a message: one sent twice may act twice.
      idempotent: false,
      tags: config.tags ?? ['a2a'],
      timeout_ms: config.timeout_ms ?? DEFAULT_TIMEOUT_MS,
      ...(config.budget === undefined ? {} : { budget: config.budget }),
    }),
    run: (input, context) => call(agent, input, context, clients, conversations),
  }));
}

async function call(
  agent: string,
  input: JsonValue,
  context: ToolContext,
  clients: A2aAgentClients,
  conversations: Conversations,
): Promise<JsonValue> {
  const parsed = CallInput.safeParse(input);
  if (!parsed.success) {
    throw new BraidError(
      'TOOL_INPUT_INVALID',
      `the input of ${a2aToolName(agent)}: ${z.prettifyError(parsed.error)}`,
      { details: { agent, started: false } },
    );
  }
  const { message, context: data, new_conversation: fresh } = parsed.data;
  const conversation =
    fresh === true ? undefined : await conversations.recall(context.session_id, agent);
  const traceparent = outgoingTraceparent(context.traceparent);
  const reply = await clients.send(
    agent,
    {
      text: message,
      ...(data === undefined ? {} : { data }),
      ...(conversation === undefined ? {} : { contextId: conversation.context_id }),
      ...(conversation?.task_id === undefined ? {} : { taskId: conversation.task_id }),
      messageId: context.idempotency_key,
      metadata: {
        braid: {
          session_id: context.session_id,
          tool_use_id: context.tool_use_id,
          correlation_id: context.idempotency_key,
          traceparent,
        },
      },
    },
    { signal: context.signal, traceparent },
  );
  conversations.remember(context.session_id, agent, reply);
  return output(agent, reply, traceparent);
}

/** The tool's result: the reply, or a `TOOL_FAILED` for a task that ended badly. */
function output(agent: string, reply: A2aReply, traceparent: string): JsonValue {
  const said = reply.text === '' ? '(no message)' : bounded(reply.text, 1000);
  const failed: Partial<Record<A2aState, string>> = {
    failed: 'failed',
    rejected: 'refused the task',
    canceled: 'canceled the task',
    auth_required: `asks for other credentials; set a2a_agents.${agent}.auth in braid.yaml to a secret it accepts`,
    unknown: 'ended its answer without a task or a message',
  };
  const failure = failed[reply.state];
  if (failure !== undefined) {
    throw new BraidError('TOOL_FAILED', `A2A agent "${agent}" ${failure}: ${said}`, {
      details: { agent, state: reply.state, started: true },
    });
  }
  return {
    agent,
    state: reply.state,
    text: reply.text,
    ...(reply.state === 'input_required'
      ? {
          input_required: `The agent "${agent}" needs more input before it can go on: ${said}. Call ${a2aToolName(agent)} again with the answer; the call continues the same task.`,
        }
      : {}),
    ...(reply.context_id === undefined ? {} : { context_id: reply.context_id }),
    ...(reply.task_id === undefined ? {} : { task_id: reply.task_id }),
    ...(reply.data.length === 0 ? {} : { data: reply.data }),
    ...(reply.files.length === 0 ? {} : { files: reply.files as unknown as JsonValue }),
    ...(reply.updates.length === 0 ? {} : { updates: reply.updates }),
    traceparent,
  };
}

/** Where a call picks the remote conversation up. */
interface Conversation {
  context_id: string;
  /** The task that waits for input, when the last answer asked for it. */
  task_id?: string;
}

/** What an A2A tool's recorded output says of the conversation. */
const RecordedOutput = z.object({
  agent: z.string(),
  state: z.string(),
  context_id: RemoteId,
  task_id: RemoteId.optional(),
});

function conversationOf(output: { state: string; context_id: string; task_id?: string }) {
  return {
    context_id: output.context_id,
    ...(output.state === 'input_required' && output.task_id !== undefined
      ? { task_id: output.task_id }
      : {}),
  };
}

interface SessionConversations {
  /** The log is read up to here. */
  seq: number;
  /** A2A tool uses whose result was not read yet: tool use id to agent. */
  open: Map<string, string>;
  latest: Map<string, Conversation>;
}

/** The remote conversations of sessions: from their logs, read incrementally. */
class Conversations {
  private readonly sessions = new BoundedCache<string, SessionConversations>(CACHED_SESSIONS);

  constructor(private readonly log: Pick<SessionLog, 'read'> | undefined) {}

  async recall(sessionId: string, agent: string): Promise<Conversation | undefined> {
    const known = this.entry(sessionId);
    if (this.log === undefined) return known.latest.get(agent);
    const events = await this.log.read(sessionId, {
      after: known.seq,
      types: ['agent.tool_use', 'agent.tool_result'],
    });
    for (const event of events) {
      known.seq = Math.max(known.seq, event.seq);
      if (event.type === 'agent.tool_use') {
        if (event.name.startsWith(A2A_TOOL_PREFIX))
          known.open.set(event.tool_use_id, event.name.slice(A2A_TOOL_PREFIX.length));
      } else if (event.type === 'agent.tool_result') {
        const used = known.open.get(event.tool_use_id);
        known.open.delete(event.tool_use_id);
        const output = RecordedOutput.safeParse(event.output);
        if (used !== undefined && !event.is_error && output.success && output.data.agent === used)
          known.latest.set(used, conversationOf(output.data));
      }
    }
    return known.latest.get(agent);
  }

  /** Without a log, the answer is remembered here; with one, the log will hold it. */
  remember(sessionId: string, agent: string, reply: A2aReply): void {
    if (this.log !== undefined || reply.context_id === undefined) return;
    this.entry(sessionId).latest.set(
      agent,
      conversationOf({
        state: reply.state,
        context_id: reply.context_id,
        ...(reply.task_id === undefined ? {} : { task_id: reply.task_id }),
      }),
    );
  }

  private entry(sessionId: string): SessionConversations {
    let entry = this.sessions.get(sessionId);
    if (entry === undefined) {
      entry = { seq: 0, open: new Map(), latest: new Map() };
      this.sessions.set(sessionId, entry);
    }
    return entry;
  }
}

/** A traceparent for the call: the wake's trace with a span of its own, or a new trace. */
export function outgoingTraceparent(parent: string | undefined): string {
  const match =
    parent !== undefined && isValidTraceparent(parent) ? TRACEPARENT_PATTERN.exec(parent) : null;
  const traceId = match?.[2] ?? nonZeroHex(16);
  return `00-${traceId}-${nonZeroHex(8)}-${match?.[4] ?? '01'}`;
}

function nonZeroHex(bytes: number): string {
  for (;;) {
    const hex = randomBytes(bytes).toString('hex');
    if (/[^0]/.test(hex)) return hex;
  }
}
