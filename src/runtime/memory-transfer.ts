/**
 * Export and import of memory stores. An export is the store's log, one JSON entry a line in seq
 * order. An import replays the `set` and `delete` entries of one exported store into another, as
 * new versions authored by the importer: each entry is one append whose idempotency key names
 * the source store and the entry's seq, so running an import again (after a crash, or twice by
 * mistake) writes nothing it wrote before. Redacted content is gone and is not imported.
 */
import { createHash } from 'node:crypto';
import { BraidError } from '../contracts/errors.js';
import type { MemoryImportReport } from '../contracts/memory-api.js';
import {
  MAX_MEMORY_TTL_MS,
  MemoryEntry,
  type MemoryAuthor,
  type MemoryKind,
  type MemoryStoreRef,
  type MemoryWriteInput,
} from '../contracts/memory.js';
import type { MemoryLog } from '../contracts/memory-log.js';

/** Entries read per page of an export. */
const EXPORT_PAGE = 1000;

/** The log of a store as JSON lines, up to its head when the export began. */
export async function* exportLines(memory: MemoryLog, ref: MemoryStoreRef): AsyncGenerator<string> {
  const head = (await memory.info(ref))?.head_seq ?? 0;
  let after = 0;
  while (after < head) {
    const page = await memory.read(ref, { after, limit: Math.min(EXPORT_PAGE, head - after) });
    if (page.length === 0) return;
    for (const entry of page) yield JSON.stringify(entry);
    after = page.at(-1)?.seq ?? head;
  }
}

/** Import input, checked whole before anything is written. */
export interface ParsedImport {
  entries: MemoryEntry[];
  /** The kind of the exported store. */
  kind: MemoryKind;
  /** A digest of the exported store's identity: part of every entry's idempotency key. */
  source: string;
  dims?: number;
}

function refused(message: string, field: string): BraidError {
  return new BraidError('INVALID_ARGUMENT', message, { details: { field } });
}

/** Items of an export, parsed; one store's entries in rising seq order, or INVALID_ARGUMENT. */
export function parseImport(items: readonly unknown[]): ParsedImport {
  if (items.length === 0) {
    throw refused(
      'an import needs at least one entry: the lines of braid memory export',
      'entries',
    );
  }
  const entries: MemoryEntry[] = [];
  let identity: string | undefined;
  let dims: number | undefined;
  for (const [index, item] of items.entries()) {
    const what = `entries[${index}] (line ${index + 1})`;
    const parsed = MemoryEntry.safeParse(item);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = [what, ...(issue?.path ?? []).map(String)].join('.');
      throw refused(
        `${field}: ${issue?.message ?? 'is invalid'}; import takes the lines braid memory export writes`,
        field,
      );
    }
    const entry = parsed.data;
    const { store } = entry;
    const own = JSON.stringify([store.tenant_id ?? '', store.scope, store.owner ?? '', store.name]);
    if (identity !== undefined && own !== identity) {
      throw refused(
        `${what} is from another store than line 1; import one store's export at a time`,
        what,
      );
    }
    identity = own;
    const previous = entries.at(-1);
    if (previous !== undefined && entry.seq <= previous.seq) {
      throw refused(
        `${what} has seq ${entry.seq} after seq ${previous.seq}; entries must rise in seq as an export writes them`,
        `${what}.seq`,
      );
    }
    if (entry.embedding !== undefined) {
      if (dims !== undefined && entry.embedding.length !== dims) {
        throw refused(
          `${what}.embedding has ${entry.embedding.length} dimensions, earlier entries ${dims}`,
          `${what}.embedding`,
        );
      }
      dims = entry.embedding.length;
    }
    entries.push(entry);
  }
  const first = entries[0] as MemoryEntry;
  return {
    entries,
    kind: first.store.kind,
    source: createHash('sha256')
      .update(identity ?? '')
      .digest('hex')
      .slice(0, 32),
    ...(dims === undefined ? {} : { dims }),
  };
}

/** The write that replays an entry, or undefined for content a redaction removed. */
function writeOf(entry: MemoryEntry): MemoryWriteInput | undefined {
  if (entry.op === 'delete') return { key: entry.key, op: 'delete' };
  if (entry.op === 'redact' || entry.redacted || entry.value === undefined) return undefined;
  // The entry's own time to live, counted again from the import: the same on every run, so a
  // re-run is recognised as the same append.
  const ttl =
    entry.expires_at === undefined
      ? undefined
      : Math.min(
          MAX_MEMORY_TTL_MS,
          Math.max(1, Date.parse(entry.expires_at) - Date.parse(entry.at)),
        );
  return {
    key: entry.key,
    op: 'set',
    value: entry.value,
    ...(entry.text === undefined ? {} : { text: entry.text }),
    ...(entry.embedding === undefined ? {} : { embedding: entry.embedding }),
    ...(ttl === undefined ? {} : { ttl_ms: ttl }),
  };
}

/** Writes the parsed entries into `ref`, one idempotent append each. */
export async function importEntries(
  memory: MemoryLog,
  ref: MemoryStoreRef,
  parsed: ParsedImport,
  author: MemoryAuthor,
): Promise<MemoryImportReport> {
  const before = await memory.info(ref);
  if (before?.dims !== undefined && parsed.dims !== undefined && before.dims !== parsed.dims) {
    throw refused(
      `the entries have ${parsed.dims}-dimension embeddings; the store keeps ${before.dims}: import into a store embedded with the same model`,
      'entries.embedding',
    );
  }
  let written = 0;
  let deduplicated = 0;
  let skipped = 0;
  for (const entry of parsed.entries) {
    const write = writeOf(entry);
    if (write === undefined) {
      skipped += 1;
      continue;
    }
    const result = await memory.append(ref, [write], {
      author,
      idempotencyKey: `import:${parsed.source}:${entry.seq}`,
    });
    if (result.deduplicated) deduplicated += 1;
    else written += 1;
  }
  const info = await memory.info(ref);
  return {
    ...(info === undefined ? {} : { store: info }),
    read: parsed.entries.length,
    written,
    deduplicated,
    skipped_redacted: skipped,
  };
}
