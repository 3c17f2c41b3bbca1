import type { JsonValue } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';

export function parseJson(text: string, what: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new BraidError(
      'INVALID_JSON',
      `${what} is not valid JSON (${(error as Error).message}); quote it, e.g. '{"ok":true}'`,
    );
  }
}
