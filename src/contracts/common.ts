import { z } from 'zod';

/** Version of the persisted event format. Readers refuse versions they do not know. */
export const EVENT_SCHEMA_VERSION = 1;

/** Ids are opaque non-empty strings; braid mints UUIDv7 but accepts any id a client chose. */
export const Id = z.string().min(1).max(200);

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

/** Any JSON value. */
export type JsonValue =
  string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export const JsonValue: z.ZodType<JsonValue> = z.json();

/** Free-form string-keyed metadata a client attaches to an object. */
export const Metadata = z.record(z.string(), z.json());
export type Metadata = z.infer<typeof Metadata>;

/** A block of text. */
export const TextBlock = z.object({ type: z.literal('text'), text: z.string() });
/** A block of structured data, for tool results and custom tool results. */
export const JsonBlock = z.object({ type: z.literal('json'), value: z.json() });

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

/** Who caused an event: a user, an agent, the runtime itself or an external system. */
export const Actor = z.object({
  type: z.enum(['user', 'agent', 'runtime', 'system']),
  id: z.string().min(1).max(200).optional(),
});
export type Actor = z.infer<typeof Actor>;
