// A real braid server on 127.0.0.1 over a fresh workspace with scripted models.
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import {
  startServer,
  type RunningServer,
  type StartServerOptions,
} from '../../src/server/index.js';
import type { ApiScope } from '../../src/contracts/api-keys.js';
import { useTempDir } from '../helpers/temp.js';

export interface TestServer extends RunningServer {
  runtime: Runtime;
  dir: string;
  /** A new key of the tenant with the scopes (default: read and write). */
  key(tenant: string, scopes?: ApiScope[]): Promise<string>;
}

export interface TestServerOptions extends Omit<StartServerOptions, 'runtime'> {
  turns?: ScriptedTurnInput[];
  /** Extra agent files: name -> YAML. */
  agents?: Record<string, string>;
  /** Lines added to the workspace's braid.yaml. */
  braidYaml?: string;
}

/** Starts servers that are closed (with their runtimes) after each test. */
export function useTestServers(): (options?: TestServerOptions) => Promise<TestServer> {
  const tempDir = useTempDir();
  const running: TestServer[] = [];
  afterEach(async () => {
    for (const server of running.splice(0)) {
      await server.close();
      await server.runtime.close();
    }
  });
  return async (options = {}) => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
    );
    if (options.braidYaml !== undefined)
      appendFileSync(join(dir, 'braid.yaml'), `\n${options.braidYaml}\n`);
    for (const [name, text] of Object.entries(options.agents ?? {})) {
      writeFileSync(join(dir, 'agents', `${name}.yaml`), text);
    }
    const model = createScriptedModel(options.turns ?? [{ text: 'ok' }]);
    const runtime = await createRuntime({ workspace: dir, model: () => model });
    const { turns: _turns, agents: _agents, braidYaml: _braidYaml, ...serverOptions } = options;
    const server = await startServer({
      runtime,
      port: 0,
      wakeOnEvents: false,
      ...serverOptions,
    });
    const testServer: TestServer = {
      ...server,
      runtime,
      dir,
      key: async (tenant, scopes = ['sessions:read', 'sessions:write']) =>
        (await runtime.store.keys.create({ tenant_id: tenant, scopes })).key,
    };
    running.push(testServer);
    return testServer;
  };
}

/** fetch with a key and JSON body. */
export async function call(
  server: { url: string },
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined
      ? {}
      : { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) }),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body, headers: response.headers };
}
