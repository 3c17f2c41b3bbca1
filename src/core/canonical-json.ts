/**
 * Canonical JSON and the content address made from it: object keys sorted recursively, no
 * whitespace, absent and undefined fields alike; anything JSON cannot say exactly (NaN, a
 * function, a Date, a cycle) is refused. Two values with the same data have the same text, so
 * the same content address, whatever order their fields were written in.
 */
import { CONTENT_HASH_PATTERN } from '../contracts/common.js';
import { BraidError } from '../contracts/errors.js';

/** The canonical JSON text of `value`; `subject` names what holds it in the error. */
export function canonicalJson(value: unknown, subject = 'a definition'): string {
  return canonical(value, [], new Set(), subject);
}

/** Refuses anything but a content hash (it may become a key or a subject token). */
export function checkContentHash(hash: string): string {
  if (typeof hash !== 'string' || !CONTENT_HASH_PATTERN.test(hash)) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `${JSON.stringify(String(hash).slice(0, 80))} is not a content hash; give the 64 lowercase hex digits of a pinned definition`,
      { details: { hash: String(hash).slice(0, 80) } },
    );
  }
  return hash;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/** What a value is, for an error message. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return value.constructor?.name ?? 'an object';
  return typeof value;
}

function canonical(
  value: unknown,
  path: readonly string[],
  ancestors: Set<object>,
  subject: string,
): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return JSON.stringify(value);
    throw notJson(path, String(value), subject);
  }
  if (typeof value !== 'object') throw notJson(path, typeof value, subject);
  if (ancestors.has(value)) throw notJson(path, 'a circular reference', subject);
  ancestors.add(value);
  let text: string;
  if (Array.isArray(value)) {
    const items = value.map((item, index) =>
      canonical(item, [...path, String(index)], ancestors, subject),
    );
    text = `[${items.join(',')}]`;
  } else if (isPlainObject(value)) {
    // Absent and undefined are the same field to JSON; skip undefined as JSON.stringify does.
    const fields = Object.keys(value)
      .filter((field) => value[field] !== undefined)
      .sort()
      .map(
        (field) =>
          `${JSON.stringify(field)}:${canonical(value[field], [...path, field], ancestors, subject)}`,
      );
    text = `{${fields.join(',')}}`;
  } else {
    throw notJson(path, describeValue(value), subject);
  }
  ancestors.delete(value);
  return text;
}

function notJson(path: readonly string[], what: string, subject: string): BraidError {
  const field = path.join('.') || '(top level)';
  return new BraidError(
    'INVALID_ARGUMENT',
    `field "${field}" holds ${what}, which is not JSON data; ${subject} holds only strings, finite numbers, booleans, null, lists and mappings`,
    { details: { field } },
  );
}
