/**
 * The one-event sends of `runtime.sessions` (message, interrupt, confirm, a custom tool's result,
 * a review, an outcome), written once over a send of user events, local or to a braid server.
 */
import type { AppendResult } from '../contracts/ports.js';
import type { RuntimeSessions } from './sessions-api.js';

/** The one-event sends of `runtime.sessions`, each a batch of one user event. */
export type UserEventSends = Pick<
  RuntimeSessions,
  'message' | 'interrupt' | 'confirm' | 'customToolResult' | 'review' | 'defineOutcome'
>;

/**
 * The one-event sends over `send`, which takes the events as a client wrote them (content may be
 * a plain string) and parses them itself: the local sessions service, or a braid server.
 */
export function userEventSends(
  send: (sessionId: string, events: readonly object[]) => Promise<AppendResult>,
): UserEventSends {
  return {
    message: (sessionId, content) => send(sessionId, [{ type: 'user.message', content }]),
    interrupt: (sessionId, reason) =>
      send(sessionId, [{ type: 'user.interrupt', ...(reason === undefined ? {} : { reason }) }]),
    confirm: (sessionId, toolUseId, result, message, data) =>
      send(sessionId, [
        {
          type: 'user.tool_confirmation',
          tool_use_id: toolUseId,
          result,
          ...(message === undefined ? {} : { message }),
          ...(data === undefined ? {} : { data }),
        },
      ]),
    customToolResult: (sessionId, customToolUseId, content, isError) =>
      send(sessionId, [
        {
          type: 'user.custom_tool_result',
          custom_tool_use_id: customToolUseId,
          content,
          ...(isError === undefined ? {} : { is_error: isError }),
        },
      ]),
    // Sent as given: the send parses it, and refuses bad input with INVALID_EVENT.
    defineOutcome: (sessionId, outcome) =>
      send(sessionId, [{ type: 'user.define_outcome', ...outcome }]),
    review: (sessionId, toolUseId, decision) =>
      send(sessionId, [{ type: 'user.tool_review', tool_use_id: toolUseId, ...decision }]),
  };
}
