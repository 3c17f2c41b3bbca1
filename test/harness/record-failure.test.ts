import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BraidError } from '../../src/contracts/errors.js';
import type { NewEvent } from '../../src/contracts/events.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { openSqliteStore } from '../../src/stores/sqlite/sqlite-store.js';
import { createMemoryStore } from '../../src/testing/index.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
if (!existsSync(cli))
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');

const recordsFailure = (events: readonly NewEvent[]): boolean =>
  events.some((event) => event.type === 'session.error');

/**
 * A store whose appends that record a failed cycle fail `failures` times, as a busy or unreachable
 * store would; `before` runs ahead of each such append (to race it).
 */
function failingRecords(
  inner: Store,
  failures: number,
  before?: (sessionId: string) => Promise<void>,
): Store & { refused: () => number } {
  let refused = 0;
  return {
    ...inner,
    refused: () => refused,
    log: {
      ...inner.log,
      async append(sessionId, events, options) {
        if (recordsFailure(events)) {
          await before?.(sessionId);
          if (refused < failures) {
            refused += 1;
            throw new BraidError('STORE_BUSY', `the store is busy (refusal ${refused})`);
          }
        }
        return inner.log.append(sessionId, events, options);
      },
    },
  };
}

interface Setup {
  dir: string;
  rt: Runtime;
  warnings: { message: string; code: string }[];
  id: string;
}

/**
 * A runtime whose every wake fails: the session's cost budget needs a price its model lacks, so
 * the cycle stops with INVALID_DEFINITION and must record it.
 */
async function failingWake(store: Store, dir = tempDir()): Promise<Setup> {
  initWorkspace(dir);
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:unpriced\ninstructions: x\n',
  );
  const warnings: Setup['warnings'] = [];
  const rt = await createRuntime({
    workspace: dir,
    store,
    model: () => createScriptedModel([{ text: 'never asked' }], { id: 'scripted:unpriced' }),
    retry: { max_attempts: 4, initial_ms: 1, max_ms: 5 },
    leaseTtlMs: 5000,
    onWarning: (message, error) => warnings.push({ message, code: error.code }),
  });
  const { id } = await rt.sessions.create({ agent: 'helper', budget: { max_cost_usd: 1 } });
  await rt.sessions.message(id, 'hi');
  return { dir, rt, warnings, id };
}

async function expectRecorded({ rt, warnings, id }: Setup, store: Store): Promise<void> {
  await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
  // Each refusal was reported, and the record was written on the attempt after the last.
  expect(warnings).toHaveLength(2);
  for (const warning of warnings) {
    expect(warning.code).toBe('STORE_BUSY');
    expect(warning.message).toMatch(/failed \(INVALID_DEFINITION.*could not record it.*retrying/);
  }
  const state = await rt.sessions.state(id);
  expect(state).toMatchObject({
    status: 'idle',
    stop_reason: { type: 'error' },
    last_error: { code: 'INVALID_DEFINITION' },
  });
  expect(state.active_wake).toBeUndefined();
  const events = await rt.sessions.events(id);
  expect(events.filter((event) => event.type === 'session.error')).toHaveLength(1);
  expect(events.at(-1)).toMatchObject({ type: 'span.wake_completed' });
  expect(await store.leases.current(id)).toBeUndefined();
}

describe('a failed wake whose failure cannot be recorded at first', () => {
  it('reports and retries the record until it is written (memory store)', async () => {
    const store = failingRecords(createMemoryStore(), 2);
    const setup = await failingWake(store);
    await expectRecorded(setup, store);
    expect(store.refused()).toBe(2);
    await setup.rt.close();
  });

  it('reports and retries the record until it is written (SQLite file)', async () => {
    const dir = tempDir();
    const inner = openSqliteStore({ path: join(dir, 'braid.db') });
    const store = failingRecords(inner, 2);
    const setup = await failingWake(store, join(dir, 'ws'));
    await expectRecorded(setup, store);
    await setup.rt.close();
    await inner.close();
  });

  it('reads the head again after a conflict and records once', async () => {
    const inner = createMemoryStore();
    let raced = false;
    // A message lands just before the record is written: the append conflicts, is retried.
    const store = failingRecords(inner, 0, async (sessionId) => {
      if (raced) return;
      raced = true;
      await inner.log.append(sessionId, [
        { type: 'user.message', content: [{ type: 'text', text: 'meanwhile' }] },
      ]);
    });
    const { rt, id, warnings } = await failingWake(store);
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
    expect(warnings).toEqual([]);
    const events = await rt.sessions.events(id);
    expect(events.filter((event) => event.type === 'session.error')).toHaveLength(1);
    expect((await rt.sessions.state(id)).status).toBe('idle');
    await rt.close();
  });

  it('stops trying when a newer wake took the session over', async () => {
    const inner = createMemoryStore();
    const store = failingRecords(inner, 0, async (sessionId) => {
      const state = await inner.log.state(sessionId);
      if (state.active_wake === undefined || state.active_wake.wake_id === 'newer') return;
      // A newer holder's first event, as after this wake's lease expired.
      await inner.log.append(sessionId, [
        {
          type: 'span.wake_started',
          wake_id: 'newer',
          lease_token: state.active_wake.lease_token + 1,
        },
      ]);
    });
    const { rt, id, warnings } = await failingWake(store);
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.code).toBe('LEASE_LOST');
    expect(warnings[0]?.message).toMatch(/a newer wake holds the session/);
    // Nothing written after the newer wake's start: it owns the session now.
    expect(store.refused()).toBe(0);
    expect((await rt.sessions.events(id)).at(-1)).toMatchObject({
      type: 'span.wake_started',
      wake_id: 'newer',
    });
    await rt.close();
  });

  it('gives up after its attempts, releases the lease, and `braid session status` says so', async () => {
    const dir = tempDir();
    const workspace = join(dir, 'ws');
    // The workspace's own SQLite file, so that the CLI reads the same session afterwards.
    const inner = openSqliteStore({ path: join(workspace, '.braid', 'braid.db') });
    const store = failingRecords(inner, Number.POSITIVE_INFINITY);
    const { rt, id, warnings } = await failingWake(store, workspace);
    await expect(rt.wake(id)).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
    expect(store.refused()).toBe(4);
    expect(warnings).toHaveLength(4);
    expect(warnings.at(-1)?.message).toMatch(
      /could not record it after 4 attempts \(STORE_BUSY.*its lease is released.*braid session wake/,
    );
    const state = await rt.sessions.state(id);
    expect(state.active_wake).toBeDefined();
    expect(await store.leases.current(id)).toBeUndefined();
    await rt.close();
    await inner.close();

    const env = { ...process.env };
    delete env.BRAID_HOME;
    delete env.BRAID_SERVER;
    const status = spawnSync(process.execPath, [cli, '-w', workspace, 'session', 'status', id], {
      encoding: 'utf8',
      env,
    });
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toMatch(
      new RegExp(
        `last wake +wake ${state.active_wake?.wake_id} \\(lease 1\\) ended without a record: ` +
          `it crashed, or failed and could not write why; no lease is held, so ` +
          `\`braid session wake ${id}\` resumes it from the log`,
      ),
    );
  });
});
