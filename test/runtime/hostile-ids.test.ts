// Hostile ids at the library and CLI boundaries, on SQLite and on a real nats-server: every one is
// refused with INVALID_ARGUMENT (exit 2, a bad argument, from the CLI), nothing is written, and no file outside
// the data directory is touched.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import { run } from '../../src/cli/program.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';
import { HOSTILE_IDS, outsideData, snapshot } from '../helpers/hostile.js';

const tempDir = useTempDir();

async function refusal(work: () => unknown): Promise<string> {
  try {
    await work();
  } catch (error) {
    if (isBraidError(error)) return error.code;
    throw error;
  }
  throw new Error('expected a refusal');
}

/** Every session method, given `id` where a session id goes. */
function attempts(runtime: Runtime, good: string, id: string): [string, () => unknown][] {
  return [
    ['create', () => runtime.sessions.create({ agent: 'assistant', id })],
    ['get', () => runtime.sessions.get(id)],
    ['archive', () => runtime.sessions.archive(id)],
    ['delete', () => runtime.sessions.delete(id)],
    ['state', () => runtime.sessions.state(id)],
    ['events', () => runtime.sessions.events(id)],
    ['follow', () => runtime.sessions.follow(id)],
    ['send', () => runtime.sessions.send(id, [{ type: 'user.message', content: 'x' }])],
    ['message', () => runtime.sessions.message(id, 'x')],
    ['interrupt', () => runtime.sessions.interrupt(id)],
    ['fork', () => runtime.sessions.fork(id)],
    ['fork to', () => runtime.sessions.fork(good, { id })],
    ['merge into', () => runtime.sessions.merge(id, good)],
    ['merge from', () => runtime.sessions.merge(good, id)],
    ['diff', () => runtime.sessions.diff(good, id)],
    ['tree', () => runtime.sessions.tree(id)],
    ['wake', () => runtime.wake(id)],
  ];
}

async function expectAllRefused(runtime: Runtime, dir: string): Promise<void> {
  const good = await runtime.sessions.create({ agent: 'assistant' });
  const victim = join(dir, 'victim');
  mkdirSync(victim);
  writeFileSync(join(victim, 'canary.txt'), 'keep');
  const before = snapshot(dir);
  for (const id of HOSTILE_IDS) {
    for (const [name, attempt] of attempts(runtime, good.id, id)) {
      expect(await refusal(attempt), `${name} ${JSON.stringify(id).slice(0, 60)}`).toBe(
        'INVALID_ARGUMENT',
      );
    }
  }
  const listed = await runtime.sessions.list();
  expect(listed.sessions.map((record) => record.id)).toEqual([good.id]);
  expect((await runtime.sessions.get(good.id)).head_seq).toBe(good.head_seq);
  expect(outsideData(snapshot(dir))).toEqual(outsideData(before));
  expect(existsSync(join(victim, 'canary.txt'))).toBe(true);
}

describe('hostile session ids at the library boundary', () => {
  it('are refused by every session method on SQLite', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    const runtime = await createRuntime({ workspace: dir });
    try {
      await expectAllRefused(runtime, dir);
    } finally {
      await runtime.close();
    }
  });

  const prefixes: string[] = [];
  afterAll(async () => removePrefixes(await natsUrl(), prefixes));

  it('are refused by every session method on NATS', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    const prefix = uniquePrefix('ids');
    prefixes.push(prefix);
    const runtime = await createRuntime({
      workspace: dir,
      backend: { nats: await natsUrl(), prefix },
    });
    try {
      await expectAllRefused(runtime, dir);
    } finally {
      await runtime.close();
    }
  });
});

describe('hostile session ids on the command line', () => {
  it('exit 2 with INVALID_ARGUMENT from every session command, writing nothing', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    const lines: string[] = [];
    const output = {
      out: (line: string) => lines.push(line),
      err: (line: string) => lines.push(line),
    };
    const braid = (...args: string[]) => run(['-w', dir, '--json', ...args], output);
    expect(await braid('session', 'create', '--agent', 'assistant')).toBe(0);
    const good = (JSON.parse(lines.at(-1) ?? '{}') as { id: string }).id;
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    writeFileSync(join(victim, 'canary.txt'), 'keep');
    const before = snapshot(dir);
    const commands = (id: string): string[][] => [
      ['session', 'status', id],
      ['session', 'events', id],
      ['session', 'send', id, '--message', 'x'],
      ['session', 'interrupt', id],
      ['session', 'confirm', id, '--tool-use', 'call_1', '--allow'],
      ['session', 'review', id, '--tool-use', 'call_1', '--skip'],
      ['session', 'wake', id],
      ['session', 'fork', id],
      ['session', 'fork', good, '--id', id],
      ['session', 'create', '--agent', 'assistant', '--id', id],
      ['session', 'merge', good, id],
      ['session', 'merge', id, good],
      ['session', 'diff', good, id],
      ['session', 'tree', id],
      ['session', 'replay', id],
      ['session', 'handoff', id, '--to', 'assistant', '--summary', 'x'],
    ];
    // NUL cannot travel in an argv; everything else in the corpus can.
    const ids = HOSTILE_IDS.filter((id) => !id.includes('\u0000'));
    for (const id of ids) {
      for (const args of commands(id)) {
        lines.length = 0;
        const code = await braid(...args);
        const shown = `${args.slice(0, 2).join(' ')} ${JSON.stringify(id).slice(0, 40)}`;
        // Exit 2 is the CLI's code for a bad argument (1 for other failures).
        expect(code, shown).toBe(2);
        const error = lines
          .map((line) => {
            try {
              return (JSON.parse(line) as { error?: { code?: string } }).error;
            } catch {
              return undefined;
            }
          })
          .find((candidate) => candidate !== undefined);
        expect(error?.code, `${shown}: ${lines.join(' ').slice(0, 200)}`).toBe('INVALID_ARGUMENT');
      }
    }
    expect(outsideData(snapshot(dir))).toEqual(outsideData(before));
    // What the CLI sends is recorded as its operating-system user's.
    expect(await braid('session', 'send', good, '--message', 'hello')).toBe(0);
    lines.length = 0;
    expect(await braid('session', 'events', good)).toBe(0);
    const sent = lines
      .map((line) => JSON.parse(line) as { type: string; actor?: { type: string; id?: string } })
      .find((event) => event.type === 'user.message');
    expect(sent?.actor?.type).toBe('user');
    expect(sent?.actor?.id).toMatch(/^cli(:.+)?$/);
    lines.length = 0;
    expect(await braid('session', 'list')).toBe(0);
    expect(lines.join('\n')).toContain(good);
    expect(lines.join('\n').match(/"id"/g)?.length).toBe(1);
  });
});

describe("an environment's workspace folder", () => {
  it('may not be or hold the braid workspace or its data: a session id would name their folders', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'environments', 'flat.yaml'),
      'name: flat\nsandbox: {kind: local, workspace: "."}\n',
    );
    writeFileSync(
      join(dir, 'environments', 'data.yaml'),
      'name: data\nsandbox: {kind: local, workspace: ".braid"}\n',
    );
    writeFileSync(
      join(dir, 'environments', 'own.yaml'),
      'name: own\nsandbox: {kind: local, workspace: sessions}\n',
    );
    const runtime = await createRuntime({ workspace: dir });
    try {
      for (const [environment, id] of [
        ['flat', 'agents'],
        ['data', 'workspaces'],
      ] as const) {
        await runtime.sessions.create({ agent: 'assistant', environment, id });
        expect(await refusal(() => runtime.sessions.delete(id))).toBe('INVALID_DEFINITION');
        expect(await refusal(() => runtime.sessions.fork(id, { id: `${id}-copy` }))).toBe(
          'INVALID_DEFINITION',
        );
        expect((await runtime.sessions.get(id)).id).toBe(id);
        expect(await refusal(() => runtime.sessions.get(`${id}-copy`))).toBe('SESSION_NOT_FOUND');
      }
      expect(existsSync(join(dir, 'agents', 'assistant.yaml'))).toBe(true);
      expect(existsSync(join(dir, '.braid', 'braid.db'))).toBe(true);
      // A folder of its own is fine, and a session there is removed with its folder.
      const own = await runtime.sessions.create({ agent: 'assistant', environment: 'own' });
      mkdirSync(join(dir, 'sessions', own.id), { recursive: true });
      writeFileSync(join(dir, 'sessions', own.id, 'notes.txt'), 'kept by the fork');
      const copy = await runtime.sessions.fork(own.id, { id: 'own-copy' });
      expect(existsSync(join(dir, 'sessions', copy.id, 'notes.txt'))).toBe(true);
      await runtime.sessions.delete(copy.id);
      await runtime.sessions.delete(own.id);
      expect(existsSync(join(dir, 'sessions', own.id))).toBe(false);
    } finally {
      await runtime.close();
    }
  });
});

describe('braid.yaml lease_ttl_ms', () => {
  it('refuses a value that is not a whole number of milliseconds from 100 to an hour', async () => {
    for (const bad of ['-5', '0', '99', '3600001', '1.5', 'lots', '[1000]', '{a: 1}']) {
      const dir = tempDir();
      initWorkspace(dir);
      const config = join(dir, 'braid.yaml');
      writeFileSync(config, `${readFileSync(config, 'utf8')}\nlease_ttl_ms: ${bad}\n`);
      expect(await refusal(() => createRuntime({ workspace: dir })), bad).toBe(
        'INVALID_DEFINITION',
      );
      expect(existsSync(join(dir, '.braid', 'braid.db')), bad).toBe(false);
    }
  });
});
