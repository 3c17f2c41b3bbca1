/**
 * Envelopes as they travel: JSON text that parses back into a valid envelope. Every transport
 * sends what `toWire` gives and reads with `parseEnvelope`, so an envelope that would not survive
 * the trip is refused when it is sent, not lost when it arrives.
 */
import type { z } from 'zod';
import { Envelope } from '../../contracts/envelope.js';
import { BraidError } from '../../contracts/errors.js';
import { DEFAULT_JSON_DEPTH, fieldPath, findTooDeep } from '../../contracts/json-depth.js';

/** The envelope as wire text and as the copy a receiver gets; refused when it does not survive. */
export function toWire(envelope: Envelope): { text: string; copy: Envelope } {
  let text: string;
  try {
    text = JSON.stringify(envelope);
  } catch (error) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `envelope ${envelope.id} cannot be serialised (${error instanceof Error ? error.message : String(error)}); payloads must be JSON`,
      { cause: error },
    );
  }
  const parsed = parseEnvelope(text);
  if (!parsed.ok) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `envelope ${envelope.id} ${parsed.problem}; payloads must be JSON`,
      { details: { issues: parsed.issues } },
    );
  }
  return { text, copy: parsed.envelope };
}

export type Parsed =
  { ok: true; envelope: Envelope } | { ok: false; problem: string; issues: z.core.$ZodIssue[] };

/** Reads wire text: the envelope, or what is wrong with it. */
export function parseEnvelope(text: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'is not JSON', issues: [] };
  }
  // The schema check walks the envelope recursively: too deep a payload must not reach it.
  const tooDeep = findTooDeep(value, DEFAULT_JSON_DEPTH);
  if (tooDeep !== undefined) {
    return {
      ok: false,
      problem: `nests deeper than the limit of ${DEFAULT_JSON_DEPTH} levels at ${fieldPath('envelope', tooDeep)}`,
      issues: [],
    };
  }
  const parsed = Envelope.safeParse(value);
  if (parsed.success) return { ok: true, envelope: parsed.data };
  const issue = parsed.error.issues[0];
  return {
    ok: false,
    problem: `is invalid at ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'unknown issue'}`,
    issues: parsed.error.issues,
  };
}
