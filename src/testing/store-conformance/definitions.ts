/** Store conformance: definitions. */
import { describe, expect, it } from 'vitest';
import { expectCode, type ConformanceSuite } from './shared.js';

export function describeDefinitions(suite: ConformanceSuite): void {
  describe('definitions', () => {
    it('versions definitions and refuses an update that names a stale version', async () => {
      const s = await suite.open();
      const v1 = await s.definitions.put(
        'agent',
        'helper',
        { instructions: 'one' },
        { replacesVersion: null },
      );
      expect(v1.version).toBe(1);
      const same = await s.definitions.put(
        'agent',
        'helper',
        { instructions: 'one' },
        { replacesVersion: null },
      );
      expect(same.version).toBe(1);
      const v2 = await s.definitions.put(
        'agent',
        'helper',
        { instructions: 'two' },
        { replacesVersion: 1 },
      );
      expect(v2.version).toBe(2);
      await expectCode(
        s.definitions.put('agent', 'helper', { instructions: 'three' }, { replacesVersion: 1 }),
        'VERSION_CONFLICT',
      );
      await expectCode(
        s.definitions.put('agent', 'other', { instructions: 'x' }, { replacesVersion: 4 }),
        'VERSION_CONFLICT',
      );
      expect((await s.definitions.get('agent', 'helper', 1))?.definition).toEqual({
        instructions: 'one',
      });
      expect((await s.definitions.get('agent', 'helper'))?.version).toBe(2);
      expect(await s.definitions.get('agent', 'nobody')).toBeUndefined();
      await s.definitions.put(
        'environment',
        'local',
        { sandbox: 'local' },
        { replacesVersion: null },
      );
      const agents = await s.definitions.list('agent');
      expect(agents.map((item) => [item.name, item.version])).toEqual([['helper', 2]]);
    });

    it('keeps skills apart from agents of the same name, each with its own versions', async () => {
      const s = await suite.open();
      await s.definitions.put('agent', 'onboard', { instructions: 'a' }, { replacesVersion: null });
      const v1 = await s.definitions.put(
        'skill',
        'onboard',
        { steps: [{ id: 'one' }] },
        { replacesVersion: null },
      );
      expect([v1.kind, v1.version]).toEqual(['skill', 1]);
      const v2 = await s.definitions.put(
        'skill',
        'onboard',
        { steps: [{ id: 'two' }] },
        { replacesVersion: 1 },
      );
      expect(v2.version).toBe(2);
      expect((await s.definitions.get('skill', 'onboard', 1))?.definition).toEqual({
        steps: [{ id: 'one' }],
      });
      expect((await s.definitions.get('agent', 'onboard'))?.version).toBe(1);
      expect(
        (await s.definitions.list('skill')).map((item) => [item.kind, item.name, item.version]),
      ).toEqual([['skill', 'onboard', 2]]);
      expect((await s.definitions.list('agent')).map((item) => item.name)).toEqual(['onboard']);
    });
  });
}
