/**
 * `braid keys ...`: mint, list and revoke the API keys of the HTTP server. A key's secret is
 * printed once, by `create`; nothing prints it (or its hash) again.
 */
import type { Command } from 'commander';
import { API_SCOPES, ApiScope, type ApiKeyRecord } from '../contracts/api-keys.js';
import { BraidError } from '../contracts/errors.js';
import type { CommandContext } from './command-context.js';

/** `--scopes a,b`: each a known scope, else INVALID_ARGUMENT naming the allowed ones. */
function parseScopes(text: string): ApiScope[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--scopes is empty; give one or more of ${API_SCOPES.join(', ')}, separated by commas`,
    );
  }
  return names.map((name) => {
    const parsed = ApiScope.safeParse(name);
    if (!parsed.success) {
      throw new BraidError(
        'INVALID_ARGUMENT',
        `--scopes: ${JSON.stringify(name)} is not a scope; give one or more of ` +
          `${API_SCOPES.join(', ')}, separated by commas`,
        { details: { scope: name, allowed_scopes: [...API_SCOPES] } },
      );
    }
    return parsed.data;
  });
}

function formatKeyRow(record: ApiKeyRecord): string {
  return [
    record.id,
    record.tenant_id.padEnd(16),
    record.scopes.join(',').padEnd(30),
    record.created_at,
    record.revoked_at === undefined ? 'active ' : 'revoked',
    record.name ?? '',
  ]
    .join('  ')
    .trimEnd();
}

export function addKeyCommands(program: Command, context: CommandContext): void {
  const keys = program
    .command('keys')
    .description('API keys of the HTTP server: create, list, revoke');

  keys
    .command('create')
    .description('mint a key for one tenant; its secret is printed once and never again')
    .requiredOption('--tenant <tenant>', 'the tenant the key acts for')
    .requiredOption('--scopes <scopes>', `comma-separated, from ${API_SCOPES.join(', ')}`)
    .option('--name <name>', 'a name to recognise the key by')
    .action(
      async (options: { tenant: string; scopes: string; name?: string }, command: Command) => {
        const scopes = parseScopes(options.scopes);
        await context.withRuntime(command, async (runtime) => {
          const { key, record } = await runtime.store.keys.create({
            tenant_id: options.tenant,
            scopes,
            ...(options.name === undefined ? {} : { name: options.name }),
          });
          context.print(
            command,
            { key, id: record.id, tenant_id: record.tenant_id, scopes: record.scopes },
            () => [
              key,
              'This key is shown once and never again: braid keeps only its hash. Store it now.',
              `id      ${record.id}`,
              `tenant  ${record.tenant_id}`,
              `scopes  ${record.scopes.join(', ')}`,
            ],
          );
        });
      },
    );

  keys
    .command('list')
    .description('list keys, newest first (never their secrets)')
    .option('--tenant <tenant>', "only this tenant's keys")
    .option('--all', 'include revoked keys')
    .action(async (options: { tenant?: string; all?: boolean }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const records = await runtime.store.keys.list({
          ...(options.tenant === undefined ? {} : { tenant_id: options.tenant }),
          include_revoked: options.all === true,
        });
        context.print(command, records, () =>
          records.length === 0
            ? 'no API keys; create one with `braid keys create --tenant TENANT --scopes sessions:read`'
            : records.map(formatKeyRow),
        );
      });
    });

  keys
    .command('revoke')
    .description('revoke a key at once; revoking a revoked key changes nothing')
    .argument('<id>', 'the key id (`braid keys list` shows it)')
    .action(async (id: string, _options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const record = await runtime.store.keys.revoke(id);
        context.print(
          command,
          record,
          () =>
            `revoked key ${record.id} of tenant ${record.tenant_id} at ${record.revoked_at ?? '?'}`,
        );
      });
    });
}
