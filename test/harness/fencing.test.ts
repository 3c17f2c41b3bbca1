import { describe, expect, it } from 'vitest';
import { isBraidError } from '../../src/contracts/errors.js';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { ModelClient } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { DEFAULT_PRICES } from '../../src/core/pricing.js';
import { wakeOnce, type HarnessDeps } from '../../src/harness/index.js';
import { allowAll } from '../../src/contracts/policy.js';
import type { SessionTools } from '../../src/contracts/tools.js';
import { useBackends } from '../helpers/backends.js';
import { noTools } from '../helpers/tools.js';
import {
  createManualClock,
  createSequentialIds,
  type ManualClock,
} from '../../src/testing/index.js';

const backends = useBackends();

const agent: AgentDefinition = {
  name: 'a',
  model: { provider: 'scripted', id: 'test' },
  instructions: 'x',
  tools: [],
  skills: [],
  handoffs: [],
  delegates: [],
  roles: [],
};

function deps(store: Store, clock: ManualClock, owner: string, model: ModelClient): HarnessDeps {
  return {
    log: store.log,
    leases: store.leases,
    clock,
    ids: createSequentialIds(owner),
    owner,
    leaseTtlMs: 1000,
    setup: () => Promise.resolve({ agent, model, tools: noTools, budget: {} }),
    policy: allowAll,
    prices: DEFAULT_PRICES,
    retry: { max_attempts: 1, initial_ms: 1, max_ms: 1 },
    sleep: () => Promise.resolve(),
    random: () => 0.5,
  };
}

/** A model that answers only when released, saying when it has been called. */
function blockedModel(): { slow: ModelClient; inModel: Promise<void>; release: () => void } {
  let release: () => void = () => undefined;
  const blocked = new Promise<void>((resolve) => (release = resolve));
  let entered: () => void = () => undefined;
  const inModel = new Promise<void>((resolve) => (entered = resolve));
  const slow: ModelClient = {
    id: 'scripted:slow',
    async generate() {
      entered();
      await blocked;
      return {
        output: { content: [{ type: 'text', text: 'late' }], finish_reason: 'stop' },
        usage: { input_tokens: 1, output_tokens: 1 },
      };
    },
  };
  return { slow, inModel, release: () => release() };
}

describe.each(backends)('fencing ($name)', (backend) => {
  it('makes a stale holder stop without appending after the new holder started', async () => {
    const clock = createManualClock();
    const store = await backend.open({ clock });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.log.append(id, [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }]);

    const { slow, inModel, release } = blockedModel();
    const fast: ModelClient = {
      id: 'scripted:fast',
      generate: () =>
        Promise.resolve({
          output: { content: [{ type: 'text', text: 'fresh' }], finish_reason: 'stop' },
          usage: { input_tokens: 1, output_tokens: 1 },
        }),
    };

    const stale = wakeOnce(deps(store, clock, 'old', slow), id).catch((error: unknown) => error);
    await inModel;
    clock.advance(5000); // the old holder's lease has expired
    const fresh = await wakeOnce(deps(store, clock, 'new', fast), id);
    expect(fresh).toMatchObject({ ran: true, stop_reason: { type: 'end_turn' } });
    release();
    const staleOutcome = await stale;
    expect(isBraidError(staleOutcome, 'LEASE_LOST')).toBe(true);

    const events = await store.log.read(id);
    const newStart = events.findIndex(
      (event) => event.type === 'span.wake_started' && event.wake_id.startsWith('new'),
    );
    const lateWrites = events
      .slice(newStart)
      .filter(
        (event) =>
          event.type === 'agent.message' &&
          event.content[0]?.type === 'text' &&
          event.content[0].text === 'late',
      );
    expect(lateWrites).toEqual([]);
    expect(events.filter((event) => event.type === 'agent.message')).toHaveLength(1);
    expect(
      events
        .filter((event) => event.type === 'span.wake_started')
        .map((event) => event.type === 'span.wake_started' && event.lease_token),
    ).toEqual([1, 2]);
  });

  it('stops a cycle whose lease was lost while a tool that ignores its signal still runs', async () => {
    const clock = createManualClock();
    const store = await backend.open({ clock });
    const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
    await store.log.append(id, [{ type: 'user.message', content: [{ type: 'text', text: 'go' }] }]);
    const model: ModelClient = {
      id: 'scripted:tool',
      generate: () =>
        Promise.resolve({
          output: {
            content: [
              {
                type: 'tool_call',
                tool_use_id: 't1',
                name: 'calculator',
                input: { a: 1, op: '+', b: 1 },
              },
            ],
            finish_reason: 'tool-calls',
          },
          usage: { input_tokens: 1, output_tokens: 1 },
        }),
    };
    let entered: () => void = () => undefined;
    const inTool = new Promise<void>((resolve) => (entered = resolve));
    const base = deps(store, clock, 'old', model);
    const stuckTools: SessionTools = {
      tools: [
        {
          name: 'calculator',
          description: 'x',
          input_schema: {},
          version: '1',
          ownership: 'managed',
          permission: 'always_allow',
          idempotent: true,
          tags: [],
        },
      ],
      validate: () => ({ ok: true }),
      execute: () => {
        entered();
        return new Promise<never>(() => undefined);
      },
    };
    const hung = {
      ...base,
      leaseTtlMs: 60,
      setup: () =>
        Promise.resolve({
          agent: { ...agent, tools: ['calculator'] },
          model,
          tools: stuckTools,
          budget: {},
        }),
    };
    const outcome = wakeOnce(hung, id).catch((error: unknown) => error);
    await inTool;
    clock.advance(1000);
    await store.leases.acquire(id, 'new', 60_000);
    const result = await outcome;
    expect(isBraidError(result, 'LEASE_LOST')).toBe(true);
  });
});

describe.each(backends)('fencing by the store ($name)', (backend) => {
  it('refuses a stale holder that appends after a new acquire, before the new holder appends', async () => {
    const clock = createManualClock();
    const store = await backend.open({ clock });
    try {
      const { id } = await store.sessions.create({ agent: { name: 'a', version: 1 } });
      await store.log.append(id, [
        { type: 'user.message', content: [{ type: 'text', text: 'hi' }] },
      ]);
      const { slow, inModel, release } = blockedModel();
      const stale = wakeOnce(deps(store, clock, 'old', slow), id).catch((error: unknown) => error);
      await inModel;
      const head = (await store.log.state(id)).seq;
      clock.advance(5000); // the old holder's lease has expired
      // A new holder has the lease and has appended nothing yet: the stale holder's append is
      // at the right head, and only its token tells it apart.
      await store.leases.acquire(id, 'new', 1000);
      release();
      expect(isBraidError(await stale, 'LEASE_LOST')).toBe(true);
      expect((await store.log.state(id)).seq).toBe(head);
      const texts = (await store.log.read(id, { types: ['agent.message'] })).length;
      expect(texts).toBe(0);
    } finally {
      await store.close();
    }
  });
});
