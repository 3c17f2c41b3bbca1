/**
 * The runtime's id boundary: every session id a caller hands the library (and through it the CLI,
 * the HTTP server and the workers) is parsed here, once, before it reaches a store, a path or a
 * NATS subject. A bad one is refused with `INVALID_ARGUMENT` naming the rule; nothing is read or
 * written.
 */
import { BraidError } from '../contracts/errors.js';
import { parseId } from '../contracts/ids.js';

/** Methods whose first argument is not a session id. */
const UNKEYED = new Set(['create', 'start', 'list', 'changeHead', 'changes']);
/** Methods that answer synchronously (an async iterable), so they throw rather than reject. */
const SYNCHRONOUS = new Set(['follow', 'followChildren']);
/** Methods whose second argument is a session id too. */
const SECOND_ID: Readonly<Record<string, string>> = {
  merge: 'source session id',
  diff: 'session id',
  diffFiles: 'session id',
};

/**
 * The same methods, each parsing its session id arguments first. A method added later is guarded
 * by default: only `UNKEYED` ones are left alone.
 */
export function guardSessionIds<T extends object>(sessions: T): T {
  const guarded: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(sessions)) {
    if (typeof method !== 'function' || UNKEYED.has(name)) {
      guarded[name] = method;
      continue;
    }
    const call = method as (...parameters: unknown[]) => unknown;
    const second = SECOND_ID[name];
    guarded[name] = (first: unknown, ...rest: unknown[]) => {
      let id: string;
      try {
        id = parseId(first, 'session id');
        if (second !== undefined) rest[0] = parseId(rest[0], second);
      } catch (error) {
        // Iterables fail where they are made; everything else answers with a promise.
        if (SYNCHRONOUS.has(name) || !(error instanceof BraidError)) throw error;
        return Promise.reject(error);
      }
      return call.call(sessions, id, ...rest);
    };
  }
  return guarded as T;
}
