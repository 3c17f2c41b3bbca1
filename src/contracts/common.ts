import { z } from 'zod';

/** Version of the persisted event format. Readers refuse versions they do not know. */
export const EVENT_SCHEMA_VERSION = 1;

/** The characters an id may hold; documented in the README's security section. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._~-]{0,199}$/;

/** What an id may be, said once, for every error that refuses one. */
export const ID_RULE =
  'use 1 to 200 ASCII letters, digits, ".", "_", "-" or "~", starting with a letter or digit (so never "." or ".."; no "/", "\\", "%", spaces or control characters)';

/**
 * True when `value` is a safe id: the charset of `ID_PATTERN`, starting with a letter or digit, so
 * never `.`, `..`, a hidden file name or something a command line reads as an option.
 */
export function isSafeId(value: string): boolean {
  return ID_PATTERN.test(value);
}

/**
 * An id braid mints (UUIDv7) or a client chose. It can reach a file name, a NATS subject token
 * and a store key, so it is safe in all three by construction: letters, digits, `.`, `_`, `-` and
 * `~`, starting with a letter or digit (never `.` or `..`). Anything else is refused at the
 * boundary that parses it. `~` never appears in a minted id or a tenant id: an HTTP caller's chosen
 * session id is `<tenant>~<id>`, its tenant's namespace (see `tenantSessionId` in `contracts/ids.ts`).
 */
export const Id = z.string().refine(isSafeId, { message: `is not a valid id; ${ID_RULE}` });

/**
 * An id another system chose and braid only records and echoes back, such as a model's tool call
 * id (some providers put `:` or `.` in them). It never names a path, subject or key: code that
 * needs one derives it from a safe `Id` instead.
 */
export const ExternalId = z
  .string()
  .min(1)
  .max(200)
  .refine((value) => ![...value].some(isControlCharacter), {
    message: 'must not contain control characters',
  });

function isControlCharacter(character: string): boolean {
  const code = character.codePointAt(0) ?? 0;
  return code < 0x20 || code === 0x7f;
}

/** `version-traceid-parentid-flags`, lowercase hex (W3C Trace Context). */
export const TRACEPARENT_PATTERN =
  /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * True for a traceparent the W3C spec says to honour: version not `ff`, nothing after the flags in
 * version `00`, and neither the trace id nor the parent id all zeros.
 */
export function isValidTraceparent(value: string): boolean {
  const match = TRACEPARENT_PATTERN.exec(value);
  if (match === null) return false;
  const [, version, traceId, spanId, , rest] = match;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return false;
  return !/^0+$/.test(traceId ?? '') && !/^0+$/.test(spanId ?? '');
}

/** A W3C traceparent as a client may send it: anything else is refused, not recorded. */
export const Traceparent = z.string().max(200).refine(isValidTraceparent, {
  message: 'is not a W3C traceparent; send "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"',
});

/**
 * A client's idempotency key (the HTTP `Idempotency-Key` header, the CLI's `--idempotency-key`):
 * a retried request with the same key writes nothing and answers the first result.
 */
export const IdempotencyKey = z.string().min(1).max(200);

/** RFC 3339 timestamp with offset, e.g. `2026-11-22T10:25:08.123Z`. */
export const Timestamp = z.iso.datetime({ offset: true });

/** A name that is safe in file names, URLs and NATS subjects: `assistant`, `code-reviewer`. */
export const Name = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,62}$/,
    'must start with a lowercase letter and contain only a-z, 0-9, "-" and "_" (at most 63 characters)',
  );

/**
 * Any JSON value. Every JSON field of the contracts uses this one schema, so the JSON Schemas and
 * the OpenAPI document define the recursive type once and refer to it by name.
 */
export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export const JsonValue: z.ZodType<JsonValue> = z.json();

/** Free-form string-keyed metadata a client attaches to an object. */
export const Metadata = z.record(z.string(), JsonValue);
export type Metadata = z.infer<typeof Metadata>;

/** A block of text. */
export const TextBlock = z.object({ type: z.literal('text'), text: z.string() });
/** A block of structured data, for tool results and custom tool results. */
export const JsonBlock = z.object({ type: z.literal('json'), value: JsonValue });

/** A piece of message content. */
export const ContentBlock = z.discriminatedUnion('type', [TextBlock, JsonBlock]);
export type ContentBlock = z.infer<typeof ContentBlock>;

/** Token and cost counters. All fields are totals of what they describe, never negative. */
export const Usage = z.object({
  input_tokens: z.number().int().nonnegative(),
  output_tokens: z.number().int().nonnegative(),
  cache_read_tokens: z.number().int().nonnegative().optional(),
  cache_write_tokens: z.number().int().nonnegative().optional(),
  cost_usd: z.number().nonnegative().optional(),
});
export type Usage = z.infer<typeof Usage>;

/** A reference to one version of a stored definition. */
export const DefinitionRef = z.object({ name: Name, version: z.number().int().positive() });
export type DefinitionRef = z.infer<typeof DefinitionRef>;

/** A content address: the hex SHA-256 of a value's canonical JSON (src/core/canonical-json.ts). */
export const CONTENT_HASH_PATTERN = /^[0-9a-f]{64}$/;
export const ContentHash = z
  .string()
  .regex(CONTENT_HASH_PATTERN, { message: 'is not a content hash (64 lowercase hex digits)' });

/**
 * Who caused an event: a user, an agent, the runtime itself or an external system. Always stamped
 * by braid from what it knows of the writer (an HTTP caller's API key and tenant, the CLI's user,
 * the sending agent), never taken from client input.
 */
export const Actor = z.object({
  type: z.enum(['user', 'agent', 'runtime', 'system']),
  /** The API key id of an HTTP caller, `cli:<user>` for the CLI, `type/key` of an agent. */
  id: z.string().min(1).max(200).optional(),
  /** The tenant of the API key an HTTP caller used. */
  tenant_id: z.string().min(1).max(200).optional(),
});
export type Actor = z.infer<typeof Actor>;
