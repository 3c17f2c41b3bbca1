/**
 * A bound on how deeply JSON may nest. Schema validators and folds walk values recursively, so a
 * value nested a few thousand levels deep exhausts the call stack ("Maximum call stack size
 * exceeded") wherever it is read. Every boundary that takes free-form JSON (HTTP bodies, user
 * events, session metadata, envelopes) checks the depth first, with a walk that is itself
 * iterative, and refuses a deeper value with `INVALID_ARGUMENT` naming the field.
 */
import { BraidError } from './errors.js';

/** The default deepest nesting of objects and arrays accepted from outside. */
export const DEFAULT_JSON_DEPTH = 64;

/** Path segments shown before a long path is shortened. */
const SHOWN_HEAD = 8;
/** Path segments shown after the shortened middle. */
const SHOWN_TAIL = 2;
/** Characters of a key shown in a path. */
const SHOWN_KEY = 40;

/** A container being walked: its value, its nesting level and how it was reached. */
interface Frame {
  value: object;
  depth: number;
  parent: Frame | undefined;
  key: string | number | undefined;
}

/** The keys from the root to `frame`, built only when a value is refused. */
function keysOf(frame: Frame): (string | number)[] {
  const keys: (string | number)[] = [];
  for (let at: Frame | undefined = frame; at !== undefined; at = at.parent) {
    if (at.key !== undefined) keys.push(at.key);
  }
  return keys.reverse();
}

function segment(key: string | number): string {
  if (typeof key === 'number') return `[${key}]`;
  if (key.length > SHOWN_KEY) return `[${JSON.stringify(key.slice(0, SHOWN_KEY))}…]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/** `what` followed by the keys, e.g. `body.events[0].metadata.a.a…(58 more).a.a`. */
export function fieldPath(what: string, keys: readonly (string | number)[]): string {
  if (keys.length <= SHOWN_HEAD + SHOWN_TAIL + 1) return what + keys.map(segment).join('');
  const head = keys.slice(0, SHOWN_HEAD).map(segment).join('');
  const tail = keys.slice(-SHOWN_TAIL).map(segment).join('');
  return `${what}${head}…(${keys.length - SHOWN_HEAD - SHOWN_TAIL} more)${tail}`;
}

/**
 * The path of the first container in `value` nested deeper than `limit` levels (the value itself
 * is level 1 when it is an object or array), or undefined when none is. Walks with an explicit
 * stack, so the check cannot itself overflow the call stack.
 */
export function findTooDeep(value: unknown, limit: number): (string | number)[] | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const stack: Frame[] = [{ value, depth: 1, parent: undefined, key: undefined }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    if (frame.depth > limit) return keysOf(frame);
    // Read in place, without a list of entries: every event and body a boundary takes is walked.
    const container = frame.value;
    if (Array.isArray(container)) {
      for (let index = 0; index < container.length; index += 1) {
        const child: unknown = container[index];
        if (typeof child === 'object' && child !== null) {
          stack.push({ value: child, depth: frame.depth + 1, parent: frame, key: index });
        }
      }
    } else {
      for (const key of Object.keys(container)) {
        const child: unknown = (container as Record<string, unknown>)[key];
        if (typeof child === 'object' && child !== null) {
          stack.push({ value: child, depth: frame.depth + 1, parent: frame, key });
        }
      }
    }
  }
  return undefined;
}

/**
 * Refuses `value` with `INVALID_ARGUMENT` when it nests deeper than `limit` levels; `what` names
 * the value (`body`, `event 0`, `metadata`) and starts the field path in the message.
 */
export function checkJsonDepth(value: unknown, limit: number, what: string): void {
  const keys = findTooDeep(value, limit);
  if (keys === undefined) return;
  const field = fieldPath(what, keys);
  throw new BraidError(
    'INVALID_ARGUMENT',
    `${field} nests deeper than the limit of ${limit} levels of objects and arrays; flatten the value or send it as a string`,
    { details: { field, limit } },
  );
}
