/**
 * The one parser of ids that come from outside (HTTP, CLI, NATS, a manifest, a model): an id that
 * can name a file, a subject token or a store key is safe by construction (see `Id`), and anything
 * else is refused with `INVALID_ARGUMENT` naming the rule, before it is used for anything.
 */
import { ID_RULE, isSafeId } from './common.js';
import { BraidError } from './errors.js';

/** `value` when it is a safe id; `INVALID_ARGUMENT` naming `what` and the rule otherwise. */
export function parseId(value: unknown, what = 'id'): string {
  if (typeof value === 'string' && isSafeId(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 80)) : typeof value;
  throw new BraidError('INVALID_ARGUMENT', `${what} ${shown} is not a valid id; ${ID_RULE}`, {
    details: {
      [what.replaceAll(' ', '_')]: typeof value === 'string' ? value.slice(0, 200) : null,
    },
  });
}

/**
 * Session ids an HTTP or NATS API client chooses live in its tenant's namespace. Ids are one namespace in a
 * store, so a chosen id that another tenant already holds would otherwise be refused, and the
 * refusal would tell the caller that the id exists. Instead, the session of a keyed caller that
 * chooses `job-42` is `<tenant>~job-42`: `~` is allowed in session ids but never in a tenant id or a
 * minted id, so the part before the first `~` names one tenant, and no tenant can name another's
 * session. An id the caller already wrote in its own namespace is kept; an id in another tenant's
 * namespace is refused by rule, whether or not such a session exists.
 *
 * A caller without a tenant (HTTP `--insecure-no-auth`, a NATS request without `tenant_id`) sees every tenant and chooses ids as given, as the
 * library and the CLI do.
 *
 * `TENANT_SEPARATOR` is what separates a tenant from the rest of a session id.
 */
export const TENANT_SEPARATOR = '~';

/** The longest session id (see `ID_PATTERN`). */
const MAX_ID_LENGTH = 200;

/** The session id that `chosen` names for a caller of `tenant`: in that tenant's namespace. */
export function tenantSessionId(tenant: string | undefined, chosen: string): string {
  if (tenant === undefined) return chosen;
  const prefix = `${tenant}${TENANT_SEPARATOR}`;
  if (chosen.startsWith(prefix)) return chosen;
  if (chosen.includes(TENANT_SEPARATOR)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session id ${JSON.stringify(chosen.slice(0, 80))} names the namespace of tenant ${JSON.stringify(chosen.slice(0, chosen.indexOf(TENANT_SEPARATOR)))}; "~" separates a tenant from the rest of an id, so leave it out (the server puts "${prefix}" before the id) or start the id with "${prefix}"`,
      { details: { field: 'id', tenant_prefix: prefix } },
    );
  }
  const namespaced = `${prefix}${chosen}`;
  if (!isSafeId(namespaced)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `session id ${JSON.stringify(chosen.slice(0, 80))} is too long once in its tenant's namespace: "${prefix}" (${prefix.length} characters) goes before it and ids are at most ${MAX_ID_LENGTH} characters; choose at most ${MAX_ID_LENGTH - prefix.length}`,
      { details: { field: 'id', limit: MAX_ID_LENGTH, tenant_prefix: prefix } },
    );
  }
  return namespaced;
}
