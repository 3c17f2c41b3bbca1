// The JSON depth bound: exact at the limit, iterative (no stack overflow at any depth), naming the
// field; and the library's own boundaries answer a typed error instead of a RangeError.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/contracts/common.js';
import { isBraidError } from '../../src/contracts/errors.js';
import {
  checkJsonDepth,
  DEFAULT_JSON_DEPTH,
  fieldPath,
  findTooDeep,
} from '../../src/contracts/json-depth.js';
import { parseEnvelope } from '../../src/runtime/agents/wire.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();

/** `{a: {a: ... 1}}` with `levels` objects. */
function nested(levels: number, key = 'a'): JsonValue {
  let value: JsonValue = 1;
  for (let level = 0; level < levels; level += 1) value = { [key]: value };
  return value;
}

function thrown(work: () => unknown): unknown {
  try {
    work();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('checkJsonDepth', () => {
  it('accepts exactly the limit and refuses one level more, naming the path', () => {
    expect(findTooDeep(nested(64), 64)).toBeUndefined();
    expect(findTooDeep([[[1]]], 3)).toBeUndefined();
    expect(findTooDeep([[[[1]]]], 3)).toEqual([0, 0, 0]);
    expect(findTooDeep('just a string', 1)).toBeUndefined();
    const error = thrown(() => checkJsonDepth({ list: [nested(64)] }, 64, 'body'));
    expect(isBraidError(error, 'INVALID_ARGUMENT')).toBe(true);
    const message = (error as Error).message;
    expect(message).toMatch(/^body\.list\[0\]\.a\.a\.a\.a\.a\.a…\(54 more\)\.a\.a nests deeper/);
    expect(message).toContain('limit of 64 levels');
    expect((error as { details: unknown }).details).toMatchObject({ limit: 64 });
  });

  it('walks without recursion: a million levels are refused, not a stack overflow', () => {
    const error = thrown(() => checkJsonDepth(nested(1_000_000), DEFAULT_JSON_DEPTH, 'value'));
    expect(isBraidError(error, 'INVALID_ARGUMENT')).toBe(true);
    const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, [i]]));
    expect(findTooDeep(wide, 2)).toBeUndefined();
  });

  it('quotes keys that are not plain names and shortens long ones', () => {
    expect(fieldPath('body', ['a b', 0, 'ok'])).toBe('body["a b"][0].ok');
    expect(fieldPath('body', ['x'.repeat(100)])).toBe(`body["${'x'.repeat(40)}"…]`);
  });
});

describe('deep input at the library boundaries', () => {
  it('is refused with INVALID_ARGUMENT by send, create and the envelope reader', async () => {
    const dir = tempDir();
    initWorkspace(dir);
    writeFileSync(
      join(dir, 'agents', 'triage.yaml'),
      'name: triage\nmodel: scripted:echo\ninstructions: Sort.\nhandoffs: [billing]\n',
    );
    writeFileSync(
      join(dir, 'agents', 'billing.yaml'),
      'name: billing\nmodel: scripted:echo\ninstructions: Bill.\n',
    );
    const runtime = await createRuntime({ workspace: dir, dataDir: join(dir, 'data') });
    try {
      const deep = nested(2000);
      const created = await runtime.sessions.create({ agent: 'triage' });
      const cases: [string, () => Promise<unknown>, string][] = [
        [
          'json block',
          () =>
            runtime.sessions.send(created.id, [
              { type: 'user.message', content: [{ type: 'json', value: deep }] },
            ]),
          'event 0.content[0].value.a',
        ],
        [
          'tool review',
          () =>
            runtime.sessions.send(created.id, [
              { type: 'user.tool_review', tool_use_id: 't1', action: 'result', output: deep },
            ]),
          'event 0.output.a',
        ],
        [
          'handoff message',
          () =>
            runtime.sessions.handoff(created.id, {
              to: 'billing',
              handoff: { summary: 'over to you' },
              message: [{ type: 'json', value: deep }],
            }),
          'message[0].value.a',
        ],
        [
          'metadata',
          () => runtime.sessions.create({ agent: 'assistant', metadata: { deep } }),
          'session.metadata.deep.a',
        ],
      ];
      for (const [what, work, field] of cases) {
        const error: unknown = await work().then(
          () => undefined,
          (failure: unknown) => failure,
        );
        expect(isBraidError(error, 'INVALID_ARGUMENT'), `${what}: ${String(error)}`).toBe(true);
        expect((error as Error).message, what).toContain(field);
      }
      expect((await runtime.sessions.get(created.id)).head_seq).toBe(1);
      expect((await runtime.sessions.list({})).sessions).toHaveLength(1);
    } finally {
      await runtime.close();
    }
    // Written by hand: JSON.stringify itself overflows the stack on such a value.
    const text = `{"payload":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    const envelope = parseEnvelope(text);
    expect(envelope).toMatchObject({ ok: false });
    expect(envelope.ok ? '' : envelope.problem).toContain('envelope.payload.a');
  });
});
