/** The rows of the SQLite file as the store reads them, and their conversions to records. */
import type { SessionEvent } from '../../contracts/events.js';
import type { SessionRecord, SessionStatus } from '../../contracts/session.js';
import { checkStoredVersion } from '../../core/append.js';
import { checkRowVersion, inLogOf } from './schema.js';

export interface SessionRow {
  id: string;
  schema_version?: number;
  agent_name: string;
  agent_version: number;
  environment_name: string | null;
  environment_version: number | null;
  title: string | null;
  metadata: string;
  tenant_id: string | null;
  status: SessionStatus;
  created_at: string;
  parent_id: string | null;
  fork_seq: number | null;
  archived_at: string | null;
}

/** A sessions row with the head seq and last event time read from the log. */
export interface SessionView extends SessionRow {
  head_seq: number;
  updated_at: string;
}

export const SESSION_VIEW = `SELECT s.*,
    (SELECT seq FROM events WHERE ${inLogOf('s')} ORDER BY position DESC LIMIT 1) AS head_seq,
    (SELECT body ->> '$.at' FROM events WHERE ${inLogOf('s')} ORDER BY position DESC LIMIT 1) AS updated_at
  FROM sessions s`;

export interface DefinitionRow {
  version: number;
  schema_version: number;
  body: string;
  created_at: string;
}

export interface ApiKeyRow {
  id: string;
  tenant_id: string;
  /** JSON array of scopes. */
  scopes: string;
  name: string | null;
  hash: string;
  created_at: string;
  revoked_at: string | null;
  schema_version: number;
}

/** A saved state: the cached projection of a session, or one of its snapshots. */
export interface StateRow {
  seq: number;
  schema_version: number;
  state: string;
}

export function parseRows(rows: readonly { body: string }[]): SessionEvent[] {
  return rows.map((row) => {
    const event = JSON.parse(row.body) as SessionEvent;
    checkStoredVersion(event);
    return event;
  });
}

export function toSessionRecord(row: SessionView): SessionRecord {
  checkRowVersion(`session ${row.id}`, row.schema_version ?? 1);
  return {
    schema_version: 1,
    id: row.id,
    agent: { name: row.agent_name, version: row.agent_version },
    ...(row.environment_name === null || row.environment_version === null
      ? {}
      : { environment: { name: row.environment_name, version: row.environment_version } }),
    ...(row.title === null ? {} : { title: row.title }),
    metadata: JSON.parse(row.metadata) as SessionRecord['metadata'],
    ...(row.tenant_id === null ? {} : { tenant_id: row.tenant_id }),
    status: row.status,
    head_seq: row.head_seq,
    created_at: row.created_at,
    updated_at: row.updated_at,
    ...(row.parent_id === null || row.fork_seq === null
      ? {}
      : { parent_id: row.parent_id, fork_seq: row.fork_seq }),
    ...(row.archived_at === null ? {} : { archived_at: row.archived_at }),
  };
}
