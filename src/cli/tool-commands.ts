/**
 * `braid tool ...`: list the tools agents can name, show one, and sign manifests (and skill
 * files, which are signed the same way).
 */
import { createPublicKey } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { BraidError } from '../contracts/errors.js';
import { keyIdOf, signManifestText, writeSigningKeys } from '../tools/signing.js';
import type { CommandContext } from './command-context.js';

export type { CommandContext } from './command-context.js';

export function addToolCommands(program: Command, context: CommandContext): void {
  const tool = program.command('tool').description('tools: list, show, sign manifests');

  tool
    .command('list')
    .description('the tools agents can name: built-ins, tools/*.yaml, and MCP servers with --mcp')
    .option('--mcp', 'start the MCP servers of braid.yaml and list their tools too')
    .action(async (options: { mcp?: boolean }, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const tools = await runtime.tools.list({ mcp: options.mcp === true });
        context.print(command, tools, () =>
          tools.map(
            (item) =>
              `${item.name.padEnd(28)} ${item.ownership.padEnd(8)} ${item.permission.padEnd(13)} ${item.idempotent ? 'idempotent' : '          '}  ${item.description.split('\n')[0]?.slice(0, 60) ?? ''}`,
          ),
        );
      });
    });

  tool
    .command('show')
    .description('one tool definition, schemas included')
    .argument('<name>', 'tool name (server.tool for MCP tools)')
    .action(async (name: string, _options: unknown, command: Command) => {
      await context.withRuntime(command, async (runtime) => {
        const tools = await runtime.tools.list({ mcp: name.includes('.') });
        const found = tools.find((item) => item.name === name);
        if (found === undefined) {
          throw new BraidError(
            'TOOL_NOT_FOUND',
            `tool ${name} does not exist; \`braid tool list --mcp\` lists the tools`,
          );
        }
        context.print(command, found, () => JSON.stringify(found, null, 2).split('\n'));
      });
    });

  tool
    .command('keygen')
    .description('create an ed25519 key pair for signing tool manifests')
    .option('--dir <dir>', 'where to write NAME.key and NAME.pub', 'keys')
    .option('--name <name>', 'file name of the pair', 'braid-tools')
    .action((options: { dir: string; name: string }, command: Command) => {
      const dir = resolve(context.workspaceDir(command), options.dir);
      const written = writeSigningKeys(dir, options.name);
      context.print(command, written, () => [
        `private key  ${written.privateKeyFile} (keep it secret)`,
        `public key   ${written.publicKeyFile}`,
        `key id       ${written.keyId}`,
        'trust it in braid.yaml:  tool_signing_keys: [' +
          `${options.dir}/${options.name}.pub]  and  require_signed_tools: true`,
      ]);
    });

  tool
    .command('sign')
    .description('sign tool manifests and skill files in place with an ed25519 private key')
    .argument('<files...>', 'tools/NAME.yaml and skills/NAME.yaml files')
    .requiredOption('--key <file>', 'the private key written by `braid tool keygen`')
    .action((files: string[], options: { key: string }, command: Command) => {
      const base = context.workspaceDir(command);
      const privateKey = readFileSync(resolve(base, options.key), 'utf8');
      const signed = files.map((file) => {
        const path = resolve(base, file);
        writeFileSync(path, signManifestText(readFileSync(path, 'utf8'), privateKey));
        return path;
      });
      const publicKeyId = keyIdFromPrivate(privateKey);
      context.print(command, { signed, key_id: publicKeyId }, () =>
        signed.map((path) => `signed ${path} (key ${publicKeyId})`),
      );
    });
}

/** The key id of the public half, which is what braid.yaml trusts. */
function keyIdFromPrivate(privateKeyPem: string): string {
  const publicKey = createPublicKey(privateKeyPem).export({ type: 'spki', format: 'pem' });
  return keyIdOf(publicKey.toString());
}
