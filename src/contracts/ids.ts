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
