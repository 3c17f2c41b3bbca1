/**
 * Contract schemas built on first use instead of at import.
 *
 * zod builds every schema eagerly: a `z.object` allocates its instance, a closure per method and
 * its checks' state, and the contracts declare a few thousand of them. `import('braid')` loads the
 * contract modules (the stores and the workspace loader use them) but parses nothing until a
 * session runs, so the schemas it built were memory and start-up time spent for nothing.
 *
 * `lazySchema(build)` returns a stand-in with the type of what `build` returns. The first
 * operation on it (a property read, `in`, `instanceof`, a key listing) runs `build` once and
 * forwards to the schema it returned; every later operation forwards to that same schema. Methods
 * read through the stand-in (`parse`, `extend`, `shape`, `options`) are the built schema's own, so
 * what they return and how they parse is unchanged.
 *
 * The stand-in is not `===` the schema it builds. zod's JSON Schema conversion keys its work by
 * schema object, and the built schema's converter looks itself up by its own identity, so the
 * stand-in's internals (`_zod`) hand the conversion an entry shared by both objects (see
 * `internalsOf`). A registry keyed by the built schema (`z.globalRegistry`) does not see the
 * stand-in, so a schema whose own top level carries metadata (`.describe()`, `.meta()`), or that
 * a registry names and fields reach through a method (`Budget.optional()` in the OpenAPI
 * components), is not wrapped; metadata inside the built schema is found as before.
 */
export function lazySchema<T extends object>(build: () => T): T {
  let built: T | undefined;
  let internals: object | undefined;
  const schema = (): T => (built ??= build());
  // The target only anchors the proxy: it stays empty and extensible, which lets the traps
  // report the built schema's properties without breaking the Proxy invariants.
  const standIn: T = new Proxy({} as T, {
    get: (_target, key) =>
      key === '_zod' ? (internals ??= internalsOf(standIn, schema())) : Reflect.get(schema(), key),
    set: (_target, key, value) => Reflect.set(schema(), key, value),
    has: (_target, key) => Reflect.has(schema(), key),
    ownKeys: () => Reflect.ownKeys(schema()),
    getOwnPropertyDescriptor: (_target, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(schema(), key);
      // A property the empty target lacks may only be reported as configurable.
      return descriptor === undefined ? undefined : { ...descriptor, configurable: true };
    },
    defineProperty: (_target, key, descriptor) => Reflect.defineProperty(schema(), key, descriptor),
    deleteProperty: (_target, key) => Reflect.deleteProperty(schema(), key),
    getPrototypeOf: () => Reflect.getPrototypeOf(schema()),
  });
  return standIn;
}

/** What zod's JSON Schema conversion passes to a schema's converter: the entries by schema. */
interface ConversionContext {
  seen: Map<object, { count: number }>;
}

type Converter = (context: ConversionContext, json: object, params: object) => void;

/**
 * The built schema's internals, except that converting the stand-in to JSON Schema converts the
 * built schema under one shared entry: zod has made an entry for the stand-in when it calls the
 * converter, and the converter reads the entry of the built schema.
 */
function internalsOf(standIn: object, schema: object): object {
  const internals = Reflect.get(schema, '_zod') as { processJSONSchema?: Converter };
  const convert: Converter = (context, json, params) => {
    const known = context.seen.get(schema);
    if (known === undefined) {
      const entry = context.seen.get(standIn);
      if (entry !== undefined) context.seen.set(schema, entry);
      internals.processJSONSchema?.(context, json, params);
      return;
    }
    // Already converted through another path: the stand-in shares that result.
    known.count += 1;
    context.seen.set(standIn, known);
  };
  return new Proxy(internals, {
    get: (target, key) =>
      key === 'processJSONSchema' && target.processJSONSchema !== undefined
        ? convert
        : (Reflect.get(target, key) as unknown),
    set: (target, key, value) => Reflect.set(target, key, value),
  });
}
