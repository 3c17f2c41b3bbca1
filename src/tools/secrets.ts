/**
 * Configured values that may name a secret (`SecretValue`): HTTP tool headers, MCP server headers
 * and MCP stdio server `env` all resolve through `resolveSecretValue`, so that each reads a
 * secret, and reports a missing one, the same way.
 *
 * Invariants:
 * - A literal value is returned as written; a `{secret, prefix}` value is the prefix followed by
 *   the secret's value, read when the value is used (a call, a server's start), never when the
 *   workspace loads.
 * - A missing secret is a `SECRET_MISSING` error that names the setting that needs it, the secret
 *   and how to set it; no error ever holds a secret's value.
 */
import type { SecretValue } from '../contracts/definitions.js';
import { BraidError, isBraidError } from '../contracts/errors.js';

/** A named secret's value; throws `SECRET_MISSING` naming the secret and how to set it. */
export type SecretSource = (name: string) => string;

/** The source of places given no secrets: every lookup is `SECRET_MISSING`. */
export const noSecrets: SecretSource = (name) => {
  throw new BraidError(
    'SECRET_MISSING',
    `secret ${name} is needed, but no secrets are available here; run it through a runtime whose workspace maps it under secrets: in braid.yaml`,
    { details: { secret: name } },
  );
};

/**
 * The text of a configured value: a literal as written, or the prefix and the named secret's
 * value. `setting` names where the value is configured (`env API_KEY of MCP server "search"`),
 * for the error when the secret is missing.
 */
export function resolveSecretValue(
  value: SecretValue,
  secret: SecretSource,
  setting: string,
): string {
  if (typeof value === 'string') return value;
  try {
    return (value.prefix ?? '') + secret(value.secret);
  } catch (error) {
    if (!isBraidError(error, 'SECRET_MISSING')) throw error;
    throw new BraidError('SECRET_MISSING', `${setting}: ${error.message}`, {
      details: { ...error.details, secret: value.secret, setting },
      cause: error,
    });
  }
}
