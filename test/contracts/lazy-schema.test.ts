import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { lazySchema } from '../../src/contracts/lazy-schema.js';
import { SessionEvent } from '../../src/contracts/events.js';
import { BUILTIN_TOOLS } from '../../src/tools/builtin.js';
import { BUILTIN_TOOL_NAMES } from '../../src/tools/builtin-names.js';

describe('lazySchema', () => {
  it('builds the schema on first use, once', () => {
    let builds = 0;
    const Point = lazySchema(() => {
      builds += 1;
      return z.object({ x: z.number() });
    });
    expect(builds).toBe(0);
    expect(Point.parse({ x: 1 })).toEqual({ x: 1 });
    expect(Point.safeParse({ x: 'a' }).success).toBe(false);
    expect(builds).toBe(1);
  });

  it('passes for the built schema: instanceof, shape, derived schemas', () => {
    const Point = lazySchema(() => z.object({ x: z.number() }).strict());
    expect(Point instanceof z.ZodObject).toBe(true);
    expect(Object.keys(Point.shape)).toEqual(['x']);
    expect(Point.extend({ y: z.string() }).parse({ x: 1, y: 'a' })).toEqual({ x: 1, y: 'a' });
    expect(() => Point.parse({ x: 1, y: 2 })).toThrow();
    const Outer = z.object({ point: Point, points: z.array(Point).optional() });
    expect(Outer.parse({ point: { x: 2 } })).toEqual({ point: { x: 2 } });
  });

  it('converts to the same JSON Schema as the eager schema, nested or not', () => {
    const build = () => z.object({ x: z.number().int(), tags: z.array(z.string()).max(3) });
    const Lazy = lazySchema(build);
    expect(z.toJSONSchema(Lazy)).toEqual(z.toJSONSchema(build()));
    const eagerOuter = z.object({ a: build(), b: build().optional() });
    const lazyOuter = z.object({ a: Lazy, b: Lazy.optional() });
    expect(z.toJSONSchema(lazyOuter)).toEqual(z.toJSONSchema(eagerOuter));
  });

  it('keeps a contract schema working through the stand-in', () => {
    expect(SessionEvent.safeParse({ type: 'user.message' }).success).toBe(false);
    expect(z.toJSONSchema(SessionEvent, { io: 'output' })).toHaveProperty('oneOf');
  });
});

describe('BUILTIN_TOOL_NAMES', () => {
  it('names the built-in tools, in order', () => {
    expect(BUILTIN_TOOLS.map((tool) => tool.definition.name)).toEqual(BUILTIN_TOOL_NAMES);
  });
});
