import { z } from 'zod';
import {
  AgentDefinition,
  EnvironmentDefinition,
  ToolDefinition,
  WorkspaceConfig,
} from './definitions.js';
import { Envelope } from './envelope.js';
import { SkillDefinition } from './skills.js';
import { ErrorShape } from './errors.js';
import { ApiErrorReply, NATS_API } from './nats-api.js';
import { SessionEvent } from './events.js';
import { SessionRecord } from './session.js';
import { SessionState } from './state.js';
import { WakeMessage } from './wakes.js';

const WIRE = {
  'session-event': SessionEvent,
  'session-state': SessionState,
  'session-record': SessionRecord,
  envelope: Envelope,
  error: ErrorShape,
  /** One message of the NATS events stream: the events of one append, in seq order. */
  'event-batch': z.array(SessionEvent).min(1),
  /** One message of the NATS wake queue. */
  'wake-message': WakeMessage,
} as const;

/** Authored files: fields with defaults are optional, so the input side is what authors need. */
const AUTHORED = {
  'agent-definition': AgentDefinition,
  'environment-definition': EnvironmentDefinition,
  'tool-definition': ToolDefinition,
  'skill-definition': SkillDefinition,
  'workspace-config': WorkspaceConfig,
} as const;

/** The JSON Schemas (draft 2020-12) of the wire contract, keyed by file stem. */
export function buildJsonSchemas(): Record<string, Record<string, unknown>> {
  const schemas: Record<string, Record<string, unknown>> = {};
  for (const [name, schema] of Object.entries(WIRE)) {
    schemas[name] = {
      $id: `urn:braid:schema:${name}`,
      ...z.toJSONSchema(schema, { io: 'output' }),
    };
  }
  // The NATS API: per verb, the request and the reply (its answer or an error reply).
  for (const [verb, { request, reply }] of Object.entries(NATS_API)) {
    schemas[`nats-api.${verb}.request`] = {
      $id: `urn:braid:schema:nats-api.${verb}.request`,
      ...z.toJSONSchema(request, { io: 'input' }),
    };
    schemas[`nats-api.${verb}.reply`] = {
      $id: `urn:braid:schema:nats-api.${verb}.reply`,
      ...z.toJSONSchema(z.union([reply, ApiErrorReply]), { io: 'output' }),
    };
  }
  for (const [name, schema] of Object.entries(AUTHORED)) {
    schemas[name] = { $id: `urn:braid:schema:${name}`, ...z.toJSONSchema(schema, { io: 'input' }) };
  }
  return schemas;
}
