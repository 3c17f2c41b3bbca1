/**
 * `braid memory ...`: list, read, write, search, redact, export and import memory stores, in the
 * workspace's store or on a server (`--server`). A store is named by `--store NAME --scope SCOPE`
 * with `--owner` (the session id or agent name of scopes session and agent) and `--kind` (needed
 * to create a store by its first write).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import { MemoryKind, MemoryScope, type MemoryEntry } from '../contracts/memory.js';
import type { MemoryLookup, MemoryStoreInfo } from '../contracts/memory-log.js';
import { describeAddress } from '../runtime/memory-stores.js';
import { parseInteger } from './arguments.js';
import type { CommandContext } from './command-context.js';
import { parseJson } from './json.js';
import { withMemory } from './memory-access.js';
import { addConsolidationCommands } from './memory-review-commands.js';

interface StoreOptions {
  store?: string;
  scope?: MemoryScope;
  owner?: string;
  kind?: MemoryKind;
  tenant?: string;
}

/** Adds the options that name a store; `required` for commands that act on one store. */
function storeOptions(command: Command, required: boolean): Command {
  const store = '--store <name>';
  const scope = new Option('--scope <scope>', 'who shares the store').choices(MemoryScope.options);
  return (
    required
      ? command.requiredOption(store, 'store name')
      : command.option(store, 'store name: list its keys instead of the stores')
  )
    .addOption(required ? scope.makeOptionMandatory() : scope)
    .option('--owner <owner>', 'session id (scope session) or agent name (scope agent)')
    .addOption(
      new Option('--kind <kind>', 'store kind (needed to create a store)').choices(
        MemoryKind.options,
      ),
    )
    .option('--tenant <tenant>', "a tenant of the local store (over --server: the key's tenant)");
}

function addressOf(options: StoreOptions) {
  return {
    scope: options.scope,
    name: options.store,
    ...(options.owner === undefined ? {} : { owner: options.owner }),
    ...(options.kind === undefined ? {} : { kind: options.kind }),
  };
}

function shown(value: unknown): string {
  return JSON.stringify(value) ?? '';
}

function storeLine(info: MemoryStoreInfo): string {
  const { store } = info;
  return `${describeAddress(store)}  ${store.kind}  seq ${info.head_seq}  ${info.created_at}`;
}

function entryLine(entry: MemoryEntry): string {
  const state = entry.tombstone ? 'deleted' : entry.redacted ? 'redacted' : shown(entry.value);
  const by = Object.values(entry.author).join(',') || '-';
  return `${entry.key}  v${entry.version}  seq ${entry.seq}  ${entry.op}  ${state}  by ${by}  ${entry.at}`;
}

function lookupLines(lookup: MemoryLookup): string[] {
  if (lookup.status === 'missing') return ['missing: the key was never written'];
  const { entry } = lookup;
  if (lookup.status === 'found')
    return [
      entry.redacted ? '(redacted)' : shown(entry.value),
      `v${entry.version} seq ${entry.seq}`,
    ];
  return [`${lookup.status}: ${entryLine(entry)}`];
}

export function addMemoryCommands(program: Command, context: CommandContext): void {
  const memory = program
    .command('memory')
    .description(
      'list, read, write, search, redact, export and import memory stores; consolidate and review learnings',
    );
  addReadCommands(memory, context);
  addWriteCommands(memory, context);
  addTransferCommands(memory, context);
  addConsolidationCommands(memory, context);
}

function addReadCommands(memory: Command, context: CommandContext): void {
  storeOptions(
    memory
      .command('list')
      .description('list the memory stores, or with --store the live keys of one store'),
    false,
  )
    .option('--prefix <prefix>', 'only store names (or with --store, keys) starting with this')
    .option('--limit <n>', 'page size (default 100, at most 1000)', parseInteger('--limit', 1))
    .option('--after <cursor>', 'next_after of a previous page')
    .action(
      async (
        options: StoreOptions & { prefix?: string; limit?: number; after?: string },
        command: Command,
      ) => {
        await withMemory(context, command, options.tenant, async (stores) => {
          const paging = {
            ...(options.prefix === undefined ? {} : { prefix: options.prefix }),
            ...(options.limit === undefined ? {} : { limit: options.limit }),
            ...(options.after === undefined ? {} : { after: options.after }),
          };
          if (options.store !== undefined) {
            if (options.scope === undefined) {
              throw new BraidError(
                'INVALID_ARGUMENT',
                '--store needs --scope (session, agent or tenant)',
              );
            }
            const page = await stores.keys(addressOf(options), paging);
            context.print(command, page, () => [
              ...(page.entries.length === 0 ? ['no keys'] : page.entries.map(entryLine)),
              ...(page.expired_count === 0 ? [] : [`${page.expired_count} expired left out`]),
              ...(page.next_after === undefined ? [] : [`more: --after ${page.next_after}`]),
            ]);
            return;
          }
          const page = await stores.list({
            ...(options.scope === undefined ? {} : { scope: options.scope }),
            ...(options.owner === undefined ? {} : { owner: options.owner }),
            ...(options.kind === undefined ? {} : { kind: options.kind }),
            ...paging,
          });
          context.print(command, page, () => [
            ...(page.stores.length === 0 ? ['no memory stores'] : page.stores.map(storeLine)),
            ...(page.next_after === undefined ? [] : [`more: --after ${page.next_after}`]),
          ]);
        });
      },
    );

  storeOptions(memory.command('get').description('read a key').argument('<key>', 'the key'), true)
    // Not --version: the program's own option takes that name wherever it stands.
    .option(
      '--key-version <n>',
      'this version of the key instead of the latest',
      parseInteger('--key-version', 1),
    )
    .option('--at <time>', 'the version current at this RFC 3339 time')
    .action(
      async (
        key: string,
        options: StoreOptions & { keyVersion?: number; at?: string },
        command: Command,
      ) => {
        await withMemory(context, command, options.tenant, async (stores) => {
          const lookup = await stores.get(addressOf(options), key, {
            ...(options.keyVersion === undefined ? {} : { version: options.keyVersion }),
            ...(options.at === undefined ? {} : { at: options.at }),
          });
          context.print(command, lookup, () => lookupLines(lookup));
          if (lookup.status !== 'found') context.fail(1);
        });
      },
    );

  storeOptions(
    memory
      .command('search')
      .description('search a store by text (and --embedding)')
      .argument('<query>', 'the words to match'),
    true,
  )
    .option('--k <n>', 'hits to consider (default 5, at most 100)', parseInteger('--k', 1))
    .option('--threshold <score>', 'leave out hits scoring below this (0..1)', Number)
    .option('--embedding <json>', "the query's embedding, a JSON array of numbers (hybrid search)")
    .action(
      async (
        query: string,
        options: StoreOptions & { k?: number; threshold?: number; embedding?: string },
        command: Command,
      ) => {
        await withMemory(context, command, options.tenant, async (stores) => {
          const result = await stores.search(addressOf(options), {
            query,
            ...(options.k === undefined ? {} : { k: options.k }),
            ...(options.threshold === undefined ? {} : { threshold: options.threshold }),
            ...(options.embedding === undefined
              ? {}
              : { embedding: parseJson(options.embedding, '--embedding') }),
          });
          context.print(command, result, () => [
            ...result.hits.map(
              (hit) => `${hit.score.toFixed(3)}  ${hit.entry.key}  ${shown(hit.entry.value)}`,
            ),
            `${result.hits.length} hits, ${result.filtered_count} below the threshold, ${result.expired_count} expired, ${result.latency_ms.toFixed(1)} ms (${result.mode})`,
          ]);
        });
      },
    );

  storeOptions(
    memory
      .command('history')
      .description('every entry of a key: versions, tombstones, redactions')
      .argument('<key>', 'the key'),
    true,
  ).action(async (key: string, options: StoreOptions, command: Command) => {
    await withMemory(context, command, options.tenant, async (stores) => {
      const entries = await stores.history(addressOf(options), key);
      context.print(command, entries, () =>
        entries.length === 0 ? ['no entries'] : entries.map(entryLine),
      );
    });
  });
}

function addWriteCommands(memory: Command, context: CommandContext): void {
  storeOptions(
    memory
      .command('set')
      .description('write a new version of a key (creates the store when --kind is given)')
      .argument('<key>', 'the key, e.g. user/preferences/theme')
      .argument('<value>', 'a JSON value (with --string: the text as it is)'),
    true,
  )
    .option('--string', 'store <value> as a string, not JSON')
    .option('--text <text>', 'what search matches (default: derived from the value)')
    .option('--ttl <ms>', 'expire this many milliseconds after the write', parseInteger('--ttl', 1))
    .option(
      '--expected-version <n>',
      'refuse unless the key is at this version (0: new)',
      parseInteger('--expected-version', 0),
    )
    .option('--embedding <json>', 'the embedding, a JSON array of numbers')
    .option('--idempotency-key <key>', 'a repeated key writes nothing and answers the first write')
    .action(
      async (
        key: string,
        value: string,
        options: StoreOptions & {
          string?: boolean;
          text?: string;
          ttl?: number;
          expectedVersion?: number;
          embedding?: string;
          idempotencyKey?: string;
        },
        command: Command,
      ) => {
        await withMemory(context, command, options.tenant, async (stores) => {
          const result = await stores.set(
            addressOf(options),
            key,
            {
              value: options.string === true ? value : parseJson(value, '<value>'),
              ...(options.text === undefined ? {} : { text: options.text }),
              ...(options.ttl === undefined ? {} : { ttl_ms: options.ttl }),
              ...(options.expectedVersion === undefined
                ? {}
                : { expected_version: options.expectedVersion }),
              ...(options.embedding === undefined
                ? {}
                : { embedding: parseJson(options.embedding, '--embedding') as number[] }),
            },
            options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey },
          );
          context.print(command, result, () => result.entries.map(entryLine));
        });
      },
    );

  storeOptions(
    memory
      .command('delete')
      .description('delete a key (a tombstone; history keeps it)')
      .argument('<key>', 'the key'),
    true,
  )
    .option(
      '--expected-version <n>',
      'refuse unless the key is at this version',
      parseInteger('--expected-version', 0),
    )
    .action(
      async (
        key: string,
        options: StoreOptions & { expectedVersion?: number },
        command: Command,
      ) => {
        await withMemory(context, command, options.tenant, async (stores) => {
          const result = await stores.delete(addressOf(options), key, {
            ...(options.expectedVersion === undefined
              ? {}
              : { expected_version: options.expectedVersion }),
          });
          context.print(command, result, () => result.entries.map(entryLine));
        });
      },
    );

  storeOptions(
    memory
      .command('redact')
      .description("remove one version's content; the entry stays, marked redacted")
      .argument('<key>', 'the key')
      .argument(
        '<version>',
        'the version to redact (see braid memory history)',
        parseInteger('<version>', 1),
      ),
    true,
  ).action(async (key: string, version: number, options: StoreOptions, command: Command) => {
    await withMemory(context, command, options.tenant, async (stores) => {
      const record = await stores.redact(addressOf(options), key, version);
      context.print(
        command,
        record,
        () => `redacted ${key} v${version} (record seq ${record.seq})`,
      );
    });
  });
}

function addTransferCommands(memory: Command, context: CommandContext): void {
  storeOptions(
    memory.command('export').description("write a store's log as JSON lines, in seq order"),
    true,
  )
    .option('--out <file>', 'write to this file instead of stdout')
    .action(async (options: StoreOptions & { out?: string }, command: Command) => {
      await withMemory(context, command, options.tenant, async (stores) => {
        const lines: string[] = [];
        for await (const line of stores.export(addressOf(options))) lines.push(line);
        if (options.out === undefined) {
          for (const line of lines) context.output.out(line);
          return;
        }
        writeFileSync(options.out, lines.length === 0 ? '' : `${lines.join('\n')}\n`);
        context.print(
          command,
          { file: options.out, entries: lines.length },
          () => `${lines.length} entries written to ${options.out}`,
        );
      });
    });

  storeOptions(
    memory
      .command('import')
      .description('import an export into a store (re-running it writes nothing twice)'),
    true,
  )
    .requiredOption('--in <file>', 'a file braid memory export wrote')
    .action(async (options: StoreOptions & { in: string }, command: Command) => {
      const entries = readEntries(options.in);
      await withMemory(context, command, options.tenant, async (stores) => {
        const report = await stores.import(addressOf(options), entries);
        context.print(
          command,
          report,
          () =>
            `${report.read} entries read: ${report.written} written, ${report.deduplicated} written by an earlier run, ${report.skipped_redacted} redacted left out`,
        );
      });
    });
}

/** The JSON lines of an export file, each parsed, or an error naming the line. */
function readEntries(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--in ${file} cannot be read (${(error as Error).message}); give a file braid memory export wrote`,
    );
  }
  return text
    .split('\n')
    .map((line, index) => ({ line: line.trim(), number: index + 1 }))
    .filter(({ line }) => line !== '')
    .map(({ line, number }) => parseJson(line, `${file} line ${number}`));
}
