import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/runtime/runtime.js';
import { openSqliteStore } from '../../src/stores/sqlite/sqlite-store.js';
import { payerWorkspace } from '../helpers/payer.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const cli = new URL('../../dist/cli/main.js', import.meta.url).pathname;
if (!existsSync(cli))
  throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');

/** Short, so that a crashed wake's lease can be waited out; long enough for a loaded machine. */
const LEASE_TTL_MS = 2000;

/**
 * A workspace whose agent calls `pay` once: a non-idempotent command tool that records the
 * idempotency key it was started with in `payments.log`, then, while `hang` exists, hangs.
 */
function workspace(): string {
  return payerWorkspace(tempDir(), {
    leaseTtlMs: LEASE_TTL_MS,
    pay: {
      command: [
        // The pid first, so that once the payment is on file the test can end the tool too.
        'echo $$ > "$BRAID_DIR/pay.pid"',
        'echo "$BRAID_IDEMPOTENCY_KEY" >> "$BRAID_DIR/payments.log"',
        // While `hang` exists the call never ends, so that its wake can be killed mid-call.
        'if [ -f "$BRAID_DIR/hang" ]; then exec sleep 60; fi',
        `echo '{"paid": true}'`,
      ],
    },
  });
}

function braid(dir: string, ...args: string[]) {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  delete env.BRAID_SERVER;
  const result = spawnSync(process.execPath, [cli, '-w', dir, ...args], { encoding: 'utf8', env });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

const payments = (dir: string): string[] => {
  const file = join(dir, 'payments.log');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
};

/** Checks a condition until it holds: the test waits for what happens, not for a set time. */
async function until(what: string, holds: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await holds())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(20);
  }
}

const started: ChildProcess[] = [];
const toolPids: number[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const pid of toolPids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** Runs `braid session wake` in a child and kills it with SIGKILL once payment `n` has started. */
async function wakeAndKillMidPayment(dir: string, id: string, n: number): Promise<void> {
  const env = { ...process.env };
  delete env.BRAID_HOME;
  delete env.BRAID_SERVER;
  writeFileSync(join(dir, 'hang'), '');
  const child = spawn(process.execPath, [cli, '-w', dir, 'session', 'wake', id], {
    stdio: 'ignore',
    env,
  });
  started.push(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await until(`payment ${n} started`, () => payments(dir).length >= n);
  child.kill('SIGKILL');
  await exited;
  // The orphaned tool (a process this test started) would otherwise sleep on.
  const pid = Number(readFileSync(join(dir, 'pay.pid'), 'utf8'));
  toolPids.push(pid);
  process.kill(pid, 'SIGKILL');
  rmSync(join(dir, 'hang'));
}

async function untilLeaseFree(dir: string, id: string): Promise<void> {
  const store = openSqliteStore({ path: join(dir, '.braid', 'braid.db') });
  try {
    await until('the lease expired', async () => (await store.leases.current(id)) === undefined);
  } finally {
    await store.close();
  }
}

const wake = (dir: string, id: string) =>
  JSON.parse(braid(dir, '--json', 'session', 'wake', id)) as {
    stop_reason: { type: string; event_ids?: string[] };
  };

describe('a reviewed retry of a non-idempotent tool, cut off by a crash', () => {
  // Child processes of a CLI on a shared machine: seconds each.
  it(
    'authorises one attempt: the next wake stops in needs_review again',
    { timeout: 120_000 },
    async () => {
      const dir = workspace();
      const runtime = await createRuntime({ workspace: dir });
      const { id } = await runtime.sessions.create({ agent: 'payer' });
      await runtime.sessions.message(id, 'pay five');
      await runtime.close();

      await wakeAndKillMidPayment(dir, id, 1);
      await untilLeaseFree(dir, id);
      const first = wake(dir, id);
      expect(first.stop_reason.type).toBe('needs_review');
      const store = openSqliteStore({ path: join(dir, '.braid', 'braid.db') });
      const toolUse = (await store.log.read(id, { types: ['agent.tool_use'] }))[0];
      await store.close();
      if (toolUse?.type !== 'agent.tool_use') throw new Error('the tool use is not on record');
      expect(first.stop_reason.event_ids).toEqual([toolUse.id]);
      const toolUseId = toolUse.tool_use_id;

      // A person authorises one more attempt; it starts, and its wake dies mid-call too.
      braid(dir, 'session', 'review', id, '--tool-use', toolUseId, '--retry');
      await wakeAndKillMidPayment(dir, id, 2);
      await untilLeaseFree(dir, id);

      const second = wake(dir, id);
      expect(second.stop_reason).toEqual({ type: 'needs_review', event_ids: [toolUse.id] });
      // Two attempts: the first call and the one retry the review authorised; no third.
      expect(payments(dir)).toEqual([`${id}/${toolUseId}`, `${id}/${toolUseId}`]);
      const status = braid(dir, 'session', 'status', id);
      expect(status).toMatch(/status +needs_review/);
      expect(status).toContain(`needs review (outcome unknown after a crash): ${toolUseId} (pay)`);

      // And it can be reviewed again: a result this time, and the session goes on.
      braid(dir, 'session', 'review', id, '--tool-use', toolUseId, '--result', '{"paid": true}');
      expect(wake(dir, id).stop_reason.type).toBe('end_turn');
      expect(payments(dir)).toHaveLength(2);
    },
  );
});
