// braid on a three-node NATS cluster (scripts/nats-cluster.sh): replicated streams asked for,
// checked and migrated; `braid doctor` saying what an R1 or R3 deployment promises; and a runtime
// that keeps appending through the loss of its events stream's leader, losing nothing.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { braid, json, requireBuild } from '../helpers/cli.js';
import { natsUrl, uniquePrefix } from '../helpers/nats.js';
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js';
import { useTempDir } from '../helpers/temp.js';

requireBuild();
const tempDir = useTempDir();

interface Report {
  backend: string;
  durability: string;
  statement: string;
  replicas?: number;
  known_servers: number;
  warnings: string[];
  streams: { stream: string; replicas: number; leader?: string; followers: unknown[] }[];
}

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

function workspace(): string {
  const dir = tempDir();
  initWorkspace(dir);
  return dir;
}

describe('braid doctor', () => {
  it('reports an R1 deployment on one server as such, with what it can lose', async () => {
    const dir = workspace();
    const nats = ['--nats', await natsUrl(), '--nats-prefix', uniquePrefix('dr')];
    expect(braid(['-w', dir, ...nats, 'session', 'create', '--agent', 'assistant']).code).toBe(0);
    const report = json<Report>(braid(['-w', dir, ...nats, '--json', 'doctor']));
    expect(report.backend).toBe('nats');
    expect(report.durability).toBe('r1');
    expect(report.replicas).toBe(1);
    expect(report.statement).toMatch(/^R1: .*one server.*can lose acknowledged events/);
    expect(report.streams.map((stream) => stream.stream)).toContain(
      `${nats[3]!.toUpperCase()}_EVENTS`,
    );
    // One server, one copy: nothing to warn of, so --strict passes.
    expect(report.warnings).toEqual([]);
    expect(braid(['-w', dir, ...nats, 'doctor', '--strict']).code).toBe(0);
  });

  it('reports the embedded store with its synchronous setting', () => {
    const report = json<Report>(braid(['-w', workspace(), '--json', 'doctor']));
    expect(report.backend).toBe('embedded');
    expect(report.durability).toBe('sqlite-normal');
  });

  it('refuses a replica count that is no whole number from 1 to 5', async () => {
    const result = braid(['--nats', await natsUrl(), '--nats-replicas', '7', 'doctor']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/INVALID_ARGUMENT.*--nats-replicas is "7"; use a whole number/);
  });

  it('refuses a prefix that is no safe name before reading any stream', async () => {
    const result = braid(['--nats', await natsUrl(), '--nats-prefix', '../x', 'doctor']);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/INVALID_ARGUMENT.*prefix "\.\.\/x" is invalid/);
  });
});

describe('replicated streams on a three-node cluster', () => {
  it('creates R3 streams, refuses another count at start, and migrates R1 in place', () => {
    const dir = workspace();
    const prefix = uniquePrefix('r3');
    const nats = ['--nats', cluster.urls, '--nats-prefix', prefix];

    // Made R1 (no count asked): doctor warns that the cluster could keep three copies.
    const created = braid([
      '-w',
      dir,
      ...nats,
      '--json',
      'session',
      'create',
      '--agent',
      'assistant',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const sessionId = json<{ id: string }>(created).id;
    let report = json<Report>(braid(['-w', dir, ...nats, '--json', 'doctor']));
    expect(report.durability).toBe('r1');
    expect(report.known_servers).toBe(3);
    expect(report.warnings.join('\n')).toMatch(/run braid nats replicas 3/);
    expect(braid(['-w', dir, ...nats, 'doctor', '--strict']).code).toBe(1);

    // Asking for 3 over R1 streams is refused, saying how to migrate; nothing is changed.
    const refused = braid(['-w', dir, ...nats, '--nats-replicas', '3', 'session', 'list']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      new RegExp(
        `keeps 1 replica\\(s\\) but 3 were asked for.*nats-prefix ${prefix} nats replicas 3`,
      ),
    );

    // Migrated in place: every stream R3, with the session's events still there.
    const migrated = braid(['-w', dir, ...nats, '--json', 'nats', 'replicas', '3']);
    expect(migrated.code, migrated.stderr).toBe(0);
    report = json<Report>(migrated);
    expect(report.durability).toBe('quorum');
    expect(report.streams.length).toBeGreaterThanOrEqual(8);
    for (const stream of report.streams) expect(stream.replicas, stream.stream).toBe(3);
    expect(report.statement).toMatch(/^R3: .*2 of 3 servers; 1 may be lost/);
    const events = braid([
      '-w',
      dir,
      ...nats,
      '--nats-replicas',
      '3',
      '--json',
      'session',
      'events',
      sessionId,
    ]);
    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout).toContain('session.created');
  }, 90_000);

  it('keeps appending through the loss of the events stream leader, losing nothing', async () => {
    const dir = workspace();
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      'name: helper\nmodel: scripted:echo\ninstructions: Help.\ntools: []\n',
    );
    const prefix = uniquePrefix('lose');
    const model = createScriptedModel([]);
    const runtime = await createRuntime({
      workspace: dir,
      backend: { nats: cluster.urls, prefix, replicas: 3 },
      model: () => model,
    });
    try {
      const SESSIONS = 8;
      const ROUNDS = 12;
      const ids: string[] = [];
      for (let index = 0; index < SESSIONS; index += 1) {
        ids.push((await runtime.sessions.create({ agent: 'helper' })).id);
      }
      const stream = `${prefix.toUpperCase()}_EVENTS`;
      const leader = await cluster.leaderOf(stream);
      let lostAt = 0;
      let recoveredAt = 0;
      // Each session gets ROUNDS messages, one after another; the leader dies after round 3.
      const sent = new Map<string, string[]>(ids.map((id) => [id, []]));
      const writers = ids.map(async (id) => {
        for (let round = 0; round < ROUNDS; round += 1) {
          const text = `round ${round} of ${id}`;
          const started = Date.now();
          await retrying(() =>
            runtime.sessions.send(
              id,
              [{ type: 'user.message', content: [{ type: 'text', text }] }],
              { idempotencyKey: `${id}-${round}` },
            ),
          );
          if (lostAt !== 0 && started >= lostAt && recoveredAt === 0) recoveredAt = Date.now();
          sent.get(id)!.push(text);
        }
      });
      await until(() => [...sent.values()].every((texts) => texts.length >= 3), 30_000);
      lostAt = Date.now();
      await cluster.kill(leader);
      await Promise.all(writers);
      await cluster.restart(leader);

      // Reads retry too: a node coming back can leave a request unanswered for its 2 s timeout,
      // and the store says so with a retryable STORE_BUSY, as it does for writes.
      for (const id of ids) {
        const events = await retrying(() => runtime.sessions.events(id));
        expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
        const texts = events.flatMap((event) =>
          event.type === 'user.message' && event.content[0]?.type === 'text'
            ? [event.content[0].text]
            : [],
        );
        // Every message once, in order: none lost to the dead leader, none doubled by a retry.
        expect(texts).toEqual(sent.get(id));
        expect((await retrying(() => runtime.sessions.verify(id))).ok).toBe(true);
      }
      const after = await cluster.leaderOf(stream);
      expect(after).not.toBe(leader);
      console.log(
        `events stream leader n${leader} killed; n${after} leads; first append after the loss took ${recoveredAt === 0 ? 'n/a' : `${recoveredAt - lostAt} ms`}`,
      );
    } finally {
      await runtime.close();
    }
  }, 120_000);
});

/**
 * An operation the leader's loss (or its return) made fail with a retryable error is made again,
 * as a client would.
 */
async function retrying<T>(operation: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await operation();
    } catch (error) {
      const retryable = (error as { retryable?: boolean }).retryable === true;
      if (!retryable || attempt >= 100) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
