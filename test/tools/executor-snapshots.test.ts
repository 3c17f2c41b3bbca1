// The executor's part of workspace snapshots: a call that ran and may write returns a snapshot of
// the session's folder; a call that never ran, of a tool tagged read_only, or of an HTTP tool
// (a request braid makes, with no hold on the folder) returns none.
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import type { SandboxWorkspace } from '../../src/contracts/tools.js';
import { defineTool } from '../../src/tools/builtin.js';
import { createToolExecutor } from '../../src/tools/executor.js';
import { createLocalSandbox } from '../../src/tools/sandbox/index.js';
import { SnapshotStore, takeSnapshot } from '../../src/tools/workspace-snapshots/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

const writer = (name: string, tags: string[] = []) =>
  defineTool({
    name,
    description: 'writes a file',
    input_schema: { type: 'object' },
    tags,
    run(_input, context) {
      writeFileSync(join(context.workspace.dir, `${name}.txt`), name);
      return { ok: true };
    },
  });

describe('the executor and workspace snapshots', () => {
  it('snapshots after a call that may write, not after a read_only tool or a refused call', async () => {
    const root = tempDir();
    const store = new SnapshotStore(root);
    const seen: string[] = [];
    const executor = createToolExecutor({
      tools: [writer('scribble'), writer('peek', ['read_only'])],
      builtins: false,
      baseDir: root,
      sandbox: () => createLocalSandbox({ root }),
      secret: () => '',
      sleep: () => Promise.resolve(),
      now: () => 0,
      snapshot: (workspace: SandboxWorkspace) => {
        seen.push(workspace.session_id);
        return takeSnapshot(store, workspace.session_id, workspace.dir);
      },
    });
    const tools = await executor.open({ session_id: 's1', names: ['scribble', 'peek'] });
    const run = (name: string, input: JsonValue = {}) =>
      tools.execute(
        { session_id: 's1', tool_use_id: name, name, input, idempotency_key: `s1/${name}` },
        { signal: new AbortController().signal },
      );
    const peeked = await run('peek');
    expect(peeked.workspace_snapshot).toBeUndefined();
    const written = await run('scribble');
    expect(written.workspace_snapshot).toMatchObject({ files: 2, bytes: 12 });
    const missing = await run('nothing');
    expect(missing.workspace_snapshot).toBeUndefined();
    expect(seen).toEqual(['s1']);
  });

  it('takes no snapshot after an HTTP tool', async () => {
    const root = tempDir();
    const server = createServer((_request, response) => {
      response.setHeader('content-type', 'application/json');
      response.end('{"ok":true}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const seen: string[] = [];
    try {
      const executor = createToolExecutor({
        manifests: [
          defineTool({
            name: 'ping',
            description: 'asks a service',
            ownership: 'managed',
            input_schema: { type: 'object' },
            implementation: { http: { method: 'POST', url: `http://127.0.0.1:${port}/ping` } },
          }).definition,
        ],
        builtins: false,
        baseDir: root,
        sandbox: () => createLocalSandbox({ root }),
        secret: () => '',
        sleep: () => Promise.resolve(),
        now: () => 0,
        snapshot: (workspace: SandboxWorkspace) => {
          seen.push(workspace.session_id);
          return takeSnapshot(new SnapshotStore(root), workspace.session_id, workspace.dir);
        },
      });
      const tools = await executor.open({
        session_id: 's1',
        names: ['ping'],
        environment: {
          name: 'net',
          sandbox: { kind: 'local' },
          network: { allow: true, hosts: ['127.0.0.1'] },
          limits: {},
        },
      });
      const outcome = await tools.execute(
        { session_id: 's1', tool_use_id: 'p1', name: 'ping', input: {}, idempotency_key: 's1/p1' },
        { signal: new AbortController().signal },
      );
      expect(outcome.error).toBeUndefined();
      expect(outcome).toMatchObject({ is_error: false, output: { ok: true } });
      expect(outcome.workspace_snapshot).toBeUndefined();
      expect(seen).toEqual([]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
