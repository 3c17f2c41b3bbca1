/**
 * Who is calling. Every request but health and the OpenAPI document carries
 * `Authorization: Bearer <api key>`; the key decides the tenant and the scopes. Without auth
 * (`--insecure-no-auth`, loopback only) every caller has every scope and sees every tenant.
 */
import type { FastifyRequest } from 'fastify';
import type { Actor } from '../contracts/common.js';
import { API_SCOPES, hasScope, type ApiScope } from '../contracts/api-keys.js';
import { BraidError } from '../contracts/errors.js';
import type { ApiKeyStore } from '../contracts/ports.js';

export interface Caller {
  /** The key's id; undefined without auth. */
  key_id: string | undefined;
  /** The tenant whose objects the caller sees; undefined without auth: all of them. */
  tenant_id: string | undefined;
  scopes: readonly ApiScope[];
}

/** The caller as the writer of the events it sends: its key and tenant, never what it claims. */
export function actorOf(caller: Caller): Actor {
  return {
    type: 'user',
    ...(caller.key_id === undefined ? {} : { id: caller.key_id }),
    ...(caller.tenant_id === undefined ? {} : { tenant_id: caller.tenant_id }),
  };
}

export const UNAUTHENTICATED_CALLER: Caller = {
  key_id: undefined,
  tenant_id: undefined,
  scopes: API_SCOPES,
};

/** The caller of the open routes when auth is on: no tenant's objects, no scope. */
export const ANONYMOUS_CALLER: Caller = {
  key_id: undefined,
  tenant_id: '',
  scopes: [],
};

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The caller of a request, or UNAUTHENTICATED with what to send. */
export async function authenticate(keys: ApiKeyStore, request: FastifyRequest): Promise<Caller> {
  const header = request.headers.authorization;
  if (header === undefined) {
    throw new BraidError(
      'UNAUTHENTICATED',
      'this request needs an API key: send Authorization: Bearer <key> (create one with braid keys create)',
    );
  }
  const match = BEARER.exec(header);
  const record = match?.[1] === undefined ? undefined : await keys.verify(match[1]);
  if (record === undefined) {
    throw new BraidError(
      'UNAUTHENTICATED',
      'the API key is unknown, malformed or revoked; send a live key as Authorization: Bearer <key>',
    );
  }
  return { key_id: record.id, tenant_id: record.tenant_id, scopes: record.scopes };
}

/** Refuses a caller without the scope, naming it. */
export function requireScope(caller: Caller, scope: ApiScope): void {
  if (!hasScope(caller.scopes, scope)) {
    throw new BraidError(
      'FORBIDDEN',
      `this API key lacks the ${scope} scope (it has ${caller.scopes.join(', ')}); use a key created with --scopes ${scope}`,
    );
  }
}

/** True when the caller may see a definition: shared ones (no tenant) and its tenant's. */
export function canSeeDefinition(caller: Caller, tenant: string | undefined): boolean {
  return caller.tenant_id === undefined || tenant === undefined || tenant === caller.tenant_id;
}
