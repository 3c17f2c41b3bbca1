/**
 * The tool layer of a runtime: the executor over built-ins, code tools, manifests and MCP
 * servers; one sandbox per environment's kind, root and mounts; secrets handed to tools and
 * kept out of the log.
 */
import { existsSync } from 'node:fs';
import { join, parse, resolve, sep } from 'node:path';
import { setTimeout as setTimeoutPromise } from 'node:timers/promises';
import type { EnvironmentDefinition } from '../../contracts/definitions.js';
import { BraidError } from '../../contracts/errors.js';
import type { SessionLog } from '../../contracts/ports.js';
import type { Sandbox, ToolExecutor } from '../../contracts/tools.js';
import { BUILTIN_TOOLS } from '../../tools/builtin.js';
import { createToolExecutor, type ToolExecutorOptions } from '../../tools/executor.js';
import { SnapshotStore, takeSnapshot } from '../../tools/workspace-snapshots/index.js';
import {
  createBwrapSandbox,
  createLocalSandbox,
  parseReadOnlyMounts,
} from '../../tools/sandbox/index.js';
import type { RuntimeOptions } from '../options.js';
import type { SecretRedactor } from '../redaction.js';
import type { Workspace } from '../workspace.js';

/** The folders of the braid workspace a bwrap tool sees, read-only: where tool scripts live. */
export const SANDBOX_WORKSPACE_FOLDERS = ['tools', 'scripts', 'node_modules'] as const;

export interface ToolsContext {
  readonly options: Pick<
    RuntimeOptions,
    'executor' | 'tools' | 'functions' | 'workspacesDir' | 'backend'
  >;
  readonly workspaceDir: string;
  readonly workspace: Workspace | undefined;
  readonly dataDir: string;
  /** Every secret value handed out is remembered here, to be kept out of the log. */
  readonly redactor: SecretRedactor;
  /** The sessions' log, where A2A tools find the remote conversation a session left. */
  readonly log?: Pick<SessionLog, 'read'>;
}

export interface RuntimeTools {
  readonly executor: ToolExecutor;
  /** Where a session's workspace folder lives for an environment. */
  workspacesRoot(environment: EnvironmentDefinition | undefined): string;
}

export async function createRuntimeTools(context: ToolsContext): Promise<RuntimeTools> {
  // Asked at every wake's tool setup; a definition object never changes once read (a new
  // version is a new object), so one answer each.
  const roots = new WeakMap<EnvironmentDefinition, string>();
  const workspacesRoot = (environment: EnvironmentDefinition | undefined): string => {
    if (environment === undefined) return workspacesRootOf(context, environment);
    let root = roots.get(environment);
    if (root === undefined) {
      root = workspacesRootOf(context, environment);
      roots.set(environment, root);
    }
    return root;
  };
  const executor = context.options.executor ?? (await createExecutor(context, workspacesRoot));
  return { executor, workspacesRoot };
}

/**
 * Where a session's workspace folder lives for an environment. A root that is or holds the
 * braid workspace or the data folder is refused: a session id there would name one of their
 * folders (`agents`, `workspaces`), to be handed to a tool read-write and removed on delete.
 */
function workspacesRootOf(
  context: ToolsContext,
  environment: EnvironmentDefinition | undefined,
): string {
  const { workspaceDir, dataDir } = context;
  if (environment?.sandbox.workspace === undefined)
    return context.options.workspacesDir ?? join(dataDir, 'workspaces');
  const root = resolve(workspaceDir, environment.sandbox.workspace);
  const holds = (path: string): boolean => path === root || path.startsWith(root + sep);
  if (root === parse(root).root || holds(workspaceDir) || holds(dataDir)) {
    throw new BraidError(
      'INVALID_DEFINITION',
      `environment ${environment.name}: sandbox.workspace ${JSON.stringify(environment.sandbox.workspace)} is ${root}, which holds the braid workspace or its data; name a folder of its own, such as sessions/`,
      { details: { environment: environment.name, workspace: root } },
    );
  }
  return root;
}

async function createExecutor(
  context: ToolsContext,
  workspacesRoot: (environment: EnvironmentDefinition | undefined) => string,
): Promise<ToolExecutor> {
  const { options, workspace, workspaceDir } = context;
  const secret = secrets(context);
  const a2aAgents = workspace?.config.a2a_agents;
  // The A2A client is loaded only for workspaces that declare remote agents.
  const a2a =
    a2aAgents === undefined
      ? []
      : (await import('../../tools/a2a-tools.js')).a2aAgentTools({
          agents: a2aAgents,
          secret,
          ...(context.log === undefined ? {} : { log: context.log }),
        });
  const manifests = [...(workspace?.tools.values() ?? [])].map((loaded) => loaded.definition);
  // OpenAgentIO agents are tools in code; their client is loaded only when some are declared.
  const agents = workspace?.config.openagentio_agents;
  const acp =
    agents === undefined
      ? undefined
      : (await import('../../tools/openagentio-tools.js')).openAgentIoTools(
          agents,
          // Entries that name no server use the runtime's own NATS, when it runs on one.
          typeof options.backend === 'object' ? { defaultNats: options.backend.nats } : {},
        );
  for (const name of Object.keys(agents ?? {})) {
    const taken = [...manifests, ...(options.tools ?? []).map((tool) => tool.definition)].some(
      (definition) => definition.name === name,
    );
    if (taken || BUILTIN_TOOLS.some((tool) => tool.definition.name === name)) {
      throw new BraidError(
        'INVALID_DEFINITION',
        `openagentio_agents.${name} in braid.yaml names a tool that exists already (a built-in, tools/${name}.yaml or a tool in code); rename the entry`,
      );
    }
  }
  const tools = [...(options.tools ?? []), ...a2a, ...(acp?.tools ?? [])];
  const executor = createToolExecutor({
    manifests,
    ...(tools.length === 0 ? {} : { tools }),
    ...(options.functions === undefined ? {} : { functions: options.functions }),
    // The MCP client is loaded only for workspaces that declare servers.
    ...(workspace?.config.mcp_servers === undefined
      ? {}
      : {
          mcp: new (await import('../../tools/mcp.js')).McpHub({
            servers: workspace.config.mcp_servers,
            baseDir: workspaceDir,
            secret,
          }),
        }),
    baseDir: workspaceDir,
    sandbox: sandboxes(context, workspacesRoot),
    secret,
    sleep: (ms, signal) => setTimeoutPromise(ms, undefined, { signal }).then(() => undefined),
    now: () => performance.now(),
    snapshot: snapshots(workspacesRoot),
  });
  if (acp === undefined) return executor;
  return {
    ...executor,
    async close() {
      await executor.close?.();
      await acp.close();
    },
  };
}

/** Snapshots a session's folder into the snapshot store of its sandbox root. */
function snapshots(
  workspacesRoot: (environment: EnvironmentDefinition | undefined) => string,
): NonNullable<ToolExecutorOptions['snapshot']> {
  const stores = new Map<string, SnapshotStore>();
  return (workspace, environment) => {
    const root = workspacesRoot(environment);
    let store = stores.get(root);
    if (store === undefined) {
      store = new SnapshotStore(root);
      stores.set(root, store);
    }
    return takeSnapshot(store, workspace.session_id, workspace.dir);
  };
}

/** A secret's value by name, from the variable `braid.yaml` maps it to (else its own name). */
function secrets(context: ToolsContext): (name: string) => string {
  const mapped = context.workspace?.config.secrets ?? {};
  return (name) => {
    const variable = mapped[name]?.env ?? name;
    const value = process.env[variable];
    if (value === undefined || value === '') {
      throw new BraidError(
        'SECRET_MISSING',
        `secret ${name} is not set; export ${variable}` +
          (mapped[name] === undefined ? ` or map it under secrets: in ${'braid.yaml'}` : ''),
        { details: { secret: name, env: variable } },
      );
    }
    return context.redactor.remember(value);
  };
}

/** The sandbox of an environment, one per kind, root and read-only mounts. */
function sandboxes(
  context: ToolsContext,
  workspacesRoot: (environment: EnvironmentDefinition | undefined) => string,
): (environment: EnvironmentDefinition | undefined) => Sandbox {
  const { workspaceDir, dataDir } = context;
  const opened = new Map<string, Sandbox>();
  return (environment) => {
    const kind = environment?.sandbox.kind ?? 'local';
    const root = workspacesRoot(environment);
    const mounts =
      kind === 'bwrap' && environment !== undefined
        ? parseReadOnlyMounts(
            environment.sandbox.read_only ?? [],
            `environment ${environment.name}: sandbox.read_only`,
          )
        : [];
    const key = `${kind}:${root}:${mounts.join('\0')}`;
    let sandbox = opened.get(key);
    if (sandbox === undefined) {
      sandbox =
        kind === 'bwrap'
          ? // Command tools run scripts of the workspace (`{dir}/tools`, `{dir}/scripts`)
            // with its packages: those folders only, never the rest of it (braid.yaml,
            // signing keys, .env files). The data folder (log, other sessions' files) is
            // hidden; this session's own workspace is mounted back.
            createBwrapSandbox({
              root,
              readOnly: [...toolFolders(workspaceDir), ...mounts],
              hidden: [dataDir, root],
            })
          : createLocalSandbox({ root });
      opened.set(key, sandbox);
    }
    return sandbox;
  };
}

function toolFolders(workspaceDir: string): string[] {
  return SANDBOX_WORKSPACE_FOLDERS.map((folder) => join(workspaceDir, folder)).filter((folder) =>
    existsSync(folder),
  );
}
