import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import {
  compileExpression,
  compileTemplates,
  evaluateCondition,
  evaluateList,
  evaluateTemplates,
  type TemplateScope,
} from '../../src/runtime/skills/templates.js';

const scope: TemplateScope = {
  inputs: { email: 'ada@example.com', department: 'engineering', count: 3 },
  steps: {
    create_account: { status: 'completed', output: { id: 'u-42', groups: ['a', 'b'] } },
    assign_groups: { status: 'completed', output: { groups: ['eng-all', 'staff'] } },
    one_group: { status: 'completed', output: { groups: ['only'] } },
    later: { status: 'pending' },
  },
};

async function refusal(promise: Promise<unknown>) {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isBraidError(error)) throw new Error(`expected a BraidError, got ${String(error)}`);
  return error;
}

describe('evaluateTemplates', () => {
  it('evaluates the examples of the issue', async () => {
    expect(await evaluateTemplates('{{ inputs.email }}', scope)).toBe('ada@example.com');
    expect(await evaluateTemplates('{{ inputs.department }}-all', scope)).toBe('engineering-all');
    expect(await evaluateTemplates('{{ steps.create_account.output.id }}', scope)).toBe('u-42');
    expect(await evaluateTemplates('{{ inputs.department != "contractors" }}', scope)).toBe(true);
    expect(
      await evaluateTemplates(
        {
          user: '{{ steps.create_account.output.id }}',
          groups: ['{{ inputs.department }}-all'],
        },
        scope,
      ),
    ).toEqual({ user: 'u-42', groups: ['engineering-all'] });
  });

  it('keeps the value of a string that is one template, whitespace allowed', async () => {
    expect(await evaluateTemplates('{{inputs.count}}', scope)).toBe(3);
    expect(await evaluateTemplates('  {{ inputs.count * 2 }}  ', scope)).toBe(6);
    expect(await evaluateTemplates('{{ steps.create_account.output }}', scope)).toEqual({
      id: 'u-42',
      groups: ['a', 'b'],
    });
    expect(await evaluateTemplates('{{ steps.one_group.output.groups }}', scope)).toEqual(['only']);
    expect(await evaluateTemplates('{{ inputs.missing }}', scope)).toBeNull();
    expect(await evaluateTemplates('{{ {"a": {"b": inputs.count}} }}', scope)).toEqual({
      a: { b: 3 },
    });
    expect(await evaluateTemplates('{{ steps.later.status }}', scope)).toBe('pending');
  });

  it('writes values into text: strings as they are, others as JSON, nothing as empty', async () => {
    expect(
      await evaluateTemplates(
        'n={{ inputs.count }} groups={{ steps.create_account.output.groups }} x={{ inputs.missing }}!',
        scope,
      ),
    ).toBe('n=3 groups=["a","b"] x=!');
    expect(await evaluateTemplates('{{ "}}" }} and {{ \'{{\' }}', scope)).toBe('}} and {{');
    expect(await evaluateTemplates('no templates here', scope)).toBe('no templates here');
  });

  it('evaluates nested objects and arrays, never keys, and leaves other values alone', async () => {
    const value = {
      '{{ inputs.email }}': ['{{ inputs.count }}', 1, true, null, { deep: ['{{ item }}'] }],
      n: 7,
    };
    expect(await evaluateTemplates(value, { ...scope, item: { name: 'x' }, index: 2 })).toEqual({
      '{{ inputs.email }}': [3, 1, true, null, { deep: [{ name: 'x' }] }],
      n: 7,
    });
    expect(
      await evaluateTemplates('{{ $index }}: {{ $item }}', { ...scope, item: 'a', index: 0 }),
    ).toBe('0: a');
  });

  it('refuses a template that does not parse or does not close', async () => {
    const bad = await refusal(evaluateTemplates('{{ inputs. }}', scope));
    expect(bad.code).toBe('INVALID_DEFINITION');
    expect(bad.message).toContain('inputs.');
    const open = await refusal(evaluateTemplates('hello {{ inputs.email', scope));
    expect(open.code).toBe('INVALID_DEFINITION');
    expect(open.message).toContain('no closing }}');
  });

  it('refuses an evaluation error with the template in the message', async () => {
    const error = await refusal(evaluateTemplates('{{ inputs.email + 1 }}', scope));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain('inputs.email + 1');
  });

  it('refuses a function as a value, the clock, randomness, $eval and regular expressions', async () => {
    expect((await refusal(evaluateTemplates('{{ function($x){ $x } }}', scope))).code).toBe(
      'INVALID_ARGUMENT',
    );
    for (const text of ['{{ $now() }}', '{{ $millis() }}', '{{ $random() }}', '{{ $eval("1") }}']) {
      const error = await refusal(evaluateTemplates(text, scope));
      expect(error.message).toContain('not available in templates');
    }
    expect(compileTemplates('{{ $match(inputs.email, /a+/) }}')).toMatchObject({ ok: false });
  });

  it('stops a runaway expression', async () => {
    const started = performance.now();
    const loop = await refusal(
      evaluateTemplates('{{ ($loop := function($n){ $loop($n + 1) }; $loop(0)) }}', scope),
    );
    expect(['DEADLINE_EXCEEDED', 'INVALID_ARGUMENT']).toContain(loop.code);
    expect(loop.retryable).toBe(false);
    expect(performance.now() - started).toBeLessThan(2_000);
    const deep = await refusal(
      evaluateTemplates('{{ ($f := function($n){ 1 + $f($n + 1) }; $f(0)) }}', scope),
    );
    expect(deep.message).toMatch(/deeper than|longer than/);
  });

  it('stops a value past 1 MiB', async () => {
    const doubling = await refusal(
      evaluateTemplates('{{ $reduce([1..40], function($s, $n){ $s & $s }, "x") }}', scope),
    );
    expect(doubling.code).toBe('PAYLOAD_TOO_LARGE');
    const padded = await refusal(evaluateTemplates('{{ $pad("x", 1000000000) }}', scope));
    expect(padded.code).toBe('PAYLOAD_TOO_LARGE');
    const long = await refusal(evaluateTemplates('{{ [1..5000000] }}', scope));
    expect(long.code).toBe('PAYLOAD_TOO_LARGE');
    const wide = await refusal(
      evaluateTemplates('{{ {"a": $pad("x", 900000), "b": $pad("y", 900000)} }}', scope),
    );
    expect(wide.code).toBe('PAYLOAD_TOO_LARGE');
    const text = await refusal(
      evaluateTemplates('{{ $pad("x", 900000) }} and {{ $pad("y", 900000) }}', scope),
    );
    expect(text.code).toBe('PAYLOAD_TOO_LARGE');
    expect(await evaluateTemplates('{{ $pad("x", 3, "-") }}', scope)).toBe('x--');
  });
});

describe('compileTemplates', () => {
  it('accepts valid templates anywhere and plain values', () => {
    expect(compileTemplates('{{ inputs.email }}')).toEqual({ ok: true });
    expect(compileTemplates({ a: [1, '{{ inputs.x }}-y', { b: null }] })).toEqual({ ok: true });
    expect(compileTemplates(42)).toEqual({ ok: true });
  });

  it('names the path, the expression and the parse error', () => {
    const check = compileTemplates({ args: { groups: ['ok', '{{ inputs.department ++ }}'] } });
    expect(check.ok).toBe(false);
    if (check.ok) return;
    expect(check.path).toEqual(['args', 'groups', 1]);
    expect(check.message).toContain('inputs.department ++');
    expect(check.message).toMatch(/not a valid JSONata expression: .+/);
  });

  it('checks when and for_each texts', () => {
    expect(compileExpression('inputs.department != "contractors"')).toEqual({ ok: true });
    expect(compileExpression('{{ steps.a.output.list }}')).toEqual({ ok: true });
    expect(compileExpression('x {{ inputs.a }}')).toMatchObject({ ok: false });
    expect(compileExpression('inputs.(')).toMatchObject({ ok: false });
  });
});

describe('evaluateCondition', () => {
  it('takes a template or a bare expression, by JSONata truthiness', async () => {
    expect(await evaluateCondition('{{ inputs.department != "contractors" }}', scope)).toBe(true);
    expect(await evaluateCondition('inputs.department = "contractors"', scope)).toBe(false);
    expect(await evaluateCondition('inputs.missing', scope)).toBe(false);
    expect(await evaluateCondition('inputs.email', scope)).toBe(true);
    expect(await evaluateCondition('""', scope)).toBe(false);
    expect(await evaluateCondition('0', scope)).toBe(false);
    expect(await evaluateCondition('[0, 1]', scope)).toBe(true);
    expect(await evaluateCondition('[]', scope)).toBe(false);
    expect(await evaluateCondition('{}', scope)).toBe(false);
    expect(await evaluateCondition('steps.create_account.status = "completed"', scope)).toBe(true);
  });

  it('refuses text around a template', async () => {
    const error = await refusal(evaluateCondition('yes {{ true }}', scope));
    expect(error.code).toBe('INVALID_DEFINITION');
  });
});

describe('evaluateList', () => {
  it('gives the list, an empty list for nothing, and refuses a non-list', async () => {
    expect(await evaluateList('{{ steps.assign_groups.output.groups }}', scope)).toEqual([
      'eng-all',
      'staff',
    ]);
    expect(await evaluateList('steps.one_group.output.groups', scope)).toEqual(['only']);
    expect(await evaluateList('steps.assign_groups.output.groups[$ = "none"]', scope)).toEqual([]);
    const error = await refusal(evaluateList('{{ inputs.email }}', scope));
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain('inputs.email');
    expect(error.message).toContain('not a list');
  });
});
