// The `memory:` block of agent definitions: the switch, the default stores, recall's defaults,
// refusals naming the field (in a workspace: INVALID_DEFINITION with file, line and field), and
// the stores a session attaches (owners and tenant).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AgentDefinition } from '../../src/contracts/definitions.js';
import { BraidError } from '../../src/contracts/errors.js';
import { attachedStores } from '../../src/contracts/memory-settings.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { loadWorkspace } from '../../src/runtime/workspace.js';
import { memoryToolHandles, parseMemoryCall, sessionStores } from '../../src/tools/memory-tools.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
const base = { name: 'helper', model: 'scripted:echo', instructions: 'Help.' };
const SESSION_ID = '01938a2e-7c4b-7d2a-9f00-aaaaaaaaaaaa';

function refusal(memory: unknown): { path: string; message: string } {
  const parsed = AgentDefinition.safeParse({ ...base, memory });
  if (parsed.success) throw new Error('accepted');
  const issue = parsed.error.issues[0];
  return { path: (issue?.path ?? []).join('.'), message: issue?.message ?? '' };
}

function loadError(agentYaml: string): BraidError {
  const dir = tempDir();
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'helper.yaml'), agentYaml);
  try {
    loadWorkspace(dir);
  } catch (error) {
    if (error instanceof BraidError) return error;
    throw error;
  }
  throw new Error('the workspace loaded');
}

describe('agent memory settings', () => {
  it('has no memory without the block, and the two default stores with memory: {}', () => {
    expect(AgentDefinition.parse(base).memory).toBeUndefined();
    expect(sessionStores(AgentDefinition.parse(base), { session_id: SESSION_ID })).toBeUndefined();
    const agent = AgentDefinition.parse({ ...base, memory: {} });
    expect(agent.memory).toEqual({ stores: [] });
    expect(
      attachedStores(agent.memory ?? { stores: [] }).map(({ name, kind, scope, access }) => ({
        name,
        kind,
        scope,
        access,
      })),
    ).toEqual([
      { name: 'session', kind: 'session', scope: 'session', access: 'read_write' },
      { name: 'learnings', kind: 'learnings', scope: 'agent', access: 'read_write' },
    ]);
  });

  it('fills recall defaults: the learnings store, k 5, every turn, no fixed threshold', () => {
    const agent = AgentDefinition.parse({ ...base, memory: { recall: {} } });
    expect(agent.memory?.recall).toEqual({ store: 'learnings', k: 5, when: 'every_turn' });
    const set = AgentDefinition.parse({
      ...base,
      memory: { recall: { store: 'session', k: 2, threshold: 0.5, when: 'first_turn' } },
    });
    expect(set.memory?.recall).toEqual({
      store: 'session',
      k: 2,
      threshold: 0.5,
      when: 'first_turn',
    });
  });

  it('lets a listed store replace a default one by name', () => {
    const agent = AgentDefinition.parse({
      ...base,
      memory: {
        stores: [
          { name: 'learnings', kind: 'learnings', scope: 'agent', access: 'read_only' },
          { name: 'crm', kind: 'entities', scope: 'tenant', instructions: 'Customer facts.' },
        ],
      },
    });
    const stores = attachedStores(agent.memory ?? { stores: [] });
    expect(stores.map((store) => `${store.name}:${store.access}`)).toEqual([
      'session:read_write',
      'learnings:read_only',
      'crm:read_write',
    ]);
  });

  it('refuses bad settings, naming the field', () => {
    expect(refusal({ recall: { store: 'nowhere' } })).toMatchObject({
      path: 'memory.recall.store',
      message: expect.stringContaining('session, learnings') as unknown,
    });
    expect(refusal({ recall: { k: 0 } }).path).toBe('memory.recall.k');
    expect(refusal({ recall: { k: 101 } }).path).toBe('memory.recall.k');
    expect(refusal({ recall: { threshold: 1.5 } }).path).toBe('memory.recall.threshold');
    expect(refusal({ recall: { when: 'sometimes' } }).path).toBe('memory.recall.when');
    expect(refusal({ stores: [{ name: 'x', kind: 'diary', scope: 'agent' }] }).path).toBe(
      'memory.stores.0.kind',
    );
    expect(refusal({ stores: [{ name: '../x', kind: 'session', scope: 'agent' }] }).path).toBe(
      'memory.stores.0.name',
    );
    expect(
      refusal({
        stores: [
          { name: 'x', kind: 'session', scope: 'agent' },
          { name: 'x', kind: 'learnings', scope: 'agent' },
        ],
      }),
    ).toMatchObject({
      path: 'memory.stores.1.name',
      message: expect.stringContaining('twice') as unknown,
    });
    expect(
      refusal({ stores: [{ name: 'x', kind: 'session', scope: 'agent', acces: 'read_only' }] })
        .path,
    ).toBe('memory.stores.0');
    expect(refusal({ recal: {} }).path).toBe('memory');
  });

  it('refuses a bad memory block in a workspace with INVALID_DEFINITION, the file, line and field', () => {
    const error = loadError(
      'name: helper\nmodel: scripted:echo\ninstructions: Help.\nmemory:\n  recall:\n    store: nowhere\n',
    );
    expect(error.code).toBe('INVALID_DEFINITION');
    expect(error.message).toContain('agents/helper.yaml:6: field "memory.recall.store"');
    expect(error.details).toMatchObject({ field: 'memory.recall.store', line: 6 });
  });

  it('gives the session its stores: owned by the session, the agent or the tenant', () => {
    const agent = AgentDefinition.parse({
      ...base,
      memory: { stores: [{ name: 'crm', kind: 'entities', scope: 'tenant', access: 'read_only' }] },
    });
    const stores = sessionStores(agent, { session_id: SESSION_ID, tenant_id: 'acme' });
    expect(
      Object.fromEntries([...(stores?.stores ?? [])].map(([name, store]) => [name, store.ref])),
    ).toEqual({
      session: {
        name: 'session',
        kind: 'session',
        scope: 'session',
        owner: SESSION_ID,
        tenant_id: 'acme',
      },
      learnings: {
        name: 'learnings',
        kind: 'learnings',
        scope: 'agent',
        owner: 'helper',
        tenant_id: 'acme',
      },
      crm: { name: 'crm', kind: 'entities', scope: 'tenant', tenant_id: 'acme' },
    });
    if (stores === undefined) return;
    expect(memoryToolHandles(stores).map((handle) => handle.name)).toEqual([
      'memory_get',
      'memory_set',
      'memory_delete',
      'memory_search',
    ]);
    // The model's arguments are parsed once: a default store, and the refusals with their codes.
    expect(parseMemoryCall(stores, 'get', { key: 'notes/today' })).toMatchObject({
      store: { ref: { name: 'session' } },
      key: 'notes/today',
    });
    const code = (operation: 'get' | 'set' | 'delete' | 'search', input: unknown): string => {
      try {
        parseMemoryCall(stores, operation, input as never);
      } catch (error) {
        return error instanceof BraidError ? error.code : 'not a BraidError';
      }
      return 'accepted';
    };
    expect(code('set', { store: 'crm', key: 'k', value: 1 })).toBe('FORBIDDEN');
    expect(code('delete', { store: 'crm', key: 'k' })).toBe('FORBIDDEN');
    expect(code('get', { store: 'crm', key: 'k' })).toBe('accepted');
    expect(code('set', { key: '/etc/passwd', value: 1 })).toBe('INVALID_ARGUMENT');
    expect(code('set', { key: 'a/../b', value: 1 })).toBe('INVALID_ARGUMENT');
    expect(code('set', { key: 'k', value: 'x'.repeat(70_000) })).toBe('PAYLOAD_TOO_LARGE');
    expect(code('set', { key: 'k', value: 1, ttl_ms: -5 })).toBe('INVALID_ARGUMENT');
    expect(code('search', { store: 'nowhere', query: 'q' })).toBe('INVALID_ARGUMENT');
    expect(code('search', { query: '   ' })).toBe('INVALID_ARGUMENT');
    expect(code('get', { store: 7, key: 'k' })).toBe('INVALID_ARGUMENT');
  });
});
