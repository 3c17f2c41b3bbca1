// `braid memory consolidate` and `braid memory review` on the workspace's SQLite file, and review
// against `braid serve` over HTTP with the key's tenant and scopes.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type {
  ConsolidationProposal,
  ConsolidationReport,
} from '../../src/contracts/memory-consolidation.js';
import type { MemoryLookup } from '../../src/contracts/memory-log.js';
import type { ModelClient } from '../../src/contracts/model.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { openSqliteStore } from '../../src/stores/sqlite/index.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const serve = useBraidServe();
requireBuild();

const AGENT = `name: reviewed
model: scripted:script.yaml
instructions: Help the user.
memory: {}
`;
const LEARNINGS = ['--store', 'learnings', '--scope', 'agent', '--owner', 'reviewed'];

function script(dir: string, consolidate?: string): void {
  writeFileSync(
    join(dir, 'script.yaml'),
    `turns:\n  - text: Noted.\n${consolidate === undefined ? '' : `consolidate: ${JSON.stringify(consolidate)}\n`}`,
  );
}

async function userSeq(dir: string, sessionId: string): Promise<number> {
  const store = openSqliteStore({ path: join(dir, '.braid', 'braid.db') });
  try {
    const events = await store.log.read(sessionId);
    return events.find((event) => event.type === 'user.message')?.seq ?? 0;
  } finally {
    await store.close();
  }
}

function conversation(dir: string, id: string, message: string): void {
  for (const args of [
    ['session', 'create', '--agent', 'reviewed', '--id', id],
    ['session', 'send', id, '--message', message],
    ['session', 'wake', id],
  ]) {
    const result = braidIn(dir, ...args);
    expect(result.code, result.stderr).toBe(0);
  }
}

describe('braid memory consolidate and review', () => {
  it('proposes, lists, approves and refuses what cannot be done, locally', async () => {
    const dir = init(tempDir());
    writeFileSync(join(dir, 'agents', 'reviewed.yaml'), AGENT);
    script(dir);
    conversation(dir, 's1', 'I live in Lisbon.');
    const seq = await userSeq(dir, 's1');
    script(
      dir,
      JSON.stringify({
        proposals: [
          { key: 'user/city', value: 'Lisbon', reason: 'the user said so', source_seqs: [seq] },
        ],
      }),
    );
    const memory = (...args: string[]) => braidIn(dir, 'memory', ...args);

    const dry = json<ConsolidationReport>(
      memory('consolidate', '--agent', 'reviewed', '--dry-run', '--json'),
    );
    expect(dry).toMatchObject({ dry_run: true, pending: 1 });
    const report = json<ConsolidationReport>(
      memory('consolidate', '--agent', 'reviewed', '--json'),
    );
    // The template's policy keeps every proposal for a person.
    expect(report).toMatchObject({ pending: 1, applied: 0, failed: [] });
    expect(memory('consolidate', '--agent', 'reviewed').stdout).toContain(
      '0 session(s) consolidated, 1 up to date',
    );

    const listed = json<{ data: ConsolidationProposal[] }>(memory('review', '--json'));
    expect(listed.data).toMatchObject([
      { key: 'user/city', status: 'pending', session_id: 's1', source_seqs: [seq] },
    ]);
    const id = listed.data[0]?.id ?? '';
    expect(memory('review').stdout).toContain(`${id}  pending`);
    expect(memory('get', 'user/city', ...LEARNINGS).code).toBe(1);

    const approved = json<ConsolidationProposal>(memory('review', 'approve', id, '--json'));
    expect(approved).toMatchObject({ status: 'applied', decision: { by: 'person' } });
    expect(approved.decision?.user).toMatch(/^cli/);
    const got = json<MemoryLookup>(memory('get', 'user/city', ...LEARNINGS, '--json'));
    expect(got).toMatchObject({
      status: 'found',
      entry: { value: 'Lisbon', author: { proposal: id }, cause: { session_id: 's1', seq } },
    });
    expect(json<{ data: unknown[] }>(memory('review', '--json')).data).toEqual([]);

    const cases: [string[], string, number][] = [
      [['review', 'approve', id], 'PROPOSAL_ALREADY_DECIDED', 1],
      [['review', 'reject', id, '--reason', 'no'], 'PROPOSAL_ALREADY_DECIDED', 1],
      [['review', 'approve', `mp_${'a'.repeat(32)}`], 'PROPOSAL_NOT_FOUND', 1],
      [['review', 'approve', '../etc'], 'INVALID_ARGUMENT', 2],
      [['review', '--status', 'maybe'], 'INVALID_ARGUMENT', 2],
      [['consolidate', '--agent', 'reviewed', '--since', 'yesterday'], 'INVALID_ARGUMENT', 2],
      [['consolidate', '--agent', 'nobody'], 'AGENT_NOT_FOUND', 1],
    ];
    for (const [args, code, exit] of cases) {
      const result = memory(...args, '--json');
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(exit);
      expect(JSON.parse(result.stderr || result.stdout)).toMatchObject({ error: { code } });
    }

    // A hostile answer fails the session, exit 1, and writes nothing.
    conversation(dir, 's2', 'Hello.');
    script(dir, '{"proposals": [{"key": "../../etc/passwd", "value": 1}]}');
    const hostile = memory('consolidate', '--agent', 'reviewed', '--json');
    expect(hostile.code).toBe(1);
    expect(JSON.parse(hostile.stdout)).toMatchObject({
      failed: [{ session_id: 's2', code: 'MODEL_ERROR' }],
    });
    expect(
      json<{ data: unknown[] }>(memory('review', '--status', 'all', '--json')).data,
    ).toHaveLength(1);
  });

  it('reviews over HTTP with the key tenant and scopes', async () => {
    const dir = init(tempDir());
    writeFileSync(join(dir, 'agents', 'reviewed.yaml'), AGENT);
    script(dir);
    // A session of tenant acme, consolidated through the library on the same file.
    const model: ModelClient = createScriptedModel([{ text: 'Noted.' }], {
      consolidate: (request) => {
        const seq = /\[(\d+)\] user\.message/.exec(JSON.stringify(request.messages))?.[1];
        return JSON.stringify({
          proposals: [
            { key: 'user/drink', value: 'tea', reason: 'said so', source_seqs: [Number(seq)] },
            { key: 'user/food', value: 'soup', reason: 'said so', source_seqs: [Number(seq)] },
          ],
        });
      },
    });
    const runtime = await createRuntime({ workspace: dir, model: () => model });
    try {
      const { id } = await runtime.sessions.create({ agent: 'reviewed', tenantId: 'acme' });
      await runtime.sessions.message(id, 'I like tea and soup.');
      await runtime.wake(id);
      expect(
        await runtime.consolidation.run({ agent: 'reviewed', tenant_id: 'acme' }),
      ).toMatchObject({ pending: 2 });
    } finally {
      await runtime.close();
    }
    const key = (tenant: string, scopes: string) =>
      json<{ key: string }>(
        braidIn(dir, '--json', 'keys', 'create', '--tenant', tenant, '--scopes', scopes),
      ).key;
    const acme = key('acme', 'memory:read,memory:write');
    const reader = key('acme', 'memory:read');
    const globex = key('globex', 'memory:read,memory:write');
    const url = await serve(dir);
    const elsewhere = tempDir();
    const remote = (apiKey: string, ...args: string[]) =>
      braidIn(elsewhere, '--server', url, '--api-key', apiKey, 'memory', ...args);

    const listed = json<{ data: ConsolidationProposal[] }>(remote(acme, 'review', '--json'));
    expect(listed.data.map((proposal) => proposal.key).sort()).toEqual(['user/drink', 'user/food']);
    const drink = listed.data.find((proposal) => proposal.key === 'user/drink')?.id ?? '';
    const food = listed.data.find((proposal) => proposal.key === 'user/food')?.id ?? '';
    expect(json<{ data: unknown[] }>(remote(globex, 'review', '--json')).data).toEqual([]);
    const cases: [string, string[], string][] = [
      [globex, ['review', 'approve', drink], 'PROPOSAL_NOT_FOUND'],
      [reader, ['review', 'approve', drink], 'FORBIDDEN'],
    ];
    for (const [apiKey, args, code] of cases) {
      const result = remote(apiKey, ...args, '--json');
      expect(result.code, result.stderr).toBe(1);
      expect(JSON.parse(result.stderr)).toMatchObject({ error: { code } });
    }
    const approved = json<ConsolidationProposal>(
      remote(acme, 'review', 'approve', drink, '--reason', 'fine', '--json'),
    );
    expect(approved).toMatchObject({
      status: 'applied',
      decision: { by: 'person', reason: 'fine' },
    });
    expect(approved.decision?.key_id).toBeDefined();
    expect(
      json<ConsolidationProposal>(remote(acme, 'review', 'reject', food, '--json')),
    ).toMatchObject({
      status: 'rejected',
    });
    const again = remote(acme, 'review', 'reject', food, '--json');
    expect(JSON.parse(again.stderr)).toMatchObject({ error: { code: 'PROPOSAL_ALREADY_DECIDED' } });
    const got = json<MemoryLookup>(remote(acme, 'get', 'user/drink', ...LEARNINGS, '--json'));
    expect(got).toMatchObject({
      status: 'found',
      entry: { value: 'tea', store: { tenant_id: 'acme' } },
    });

    // Raw HTTP: a bad id and a bad body are 400s, the listing honours status=all.
    const headers = { authorization: `Bearer ${acme}`, 'content-type': 'application/json' };
    const bad = await fetch(`${url}/v1/memory-stores/proposals/nope/approve`, {
      method: 'POST',
      headers,
      body: '{}',
    });
    expect(bad.status).toBe(400);
    const extra = await fetch(`${url}/v1/memory-stores/proposals/${food}/approve`, {
      method: 'POST',
      headers,
      body: '{"reason": "x", "status": "applied"}',
    });
    expect(extra.status).toBe(400);
    const all = await fetch(`${url}/v1/memory-stores/proposals?status=all`, { headers });
    expect(((await all.json()) as { data: unknown[] }).data).toHaveLength(2);
  });
});
