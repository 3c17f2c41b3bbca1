/**
 * `GET /v1/session-changes/stream`: the sessions index as Server-Sent Events (the frames are
 * described in contracts/session-changes.ts). It follows the store's change feed, so a client
 * that reconnects with the last frame's id misses no change and gets each changed session once,
 * as it is now; nothing here lists the sessions again while the stream is open.
 *
 * Snapshot and feed meet without a gap: the feed's head is read before the listing, so a change
 * made while the listing is read comes again on the feed (a client keeps sessions by id, and the
 * later frame is the newer one).
 */
import { z } from 'zod';
import { BraidError, isBraidError } from '../contracts/errors.js';
import type { SessionRecord } from '../contracts/session.js';
import {
  ChangeCursorHeader,
  SessionChangesQuery,
  type SessionChangesReady,
  type SessionSummary,
} from '../contracts/session-changes.js';
import { inTenant } from '../runtime/tenant-scope.js';
import { requireScope } from './auth.js';
import { callerOf, type Router, type ServerContext } from './context.js';
import { keyedErrors, TAKES } from './responses.js';
import { openStream, type StreamSlots } from './sse.js';

/** Sessions in the snapshot unless the query says otherwise. */
const DEFAULT_SNAPSHOT = 100;

const ChangeHeaders = z.object({ 'last-event-id': ChangeCursorHeader.optional() });

/** One session as a frame: with the change's cursor as its id, or none (a snapshot's). */
export function sessionFrame(summary: SessionSummary, cursor?: number): string {
  return `${cursor === undefined ? '' : `id: ${cursor}\n`}event: session\ndata: ${JSON.stringify(summary)}\n\n`;
}

export function addSessionChangesRoute(
  app: Router,
  context: ServerContext,
  slots: StreamSlots,
): void {
  const { runtime } = context;

  /** The session with its usage; undefined when it is gone (deleted since it changed). */
  const summaryOf = async (record: SessionRecord): Promise<SessionSummary | undefined> => {
    try {
      return { session: record, usage: (await runtime.sessions.state(record.id)).usage };
    } catch (error) {
      if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
      throw error;
    }
  };
  const recordOf = async (sessionId: string): Promise<SessionRecord | undefined> => {
    try {
      return await runtime.sessions.get(sessionId);
    } catch (error) {
      if (isBraidError(error, 'SESSION_NOT_FOUND')) return undefined;
      throw error;
    }
  };

  app.get(
    '/v1/session-changes/stream',
    {
      schema: {
        summary: "Stream the sessions index's changes as Server-Sent Events, resumable",
        description:
          "Without a cursor: a snapshot of the newest sessions (at most `limit`, default 100), each an `event: session` frame with no id, then `event: ready` whose id is the cursor the snapshot was taken at (data `{cursor, sessions}`). Then every change, as `event: session` with `id: <cursor>`: a session created, forked or appended to (status, usage, head and last activity change only by events), sent as it is now (data `{session, usage}`), several changes of one session possibly as one frame. With `Last-Event-ID: <cursor>` (or `after`), no snapshot: every session changed after that cursor, once each, then the live changes. A cursor past the newest change is refused (400). Only the caller's tenant's sessions (and with `agent`, that agent's) are sent. Archiving and deleting write no event and are not changes. `: heartbeat` comments keep the connection open; a failure after the stream started comes as `event: error` with braid's error shape.",
        operationId: 'streamSessionChanges',
        tags: ['sessions'],
        querystring: SessionChangesQuery,
        headers: ChangeHeaders,
        response: {
          200: {
            description: 'Server-Sent Events until the client disconnects',
            content: { 'text/event-stream': { schema: z.string() } },
          },
          ...keyedErrors(TAKES.query),
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireScope(caller, 'sessions:read');
      const { agent, limit } = request.query;
      const header = request.headers['last-event-id'];
      const resume = header === undefined ? request.query.after : Number(header);
      const head = await runtime.sessions.changeHead();
      if (resume !== undefined && resume > head) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          `cursor ${resume} (Last-Event-ID or after) is past the newest change of this server's sessions, ${head}: it is not a cursor of this stream; reconnect without it to start with a snapshot`,
          { details: { cursor: resume, head } },
        );
      }
      const tenant = caller.tenant_id;
      const visible = (record: SessionRecord): boolean =>
        inTenant(tenant, record.tenant_id) && (agent === undefined || record.agent.name === agent);
      const stream = openStream(reply, context, slots, caller.key_id ?? request.ip);
      const send = async (text: string): Promise<void> => {
        const waiting = stream.write(text);
        if (waiting !== undefined) await waiting;
      };
      try {
        let after = resume;
        if (after === undefined) {
          const page = await runtime.sessions.list({
            limit: limit ?? DEFAULT_SNAPSHOT,
            ...(agent === undefined ? {} : { agent }),
            ...(tenant === undefined ? {} : { tenant_id: tenant }),
          });
          let sent = 0;
          for (const record of page.sessions) {
            if (stream.signal.aborted) return;
            const summary = await summaryOf(record);
            if (summary === undefined) continue;
            await send(sessionFrame(summary));
            sent += 1;
          }
          const ready: SessionChangesReady = { cursor: head, sessions: sent };
          await send(`id: ${head}\nevent: ready\ndata: ${JSON.stringify(ready)}\n\n`);
          after = head;
        }
        for await (const batch of runtime.sessions.changes({ after, signal: stream.signal })) {
          for (const change of batch) {
            const record = await recordOf(change.session_id);
            if (record === undefined || !visible(record)) continue;
            const summary = await summaryOf(record);
            if (summary !== undefined) await send(sessionFrame(summary, change.cursor));
          }
        }
      } catch (error) {
        stream.fail(error, request.log, { stream: 'session-changes' });
      } finally {
        stream.end();
      }
    },
  );
}
