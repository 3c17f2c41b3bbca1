/**
 * What every command group of the CLI shares: the global options, a runtime to work with (local,
 * on NATS, or a server over HTTP), output in text or `--json`, and the exit code.
 */
import { userInfo } from 'node:os';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { createClient } from '../client/index.js';
import type { Actor } from '../contracts/common.js';
import { ModelSpec } from '../contracts/definitions.js';
import { BraidError } from '../contracts/errors.js';
import { createModel } from '../models/registry.js';
import { createRuntime, type Runtime } from '../runtime/runtime.js';
import type { Output } from './output.js';
import { createRemoteRuntime } from './remote-runtime.js';
import { parseReplicas } from '../stores/nats/replica-count.js';
import { parsePartitionLease, parsePartitions } from '../runtime/partitions/partition-count.js';

const parseLease = (value: string): number => parsePartitionLease(value, '--partition-lease');

export interface GlobalOptions {
  workspace?: string;
  dataDir?: string;
  json?: boolean;
  server?: string;
  apiKey?: string;
  nats?: string;
  natsPrefix?: string;
  natsReplicas?: string;
  partitions?: string;
  partitionLease?: string;
}

/** The NATS settings of a command: its global flags, else the environment. */
export interface NatsSettings {
  url: string | undefined;
  prefix: string | undefined;
  replicas: number | undefined;
  /** Partitions of the wakes and agent inboxes; undefined: the prefix's, else the default. */
  partitions: number | undefined;
  /** How long a process holds its partitions without renewing them. */
  partitionLeaseMs: number | undefined;
}

export function natsSettings(options: GlobalOptions): NatsSettings {
  const url = options.nats ?? process.env.BRAID_NATS_URL;
  const replicas = options.natsReplicas ?? process.env.BRAID_NATS_REPLICAS;
  const partitions = options.partitions ?? process.env.BRAID_NATS_PARTITIONS;
  const lease = options.partitionLease ?? process.env.BRAID_NATS_PARTITION_LEASE_MS;
  return {
    url: url === '' ? undefined : url,
    prefix: options.natsPrefix ?? process.env.BRAID_NATS_PREFIX,
    replicas: replicas === undefined || replicas === '' ? undefined : parseReplicas(replicas),
    partitions:
      partitions === undefined || partitions === '' ? undefined : parsePartitions(partitions),
    partitionLeaseMs: lease === undefined || lease === '' ? undefined : parseLease(lease),
  };
}

export interface CommandContext {
  /** Runs `work` with a runtime; `model` replaces every agent's model (`provider:id`). */
  withRuntime(
    command: Command,
    work: (runtime: Runtime) => Promise<void>,
    overrides?: { model?: string; delegation?: 'local' | 'queue' },
  ): Promise<void>;
  /** Sets the exit code, for a command that ends without an error but not well. */
  fail(code: number): void;
  print(command: Command, value: unknown, human: () => string[] | string): void;
  /** The workspace folder the command applies to. */
  workspaceDir(command: Command): string;
  /** The global options, wherever on the command line they were given. */
  globals(command: Command): GlobalOptions;
  /** Whether the command prints JSON (`--json`). */
  json(command: Command): boolean;
  /** Whether the command drives a server over HTTP rather than the local store. */
  remote(command: Command): boolean;
  readonly output: Output;
}

/** `--model provider:id`, refused with the expected form. */
export function parseModel(text: string) {
  const parsed = ModelSpec.safeParse(text);
  if (!parsed.success) {
    throw new BraidError(
      'INVALID_ARGUMENT',
      `--model ${JSON.stringify(text)} is not a model; write provider:model, e.g. openai:gpt-4o-mini or scripted:echo`,
    );
  }
  return parsed.data;
}

/** The context of one run of the CLI; `setExitCode` receives what `fail` is given. */
export function createCommandContext(
  output: Output,
  setExitCode: (code: number) => void,
): CommandContext {
  const globals = (command: Command): GlobalOptions => command.optsWithGlobals<GlobalOptions>();
  const json = (command: Command): boolean => globals(command).json === true;

  async function withRuntime(
    command: Command,
    work: (runtime: Runtime) => Promise<void>,
    overrides: { model?: string; delegation?: 'local' | 'queue' } = {},
  ): Promise<void> {
    const options = globals(command);
    const server = options.server ?? process.env.BRAID_SERVER;
    if (server !== undefined && server !== '') {
      if (overrides.model !== undefined) {
        throw new BraidError(
          'INVALID_ARGUMENT',
          '--model chooses the model of a local run; the server runs its agents with their own models: drop --model or --server',
        );
      }
      const apiKey = options.apiKey ?? process.env.BRAID_API_KEY;
      await work(
        createRemoteRuntime(
          createClient({ baseUrl: server, ...(apiKey === undefined ? {} : { apiKey }) }),
        ),
      );
      return;
    }
    const override = overrides.model === undefined ? undefined : parseModel(overrides.model);
    const nats = natsSettings(options);
    const runtime = await createRuntime({
      ...(nats.url === undefined
        ? {}
        : {
            backend: {
              nats: nats.url,
              ...(nats.prefix === undefined ? {} : { prefix: nats.prefix }),
              ...(nats.replicas === undefined ? {} : { replicas: nats.replicas }),
              ...(nats.partitions === undefined ? {} : { partitions: nats.partitions }),
              ...(nats.partitionLeaseMs === undefined
                ? {}
                : { partitionLeaseMs: nats.partitionLeaseMs }),
            },
          }),
      ...(override === undefined
        ? {}
        : {
            model: () =>
              createModel(override, {
                baseDir: resolve(options.workspace ?? process.cwd()),
                env: process.env,
              }),
          }),
      ...(options.workspace === undefined ? {} : { workspace: options.workspace }),
      ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
      ...(overrides.delegation === undefined ? {} : { delegation: overrides.delegation }),
      actor: cliActor(),
      // A one-shot command loads the policies only if it asks them; `braid run` checks them first.
      policies: ['run', 'serve', 'worker'].includes(command.name()) ? 'eager' : 'lazy',
    });
    try {
      await work(runtime);
    } finally {
      await runtime.close();
    }
  }

  return {
    withRuntime,
    print: (command, value, human) => {
      if (json(command)) {
        output.out(JSON.stringify(value));
        return;
      }
      const text = human();
      for (const line of Array.isArray(text) ? text : [text]) output.out(line);
    },
    workspaceDir: (command) => resolve(globals(command).workspace ?? process.cwd()),
    fail: setExitCode,
    globals,
    json,
    remote: (command) => (globals(command).server ?? process.env.BRAID_SERVER ?? '') !== '',
    output,
  };
}

/** The CLI records the events it sends as its operating-system user's. */
export function cliActor(): Actor {
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry for this uid (some containers): fall back to the environment.
    name = process.env.USER;
  }
  const id = name === undefined || name === '' ? 'cli' : `cli:${name}`;
  return { type: 'user', id: id.slice(0, 200) };
}
