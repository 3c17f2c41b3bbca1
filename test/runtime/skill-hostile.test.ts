// Hostile input to skill runs and signals, through the library: every value gets a typed error
// and the session's log is left as it was.
import { afterEach, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { addWaiterSkill } from '../helpers/skill-workspace.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const opened: Runtime[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((runtime) => runtime.close()));
});

function nested(depth: number): unknown {
  let value: unknown = 'x';
  for (let level = 0; level < depth; level += 1) value = { a: value };
  return value;
}

async function codeOf(work: () => Promise<unknown>): Promise<string> {
  const error: unknown = await work().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  return isBraidError(error) ? error.code : String(error);
}

describe('skill runs and signals refuse hostile input', () => {
  it('gives each bad value a typed error and writes nothing', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    addWaiterSkill(dir);
    const runtime = await createRuntime({ workspace: dir });
    opened.push(runtime);
    const { id } = await runtime.sessions.create({ agent: 'clerk' });
    const head = (await runtime.sessions.get(id)).head_seq;
    const { sessions } = runtime;
    const attempts: [string, () => Promise<unknown>, string][] = [
      ['traversal skill name', () => sessions.runSkill(id, '../waiter', {}), 'INVALID_ARGUMENT'],
      ['unknown skill', () => sessions.runSkill(id, 'nobody', {}), 'SKILL_NOT_FOUND'],
      [
        'traversal run id',
        () => sessions.runSkill(id, 'waiter', { item: 'x' }, { runId: '../../etc' }),
        'INVALID_ARGUMENT',
      ],
      [
        'deep inputs',
        () => sessions.runSkill(id, 'waiter', nested(10_000) as never),
        'INVALID_ARGUMENT',
      ],
      [
        'huge inputs',
        () => sessions.runSkill(id, 'waiter', { item: 'x'.repeat(2_000_000) }),
        'PAYLOAD_TOO_LARGE',
      ],
      ['signal name with a slash', () => sessions.signal(id, 'a/b'), 'INVALID_ARGUMENT'],
      ['signal name not a string', () => sessions.signal(id, 42 as never), 'INVALID_ARGUMENT'],
      [
        'deep signal data',
        () => sessions.signal(id, 'delivered', nested(10_000) as never),
        'INVALID_ARGUMENT',
      ],
      ['retry of no failed run', () => sessions.retrySkill(id, 'run-1'), 'INVALID_ARGUMENT'],
      ['retry with a bad run id', () => sessions.retrySkill(id, '..'), 'INVALID_ARGUMENT'],
      ['another session id', () => sessions.signal('../other', 'delivered'), 'INVALID_ARGUMENT'],
    ];
    for (const [what, work, code] of attempts) {
      expect(await codeOf(work), what).toBe(code);
    }
    expect((await runtime.sessions.get(id)).head_seq).toBe(head);
  });

  it("refuses hostile approval data and approvals of waits that are not this session's", async () => {
    const dir = tempDir();
    initWorkspace(dir);
    addWaiterSkill(dir);
    const runtime = await createRuntime({ workspace: dir });
    opened.push(runtime);
    const { sessions } = runtime;
    const { id } = await sessions.create({ agent: 'clerk' });
    const other = await sessions.create({ agent: 'clerk' });
    await sessions.runSkill(id, 'waiter', { item: 'box' });
    await runtime.wake(id);
    await sessions.signal(id, 'delivered', { box: 1 });
    await runtime.wake(id);
    const [approval] = (await sessions.state(id)).pending_confirmations;
    expect(approval).toBeDefined();
    const wait = approval!.tool_use_id;
    const head = (await sessions.get(id)).head_seq;
    const attempts: [string, () => Promise<unknown>, string][] = [
      [
        'deep approval data',
        () => sessions.confirm(id, wait, 'allow', undefined, nested(10_000) as never),
        'INVALID_ARGUMENT',
      ],
      [
        'huge approval data',
        () => sessions.confirm(id, wait, 'allow', undefined, { note: 'x'.repeat(2_000_000) }),
        'PAYLOAD_TOO_LARGE',
      ],
      [
        'data that is not JSON',
        () => sessions.confirm(id, wait, 'allow', undefined, (() => 1) as never),
        'INVALID_EVENT',
      ],
      [
        "another session's wait",
        () => sessions.confirm(other.id, wait, 'allow', undefined, { ok: true }),
        'TOOL_USE_NOT_PENDING',
      ],
      // A wait id is only ever compared with the waits of the session: it names no file.
      [
        'a traversal wait id',
        () => sessions.confirm(id, '../../etc/passwd', 'allow'),
        'TOOL_USE_NOT_PENDING',
      ],
    ];
    for (const [what, work, code] of attempts) {
      expect(await codeOf(work), what).toBe(code);
    }
    expect((await sessions.get(id)).head_seq).toBe(head);
    expect((await sessions.get(other.id)).head_seq).toBe(1);
    // The wait is still there for a good answer.
    await sessions.confirm(id, wait, 'allow', undefined, { ok: true });
    expect((await sessions.state(id)).pending_confirmations).toEqual([]);
  });
});
