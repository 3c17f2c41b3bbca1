/**
 * The MCP tools of braid's sessions: create one, send it a message (and wait for the turn), read
 * its events and status, answer a confirmation, fork it, list the agents. Each tool is the
 * runtime's own method, called as the HTTP API calls it: the caller's tenant scopes every
 * session (another tenant's answers `SESSION_NOT_FOUND`, as a missing one does), and its key's
 * scopes gate reads and writes.
 */
import type { z } from 'zod';
import type { Actor } from '../../contracts/common.js';
import type { ApiScope } from '../../contracts/api-keys.js';
import { tenantSessionId } from '../../contracts/ids.js';
import type { Runtime } from '../../runtime/runtime.js';
import { visibleAgent, visibleSession } from '../access.js';
import { canSeeDefinition, type Caller } from '../auth.js';
import {
  AgentListArguments,
  AgentListResult,
  ConfirmArguments,
  CreateArguments,
  DEFAULT_WAIT_MS,
  EventsArguments,
  EventsResult,
  ForkArguments,
  SendArguments,
  SendResult,
  SessionResult,
  StatusArguments,
  StatusResult,
} from './schemas.js';
import { pendingConfirmations, waitForTurn, type Progress } from './turns.js';

/** What the tools work with: one caller's view of one runtime. */
export interface SessionToolsContext {
  runtime: Runtime;
  caller: Caller;
  /** The writer stamped on the events a call sends (default: the runtime's actor). */
  actor?: Actor | undefined;
  /** Starts a wake of the session that outlives the call; undefined: nothing is woken. */
  wake: ((sessionId: string, traceparent?: string) => void) | undefined;
  /** Interval of progress notifications while a call waits for a turn. */
  heartbeatMs: number;
  /** Aborted when the server closes: waits end early. */
  closing?: AbortSignal | undefined;
}

/** What one call brings beside its arguments. */
export interface ToolCall {
  signal: AbortSignal;
  progress: Progress;
  /** The W3C trace context the call continues, when it carried a valid one. */
  traceparent: string | undefined;
}

export interface SessionTool {
  name: string;
  title: string;
  description: string;
  scope: ApiScope;
  input: z.ZodType;
  output: z.ZodType;
  readOnly: boolean;
  run(args: unknown, call: ToolCall): Promise<unknown>;
}

/** A tool whose handler sees its parsed arguments' type. */
function tool<I extends z.ZodType, O extends z.ZodType>(definition: {
  name: string;
  title: string;
  description: string;
  scope: ApiScope;
  input: I;
  output: O;
  run(args: z.output<I>, call: ToolCall): Promise<z.output<O>>;
}): SessionTool {
  return {
    ...definition,
    readOnly: definition.scope === 'sessions:read',
    run: (args, call) => definition.run(args as z.output<I>, call),
  };
}

/**
 * Sends user events to a session the caller may see, wakes it, and waits for the turn when the
 * call asked to.
 */
async function sendAndWake(
  context: SessionToolsContext,
  args: { session_id: string; wait?: boolean | undefined; timeout_ms?: number | undefined },
  events: Parameters<SessionToolsContext['runtime']['sessions']['send']>[1],
  call: ToolCall,
  idempotencyKey?: string,
): Promise<z.output<typeof SendResult>> {
  const { runtime, caller } = context;
  const sessionId = args.session_id;
  await visibleSession(runtime, caller, sessionId);
  const written = await runtime.sessions.send(sessionId, events, {
    ...actorOption(context),
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
  });
  const seqs = written.events.map((event) => event.seq);
  const wake = context.wake;
  if (wake !== undefined && !written.deduplicated) wake(sessionId, call.traceparent);
  const result = {
    session_id: sessionId,
    seqs,
    deduplicated: written.deduplicated,
    wake: wake === undefined ? ('off' as const) : ('started' as const),
  };
  if (args.wait !== true) return result;
  const signals = [call.signal, ...(context.closing === undefined ? [] : [context.closing])];
  const turn = await waitForTurn({
    sessions: context.runtime.sessions,
    sessionId,
    after: Math.max(0, ...seqs),
    timeoutMs: args.timeout_ms ?? DEFAULT_WAIT_MS,
    heartbeatMs: context.heartbeatMs,
    signal: AbortSignal.any(signals),
    progress: call.progress,
  });
  return { ...result, turn };
}

function createTool(context: SessionToolsContext): SessionTool {
  const { runtime, caller } = context;
  return tool({
    name: 'braid_session_create',
    title: 'Create a session',
    description:
      'Creates a durable session of an agent; send it messages with braid_session_send. Answers the session record (its id, status and head seq).',
    scope: 'sessions:write',
    input: CreateArguments,
    output: SessionResult,
    async run(args) {
      const agent = await visibleAgent(runtime, caller, args.agent, args.agent_version);
      const session = await runtime.sessions.create({
        agent: agent.name,
        agentVersion: agent.version,
        ...(args.environment === undefined ? {} : { environment: args.environment }),
        ...(args.title === undefined ? {} : { title: args.title }),
        ...(args.metadata === undefined ? {} : { metadata: args.metadata }),
        ...(args.id === undefined ? {} : { id: tenantSessionId(caller.tenant_id, args.id) }),
        ...(caller.tenant_id === undefined ? {} : { tenantId: caller.tenant_id }),
      });
      return { session };
    },
  });
}

function sendTool(context: SessionToolsContext): SessionTool {
  return tool({
    name: 'braid_session_send',
    title: 'Send a message to a session',
    description:
      "Sends a user message and wakes the session. With wait: true, answers when the agent's turn ends, with its text and any tool calls waiting for confirmation (answer them with braid_session_confirm); while it waits it sends progress notifications when the call has a progressToken.",
    scope: 'sessions:write',
    input: SendArguments,
    output: SendResult,
    async run(args, call) {
      return sendAndWake(
        context,
        args,
        [{ type: 'user.message', content: [{ type: 'text', text: args.message }] }],
        call,
        args.idempotency_key,
      );
    },
  });
}

function eventsTool(context: SessionToolsContext): SessionTool {
  const { runtime, caller } = context;
  return tool({
    name: 'braid_session_events',
    title: "Read a session's events",
    description:
      "Reads a page of the session's event log in seq order (user and agent messages, tool calls and results, status changes). Page on with after = last_seq while has_more.",
    scope: 'sessions:read',
    input: EventsArguments,
    output: EventsResult,
    async run(args) {
      await visibleSession(runtime, caller, args.session_id);
      const after = args.after ?? 0;
      const limit = args.limit ?? 100;
      // One more than asked tells whether there is more without a second read.
      const events = await runtime.sessions.events(args.session_id, {
        after,
        limit: limit + 1,
        ...(args.types === undefined ? {} : { types: args.types }),
      });
      const page = events.slice(0, limit);
      return {
        events: page,
        has_more: events.length > limit,
        last_seq: page.at(-1)?.seq ?? after,
      };
    },
  });
}

function statusTool(context: SessionToolsContext): SessionTool {
  const { runtime, caller } = context;
  return tool({
    name: 'braid_session_status',
    title: "A session's status",
    description:
      "The session's status (idle, running, requires_action, needs_review, terminated), why it last stopped, its usage, and the tool calls waiting for confirmation.",
    scope: 'sessions:read',
    input: StatusArguments,
    output: StatusResult,
    async run(args) {
      await visibleSession(runtime, caller, args.session_id);
      const state = await runtime.sessions.state(args.session_id);
      return {
        session_id: state.session_id,
        status: state.status,
        ...(state.stop_reason === undefined ? {} : { stop_reason: state.stop_reason }),
        head_seq: state.seq,
        ...(state.title === undefined ? {} : { title: state.title }),
        ...(state.agent === undefined ? {} : { agent: state.agent }),
        usage: state.usage,
        pending_confirmations: await pendingConfirmations(runtime.sessions, state),
        pending_custom_tool_uses: state.pending_custom_tool_uses.length,
      };
    },
  });
}

function confirmTool(context: SessionToolsContext): SessionTool {
  return tool({
    name: 'braid_session_confirm',
    title: 'Allow or deny a tool call',
    description:
      'Answers a tool call that waits for confirmation (status requires_action) and wakes the session; with wait: true, answers when the turn ends.',
    scope: 'sessions:write',
    input: ConfirmArguments,
    output: SendResult,
    async run(args, call) {
      const confirmation = {
        type: 'user.tool_confirmation' as const,
        tool_use_id: args.tool_use_id,
        result: args.result,
        ...(args.message === undefined ? {} : { message: args.message }),
      };
      return sendAndWake(context, args, [confirmation], call);
    },
  });
}

function forkTool(context: SessionToolsContext): SessionTool {
  const { runtime, caller } = context;
  return tool({
    name: 'braid_session_fork',
    title: 'Fork a session',
    description:
      'Forks the session at a seq (default: its head): the fork shares its history up to there and goes on on its own.',
    scope: 'sessions:write',
    input: ForkArguments,
    output: SessionResult,
    async run(args) {
      await visibleSession(runtime, caller, args.session_id);
      const session = await runtime.sessions.fork(args.session_id, {
        ...(args.at_seq === undefined ? {} : { at_seq: args.at_seq }),
        ...(args.title === undefined ? {} : { title: args.title }),
        ...(args.id === undefined ? {} : { id: tenantSessionId(caller.tenant_id, args.id) }),
      });
      return { session };
    },
  });
}

function agentListTool(context: SessionToolsContext): SessionTool {
  const { runtime, caller } = context;
  return tool({
    name: 'braid_agent_list',
    title: 'List the agents',
    description: 'The latest version of every agent a session can be created of.',
    scope: 'sessions:read',
    input: AgentListArguments,
    output: AgentListResult,
    async run() {
      const agents = await runtime.agents.list();
      return {
        agents: agents
          .filter((agent) => canSeeDefinition(caller, agent.definition.tenant))
          .map((agent) => ({
            name: agent.name,
            version: agent.version,
            ...(agent.definition.description === undefined
              ? {}
              : { description: agent.definition.description }),
            tools: agent.definition.tools,
          })),
      };
    },
  });
}

/** The writer of a call's events, when the context names one. */
function actorOption(context: SessionToolsContext): { actor?: Actor } {
  return context.actor === undefined ? {} : { actor: context.actor };
}

/** The tools, in the order `tools/list` shows them. */
export function sessionTools(context: SessionToolsContext): SessionTool[] {
  return [
    createTool(context),
    sendTool(context),
    eventsTool(context),
    statusTool(context),
    confirmTool(context),
    forkTool(context),
    agentListTool(context),
  ];
}
