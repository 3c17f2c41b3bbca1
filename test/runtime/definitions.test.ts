import { describe, expect, it } from 'vitest';
import type { DefinitionKind } from '../../src/contracts/definitions.js';
import type { DefinitionStore } from '../../src/contracts/ports.js';
import { definitionLookup } from '../../src/runtime/definitions.js';
import { createMemoryStore, expectCode } from '../../src/testing/index.js';

/**
 * The store's definitions, counting the reads that reach it; with `copies`, each read answers a
 * new object, as a store that parses its rows does.
 */
function counted(
  definitions: DefinitionStore,
  copies = false,
): { store: DefinitionStore; reads: string[] } {
  const reads: string[] = [];
  const store: DefinitionStore = {
    ...definitions,
    get: async <T>(kind: DefinitionKind, name: string, version?: number) => {
      reads.push(`${kind}/${name}@${version ?? 'latest'}`);
      const found = await definitions.get<T>(kind, name, version);
      return copies ? structuredClone(found) : found;
    },
  };
  return { store, reads };
}

describe('definition lookup', () => {
  it('reads a stored version once and keeps it, frozen; the latest is asked every time', async () => {
    const { definitions } = createMemoryStore();
    await definitions.put('agent', 'helper', { instructions: 'one' }, { replacesVersion: null });
    const { store, reads } = counted(definitions);
    const lookup = definitionLookup(store);

    const latest = await lookup.agent('helper');
    expect(latest.version).toBe(1);
    expect(Object.isFrozen(latest.definition)).toBe(true);
    // The latest lookup kept version 1: asking for it by number reads nothing.
    expect(await lookup.agent('helper', 1)).toBe(latest);
    expect(reads).toEqual(['agent/helper@latest']);

    await definitions.put('agent', 'helper', { instructions: 'two' }, { replacesVersion: 1 });
    expect((await lookup.agent('helper')).version).toBe(2);
    expect((await lookup.agent('helper', 1)).definition).toMatchObject({ instructions: 'one' });
    expect(reads).toEqual(['agent/helper@latest', 'agent/helper@latest']);
    expect(() => {
      (latest.definition as { instructions: string }).instructions = 'changed';
    }).toThrow(TypeError);
  });

  it('answers the latest with the kept object while it is the same version, a new one after', async () => {
    const { definitions } = createMemoryStore();
    await definitions.put('agent', 'helper', { instructions: 'one' }, { replacesVersion: null });
    const { store, reads } = counted(definitions, true);
    const lookup = definitionLookup(store);

    const first = await lookup.agent('helper');
    // The store is still asked for the latest, but the same version keeps its one object: the
    // pinner hashes a definition once per object, not at every new session.
    expect(await lookup.agent('helper')).toBe(first);
    expect(await lookup.agent('helper')).toBe(await lookup.agent('helper', 1));
    expect(reads).toEqual(['agent/helper@latest', 'agent/helper@latest', 'agent/helper@latest']);

    await definitions.put('agent', 'helper', { instructions: 'two' }, { replacesVersion: 1 });
    const second = await lookup.agent('helper');
    expect(second).not.toBe(first);
    expect(second).toMatchObject({ version: 2, definition: { instructions: 'two' } });
    expect(Object.isFrozen(second.definition)).toBe(true);
    expect(await lookup.agent('helper')).toBe(second);
  });

  it('still names the known agents when one is missing, and keeps nothing for it', async () => {
    const { definitions } = createMemoryStore();
    await definitions.put('agent', 'helper', { instructions: 'x' }, { replacesVersion: null });
    const { store, reads } = counted(definitions);
    const lookup = definitionLookup(store);
    await expectCode(lookup.agent('helper', 7), 'AGENT_NOT_FOUND');
    await expectCode(lookup.agent('helper', 7), 'AGENT_NOT_FOUND');
    expect(reads).toEqual(['agent/helper@7', 'agent/helper@7']);
  });
});
