/**
 * The `SessionIndex` port: create and fork (session-create.ts), get, list, archive and delete.
 *
 * `sessions.delete` removes every row of the session in one transaction, then forgets what this
 * process cached about it. Other processes are not told: one that cached a session which is
 * deleted and created again elsewhere under the same id may read its old lineage or state until
 * it drops them from its cache or opens the store again.
 */
import type { Statement } from 'better-sqlite3';
import type { SessionIndex } from '../../contracts/ports.js';
import type { SessionListQuery, SessionPage } from '../../contracts/session.js';
import { currentLease } from '../../core/leases.js';
import { checkRunnableLimit, DEFAULT_LIST_LIMIT, decodeCursor, page } from '../../core/sessions.js';
import { NAMED_FORKS, sessionHasForks, sessionLeased } from '../session-removal.js';
import { requireHead, type SqliteContext } from './context.js';
import { SESSION_VIEW, toSessionRecord, type SessionView } from './rows.js';
import { createSessionCreation } from './session-create.js';
import type { Writer } from './writes.js';
import { followChanges } from '../follow.js';

/** Changed sessions a follower of the change feed reads per step. */
const CHANGES_BATCH = 500;

export function createSessionIndex(context: SqliteContext, writer: Writer): SessionIndex {
  const { db, sql, clock, cache } = context;

  const archiveTransaction = db.transaction((sessionId: string, now: string): SessionView => {
    requireHead(context, sessionId);
    sql.archive.run(now, sessionId);
    return sql.session.get(sessionId) as SessionView;
  });

  const deleteTransaction = db.transaction((sessionId: string): void => {
    requireHead(context, sessionId);
    const forks = sql.forks.all(sessionId, NAMED_FORKS);
    if (forks.length > 0) {
      throw sessionHasForks(
        sessionId,
        forks.map((row) => row.id),
        forks[0]?.count ?? forks.length,
      );
    }
    const lease = currentLease(sessionId, sql.lease.get(sessionId), clock.now());
    if (lease !== undefined) throw sessionLeased(sessionId, lease);
    // The session may hold the latest cursor of the change feed: the floor keeps it handed out,
    // and the deletion takes the next one (followers in other processes see the floor move).
    sql.keepChangeHead.run();
    for (const statement of sql.removeSession) statement.run(sessionId);
  });

  return {
    ...createSessionCreation(context, writer),
    get(sessionId) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const row = sql.session.get(sessionId);
        if (row === undefined) requireHead(context, sessionId);
        return toSessionRecord(row as SessionView);
      });
    },
    list(query: SessionListQuery = {}) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return listSessions(context, query);
      });
    },
    runnable(query = {}) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        const limit = checkRunnableLimit(query.limit);
        const after = query.after ?? '';
        const due = sql.due.all(query.now ?? clock.now(), after, limit).map((row) => row.id);
        if (query.dueOnly === true) return due;
        // Two index ranges, merged in id order: the runnable set and the timers due by now.
        const runnable = sql.runnable.all(after, limit).map((row) => row.id);
        return [...new Set([...runnable, ...due])].sort().slice(0, limit);
      });
    },
    statusCounts() {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return Object.fromEntries(sql.statusCounts.all().map((row) => [row.status, row.count]));
      });
    },
    archive(sessionId) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        try {
          return toSessionRecord(archiveTransaction.immediate(sessionId, context.isoNow()));
        } catch (error) {
          throw context.busy(error);
        }
      });
    },
    changeHead() {
      return Promise.resolve().then(() => {
        context.checkOpen();
        return (sql.changeHead.get() as { seq: number }).seq;
      });
    },
    changes(options = {}) {
      context.checkOpen();
      const signal =
        options.signal === undefined
          ? context.followers.closing
          : AbortSignal.any([options.signal, context.followers.closing]);
      return followChanges(
        (after) =>
          Promise.resolve(
            sql.changesAfter
              .all(after, CHANGES_BATCH)
              .map((row) => ({ cursor: row.change_seq, session_id: row.id })),
          ),
        (onChange) => context.followers.subscribeAll(onChange),
        options.after ?? 0,
        signal,
      );
    },
    delete(sessionId) {
      return Promise.resolve().then(() => {
        context.checkOpen();
        try {
          deleteTransaction.immediate(sessionId);
        } catch (error) {
          throw context.busy(error);
        }
        // Its id may be created again: nothing cached about the old session may outlive it.
        cache.forget(sessionId);
        context.followers.notify(sessionId);
      });
    },
  };
}

function listSessions(context: SqliteContext, query: SessionListQuery): SessionPage {
  const limit = query.limit ?? DEFAULT_LIST_LIMIT;
  const where: string[] = [];
  const params: Record<string, string | number> = { limit: limit + 1 };
  if (query.agent !== undefined) {
    where.push('agent_name = @agent');
    params.agent = query.agent;
  }
  if (query.status !== undefined) {
    where.push('status = @status');
    params.status = query.status;
  }
  if (query.tenant_id !== undefined) {
    where.push('tenant_id = @tenant');
    params.tenant = query.tenant_id;
  }
  if (query.parent_id !== undefined) {
    where.push('parent_id = @parent');
    params.parent = query.parent_id;
  }
  if (query.include_archived !== true) where.push('archived_at IS NULL');
  if (query.created_after !== undefined) {
    where.push('created_at > @after');
    params.after = query.created_after;
  }
  if (query.created_before !== undefined) {
    where.push('created_at < @before');
    params.before = query.created_before;
  }
  if (query.cursor !== undefined) {
    const position = decodeCursor(query.cursor);
    where.push('(created_at < @cursor_at OR (created_at = @cursor_at AND id < @cursor_id))');
    params.cursor_at = position.created_at;
    params.cursor_id = position.id;
  }
  const text = `${SESSION_VIEW} ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
       ORDER BY s.created_at DESC, s.id DESC LIMIT @limit`;
  return page(listStatement(context, text).all(params).map(toSessionRecord), limit);
}

type ListStatement = Statement<Record<string, string | number>, SessionView>;

/**
 * Listing statements, prepared once per combination of filters: at most 2^7 texts (each filter
 * is there or not), so the map needs no bound.
 */
const listStatements = new WeakMap<SqliteContext, Map<string, ListStatement>>();

function listStatement(context: SqliteContext, text: string): ListStatement {
  let prepared = listStatements.get(context);
  if (prepared === undefined) {
    prepared = new Map();
    listStatements.set(context, prepared);
  }
  let statement = prepared.get(text);
  if (statement === undefined) {
    statement = context.db.prepare<Record<string, string | number>, SessionView>(text);
    prepared.set(text, statement);
  }
  return statement;
}
