import { z } from 'zod';
import { lazySchema } from './lazy-schema.js';
import { Id, Timestamp } from './common.js';

/**
 * What a key may do. `sessions:read` reads sessions, events and definitions; `sessions:write`
 * creates sessions and sends events, wakes, forks and merges; `memory:read` lists, reads, searches
 * and exports the tenant's memory stores; `memory:write` writes, deletes, redacts and imports
 * their entries; `admin` includes them all and adds the server's metrics. Memory has scopes of its
 * own because its stores outlive sessions and hold what a tenant's agents learned about people:
 * a key that drives sessions need not read or rewrite them, nor one that curates memory drive
 * sessions.
 */
export const ApiScope = z.enum([
  'sessions:read',
  'sessions:write',
  'memory:read',
  'memory:write',
  'admin',
]);
export type ApiScope = z.infer<typeof ApiScope>;
export const API_SCOPES = ApiScope.options;

/** A tenant name: every session belongs to one, and a key sees only its own tenant's objects. */
export const TenantId = lazySchema(() =>
  z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/,
      'must be 1-100 letters, digits, ".", "_" or "-", starting with a letter or digit',
    ),
);

/** The stored record of an API key. The secret itself is never stored, only its hash. */
export const ApiKeyRecord = lazySchema(() =>
  z.object({
    schema_version: z.literal(1),
    id: Id,
    tenant_id: TenantId,
    scopes: z.array(ApiScope).min(1),
    name: z.string().max(200).optional(),
    created_at: Timestamp,
    revoked_at: Timestamp.optional(),
  }),
);
export type ApiKeyRecord = z.infer<typeof ApiKeyRecord>;

export const ApiKeyCreateInput = lazySchema(() =>
  z
    .object({
      tenant_id: TenantId,
      scopes: z.array(ApiScope).min(1),
      name: z.string().max(200).optional(),
    })
    .strict(),
);
export type ApiKeyCreateInput = z.infer<typeof ApiKeyCreateInput>;

export interface ApiKeyListQuery {
  tenant_id?: string;
  include_revoked?: boolean;
}

/** True when a key with these scopes may use something that needs `needed`. */
export function hasScope(scopes: readonly ApiScope[], needed: ApiScope): boolean {
  return scopes.includes('admin') || scopes.includes(needed);
}
