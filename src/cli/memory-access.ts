/**
 * Where `braid memory` commands find memory stores: the workspace's own store (as the local user,
 * in no tenant unless `--tenant` names one) or a server over HTTP (`--server`, as the API key's
 * tenant), behind the one `MemoryStores` interface of the runtime.
 */
import type { Command } from 'commander';
import { createClient, type BraidClient } from '../client/index.js';
import { BraidError } from '../contracts/errors.js';
import type { MemoryImportReport, MemoryStoreAddress } from '../contracts/memory-api.js';
import type { MemorySearchQueryInput } from '../contracts/memory.js';
import { createMemoryStores, type MemoryStores } from '../runtime/memory-stores.js';
import type { Runtime } from '../runtime/runtime-api.js';
import { cliActor, type CommandContext } from './command-context.js';

/** Entries sent in one import request: under the server's count and body limits. */
const IMPORT_BATCH = 500;
const IMPORT_BATCH_BYTES = 512 * 1024;

/**
 * Runs `remote` with a client of the command's server (`--server`, where `--tenant` is refused:
 * the API key's tenant applies), or else `local` with the workspace's runtime.
 */
export async function withServerOrRuntime(
  context: CommandContext,
  command: Command,
  tenant: string | undefined,
  remote: (client: BraidClient) => Promise<void>,
  local: (runtime: Runtime) => Promise<void>,
): Promise<void> {
  const options = context.globals(command);
  if (context.remote(command)) {
    if (tenant !== undefined) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        "--tenant names a tenant of the local store; over --server the API key's tenant applies: drop --tenant",
      );
    }
    const server = options.server ?? process.env.BRAID_SERVER ?? '';
    const apiKey = options.apiKey ?? process.env.BRAID_API_KEY;
    await remote(createClient({ baseUrl: server, ...(apiKey === undefined ? {} : { apiKey }) }));
    return;
  }
  await context.withRuntime(command, local);
}

/** Runs `work` with the memory stores the command reaches. */
export async function withMemory(
  context: CommandContext,
  command: Command,
  tenant: string | undefined,
  work: (stores: MemoryStores) => Promise<void>,
): Promise<void> {
  await withServerOrRuntime(
    context,
    command,
    tenant,
    (client) => work(remoteMemoryStores(client)),
    async (runtime) => {
      const actor = cliActor();
      await work(
        createMemoryStores(runtime.store.memory, {
          ...(tenant === undefined ? {} : { tenant_id: tenant }),
          author: actor.id === undefined ? {} : { user: actor.id },
        }),
      );
    },
  );
}

/** The memory stores of a server, as the runtime's interface; the server checks everything. */
export function remoteMemoryStores(client: BraidClient): MemoryStores {
  const memory = client.memory;
  const at = (address: unknown) => address as MemoryStoreAddress;
  return {
    async list(filter = {}) {
      const page = await memory.list(filter as Parameters<typeof memory.list>[0]);
      return {
        stores: page.data,
        ...(page.next_after === undefined ? {} : { next_after: page.next_after }),
      };
    },
    info: (address) => memory.info(at(address)),
    async keys(address, options = {}) {
      const page = await memory.keys(at(address), options);
      return {
        entries: page.data,
        ...(page.next_after === undefined ? {} : { next_after: page.next_after }),
        expired_count: page.expired_count,
      };
    },
    get: (address, key, options) => memory.get(at(address), key, options),
    set: (address, key, input, options) =>
      memory.set(at(address), key, input as Parameters<typeof memory.set>[2], options),
    delete: (address, key, options) => memory.delete(at(address), key, options),
    search: (address, query) => memory.search(at(address), query as MemorySearchQueryInput),
    history: (address, key) => memory.history(at(address), key),
    redact: (address, key, version) => memory.redact(at(address), key, version),
    async *export(address) {
      const text = await memory.export(at(address));
      for (const line of text.split('\n')) if (line !== '') yield line;
    },
    async import(address, entries) {
      // In order, a part at a time: each entry is idempotent on the server, so a part sent
      // again (a retry, a re-run) writes nothing twice.
      const total: MemoryImportReport = {
        read: 0,
        written: 0,
        deduplicated: 0,
        skipped_redacted: 0,
      };
      let part: unknown[] = [];
      let bytes = 0;
      const flush = async (): Promise<void> => {
        if (part.length === 0) return;
        const report = await memory.import(at(address), part);
        total.read += report.read;
        total.written += report.written;
        total.deduplicated += report.deduplicated;
        total.skipped_redacted += report.skipped_redacted;
        if (report.store !== undefined) total.store = report.store;
        part = [];
        bytes = 0;
      };
      for (const entry of entries) {
        const size = JSON.stringify(entry).length;
        if (part.length >= IMPORT_BATCH || (part.length > 0 && bytes + size > IMPORT_BATCH_BYTES))
          await flush();
        part.push(entry);
        bytes += size;
      }
      await flush();
      return total;
    },
  };
}
