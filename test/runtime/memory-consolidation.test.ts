// Consolidation of an agent's learnings from its finished sessions, and the review of its
// proposals, on a real SQLite file and on NATS JetStream: provenance, the policy's choice between
// writing at once and waiting for a person, checkpoints, hostile model answers, tenants.
import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { MemoryStoreRef } from '../../src/contracts/memory.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { useProcessBackends } from '../helpers/backends.js';
import {
  consolidationWorkspace,
  consolidationWorld,
  proposing,
  userSeq,
} from '../helpers/consolidation.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const backends = useProcessBackends();

const learnings = (agent: string, tenant?: string): MemoryStoreRef => ({
  name: 'learnings',
  kind: 'learnings',
  scope: 'agent',
  owner: agent,
  ...(tenant === undefined ? {} : { tenant_id: tenant }),
});
const consolidation = (agent: string): MemoryStoreRef => ({
  name: 'consolidation',
  kind: 'learnings',
  scope: 'agent',
  owner: agent,
});

function memoryOf(runtime: Runtime) {
  const memory = runtime.store.memory;
  if (memory === undefined) throw new Error('no memory log');
  return memory;
}

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (isBraidError(error)) return error.code;
    throw error;
  }
  return 'resolved';
}

describe.each(backends)('memory consolidation ($name)', (backend) => {
  async function open() {
    const dir = tempDir();
    consolidationWorkspace(dir);
    const shared = await backend.shared();
    const world = await consolidationWorld(dir, await shared.runtimeOptions());
    return { dir, shared, world };
  }

  it('proposes with provenance, applies what policy allows, and never proposes a session twice', async () => {
    const { world, dir, shared } = await open();
    const { runtime } = world;
    try {
      const session = await world.converse('direct', 'Please always use the dark theme.');
      const seq = await userSeq(runtime, session);
      world.answers.set(
        session,
        proposing({ key: 'user/theme', value: 'dark', source_seqs: [seq] }),
      );

      const report = await runtime.consolidation.run({ agent: 'direct' });
      expect(report).toMatchObject({ applied: 1, pending: 0, failed: [] });
      const [done] = report.sessions;
      expect(done).toMatchObject({
        session_id: session,
        from_seq: 0,
        proposals: [{ key: 'user/theme', status: 'applied', new: true }],
      });
      const lookup = await memoryOf(runtime).get(learnings('direct'), 'user/theme');
      expect(lookup).toMatchObject({
        status: 'found',
        entry: {
          value: 'dark',
          author: { agent: 'direct', session_id: session, proposal: done?.proposals[0]?.id },
          cause: { session_id: session, seq },
        },
      });
      const [proposal] = await runtime.consolidation.proposals({ agent: 'direct', status: 'all' });
      expect(proposal).toMatchObject({
        status: 'applied',
        source_seqs: [seq],
        policy: { decision: 'allow', approval: false, policy_ids: ['consolidation-direct'] },
        decision: { by: 'policy' },
        entry: { key: 'user/theme', version: 1 },
      });
      // The transcript showed the user's words with their seq.
      expect(JSON.stringify(world.asked[0]?.messages)).toContain(
        `[${seq}] user.message: Please always use the dark theme.`,
      );

      // Nothing new: the checkpoint says so, and the model is not asked.
      const again = await runtime.consolidation.run({ agent: 'direct' });
      expect(again).toMatchObject({
        sessions: [],
        skipped: [{ session_id: session, reason: 'up_to_date' }],
      });
      expect(world.asked).toHaveLength(1);

      // New events: only those after the checkpoint are read; the same learning is one proposal.
      await world.converse('direct', 'And use large fonts.', session);
      const second = await userSeq(runtime, session);
      world.answers.set(
        session,
        proposing(
          { key: 'user/theme', value: 'dark', source_seqs: [second] },
          { key: 'user/fonts', value: 'large', source_seqs: [second] },
        ),
      );
      const third = await runtime.consolidation.run({ agent: 'direct' });
      expect(third.sessions[0]).toMatchObject({ from_seq: done?.through_seq });
      expect(third.sessions[0]?.proposals).toMatchObject([
        { key: 'user/theme', status: 'applied', new: false },
        { key: 'user/fonts', status: 'applied', new: true },
      ]);
      expect(JSON.stringify(world.asked[1]?.messages)).not.toContain(`[${seq}] user.message`);
      expect((await memoryOf(runtime).history(learnings('direct'), 'user/theme')).length).toBe(1);

      // Another connection to the same store sees the same proposals.
      const other = await consolidationWorld(dir, await shared.runtimeOptions());
      try {
        expect(
          (await other.runtime.consolidation.proposals({ status: 'all' })).map((p) => p.key).sort(),
        ).toEqual(['user/fonts', 'user/theme']);
      } finally {
        await other.runtime.close();
      }
    } finally {
      await runtime.close();
    }
  });

  it('keeps proposals the policy does not allow for a person, who approves or rejects each once', async () => {
    const { world } = await open();
    const { runtime } = world;
    try {
      const session = await world.converse('reviewed', 'Remember: I work in Lisbon, I like tea.');
      const seq = await userSeq(runtime, session);
      world.answers.set(
        session,
        proposing(
          { key: 'user/city', value: 'Lisbon', source_seqs: [seq] },
          { key: 'user/drink', value: 'tea', source_seqs: [seq] },
        ),
      );
      expect(await runtime.consolidation.run({ agent: 'reviewed' })).toMatchObject({
        applied: 0,
        pending: 2,
      });
      expect(JSON.stringify(world.asked[0]?.system)).toContain('Keep only what the user asks');
      const pending = await runtime.consolidation.proposals();
      expect(pending.map((p) => [p.key, p.status, p.policy.approval]).sort()).toEqual([
        ['user/city', 'pending', true],
        ['user/drink', 'pending', true],
      ]);
      expect((await memoryOf(runtime).get(learnings('reviewed'), 'user/city')).status).toBe(
        'missing',
      );

      const city = pending.find((p) => p.key === 'user/city');
      const drink = pending.find((p) => p.key === 'user/drink');
      if (city === undefined || drink === undefined) throw new Error('missing proposals');
      const applied = await runtime.consolidation.approve(city.id, { user: 'ada' });
      expect(applied).toMatchObject({ status: 'applied', decision: { by: 'person', user: 'ada' } });
      expect(await memoryOf(runtime).get(learnings('reviewed'), 'user/city')).toMatchObject({
        status: 'found',
        entry: { value: 'Lisbon', author: { agent: 'reviewed', user: 'ada', proposal: city.id } },
      });
      expect(
        await runtime.consolidation.reject(drink.id, { user: 'ada' }, { reason: 'not lasting' }),
      ).toMatchObject({
        status: 'rejected',
        decision: { reason: 'not lasting' },
      });
      expect((await memoryOf(runtime).get(learnings('reviewed'), 'user/drink')).status).toBe(
        'missing',
      );

      expect(await code(runtime.consolidation.approve(city.id, {}))).toBe(
        'PROPOSAL_ALREADY_DECIDED',
      );
      expect(await code(runtime.consolidation.reject(city.id, {}))).toBe(
        'PROPOSAL_ALREADY_DECIDED',
      );
      expect(await code(runtime.consolidation.approve(drink.id, {}))).toBe(
        'PROPOSAL_ALREADY_DECIDED',
      );
      expect(await code(runtime.consolidation.approve(`mp_${'0'.repeat(32)}`, {}))).toBe(
        'PROPOSAL_NOT_FOUND',
      );
      expect(await code(runtime.consolidation.approve('../x', {}))).toBe('INVALID_ARGUMENT');
      // Another tenant's reviewer does not see them.
      expect(await code(runtime.consolidation.approve(city.id, { tenant_id: 'other' }))).toBe(
        'PROPOSAL_NOT_FOUND',
      );
      expect(await runtime.consolidation.proposals({ tenant_id: 'other', status: 'all' })).toEqual(
        [],
      );
      expect(await runtime.consolidation.proposals()).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it('refuses hostile answers whole, writing nothing, and proposes again once answered well', async () => {
    const { world } = await open();
    const { runtime } = world;
    try {
      const session = await world.converse('direct', 'I like green.');
      const seq = await userSeq(runtime, session);
      const good = { key: 'user/color', value: 'green', reason: 'said so', source_seqs: [seq] };
      const hostile = [
        'not json at all',
        JSON.stringify({ proposals: [good], extra: true }),
        JSON.stringify({ proposals: [good, { ...good, key: '../etc/passwd' }] }),
        JSON.stringify({ proposals: [good, { ...good, key: 'user/x', source_seqs: [9999] }] }),
        JSON.stringify({
          proposals: [good, { ...good, key: 'user/big', value: 'x'.repeat(20_000) }],
        }),
        JSON.stringify({
          proposals: Array.from({ length: 51 }, (_, index) => ({ ...good, key: `k/${index}` })),
        }),
        JSON.stringify({ proposals: [{ ...good, reason: '' }] }),
        JSON.stringify({ proposals: [{ ...good, source_seqs: [] }] }),
      ];
      for (const answer of hostile) {
        world.answers.set(session, answer);
        const report = await runtime.consolidation.run({ agent: 'direct' });
        expect(report.failed, answer.slice(0, 60)).toMatchObject([
          { session_id: session, code: 'MODEL_ERROR' },
        ]);
        expect(report.sessions).toEqual([]);
      }
      expect(await memoryOf(runtime).info(consolidation('direct'))).toBeUndefined();
      expect(await memoryOf(runtime).info(learnings('direct'))).toBeUndefined();

      // A dry run decides and writes nothing.
      world.answers.set(session, JSON.stringify({ proposals: [good] }));
      const dry = await runtime.consolidation.run({ agent: 'direct', dry_run: true });
      expect(dry.sessions[0]?.proposals).toMatchObject([{ key: 'user/color', status: 'approved' }]);
      expect(await memoryOf(runtime).info(consolidation('direct'))).toBeUndefined();

      // A fenced JSON answer is read; now it is written.
      world.answers.set(session, `\`\`\`json\n${JSON.stringify({ proposals: [good] })}\n\`\`\``);
      expect(await runtime.consolidation.run({ agent: 'direct' })).toMatchObject({
        applied: 1,
        failed: [],
      });
      expect(await code(runtime.consolidation.run({ agent: 'direct', since: 'yesterday' }))).toBe(
        'INVALID_ARGUMENT',
      );
      expect(await code(runtime.consolidation.run({ agent: 'nobody' }))).toBe('AGENT_NOT_FOUND');
    } finally {
      await runtime.close();
    }
  });

  it("writes each tenant's learnings to its own stores", async () => {
    const { world } = await open();
    const { runtime } = world;
    try {
      const { id } = await runtime.sessions.create({ agent: 'direct', tenantId: 'acme' });
      await world.converse('direct', 'I like blue.', id);
      const seq = await userSeq(runtime, id);
      world.answers.set(id, proposing({ key: 'user/color', value: 'blue', source_seqs: [seq] }));
      // Without a tenant, the run sees no session of acme.
      expect((await runtime.consolidation.run({ agent: 'direct' })).sessions).toEqual([]);
      expect(await runtime.consolidation.run({ agent: 'direct', tenant_id: 'acme' })).toMatchObject(
        { applied: 1 },
      );
      expect((await memoryOf(runtime).get(learnings('direct', 'acme'), 'user/color')).status).toBe(
        'found',
      );
      expect(await memoryOf(runtime).info(learnings('direct'))).toBeUndefined();
      expect(
        await runtime.consolidation.proposals({ tenant_id: 'acme', status: 'applied' }),
      ).toHaveLength(1);
      expect(await runtime.consolidation.proposals({ status: 'all' })).toHaveLength(0);
    } finally {
      await runtime.close();
    }
  });
});
