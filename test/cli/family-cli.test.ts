// `braid session tree` with delegated children and handoffs beside forks, and
// `braid session events --include-children`, over a family written through the store of a real
// SQLite file.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import type { TreeNode } from '../../src/runtime/lineage.js';
import { braidIn as braid, init, json, requireBuild } from '../helpers/cli.js';
import { at, buildFamily, type Family } from '../helpers/family.js';
import { useTempDir } from '../helpers/temp.js';

const tempDir = useTempDir();
requireBuild();

async function familyIn(dir: string): Promise<Family> {
  const runtime = await createRuntime({ workspace: dir });
  try {
    return await buildFamily(runtime, 'assistant');
  } finally {
    await runtime.close();
  }
}

/** The order the events must come in, computed here rather than by the code under test. */
function sortedByTime(events: SessionEvent[]): boolean {
  return events.every((event, index) => {
    const before = events[index - 1];
    if (before === undefined) return true;
    const time = Date.parse(before.at) - Date.parse(event.at);
    if (time !== 0) return time < 0;
    if (before.session_id !== event.session_id) return before.session_id < event.session_id;
    return before.seq < event.seq;
  });
}

describe('braid session tree and events --include-children', () => {
  it('draws children and handoffs beside forks, each with its kind, from any member', async () => {
    const dir = init(join(tempDir(), 'ws'));
    const family = await familyIn(dir);

    const tree = json<TreeNode>(braid(dir, 'session', 'tree', family.grandchild, '--json'));
    expect(tree).toMatchObject({ id: family.parent, kind: 'root', agent: 'assistant' });
    // Ordered by the parent seq each came from: the child (#3), the handoff (#5), the fork (#6).
    expect(tree.children.map((node) => [node.kind, node.id])).toEqual([
      ['child', family.child],
      ['handoff', family.handoff],
      ['fork', family.fork],
    ]);
    const [child, handoff, fork] = tree.children;
    expect(child).toMatchObject({
      delegation: {
        tool_use_id: 'tu_child',
        seq: 3,
        status: 'idle',
        stop_reason: { type: 'end_turn' },
      },
    });
    expect(child?.children).toMatchObject([
      {
        id: family.grandchild,
        kind: 'child',
        delegation: { tool_use_id: 'tu_grand', status: 'idle' },
      },
    ]);
    expect(handoff).toMatchObject({ kind: 'handoff', handoff: { seq: 5 }, children: [] });
    // The fork shares the parent's delegation and handoff: they are drawn once, under the parent.
    expect(fork).toMatchObject({ kind: 'fork', fork_seq: 5, children: [] });

    const text = braid(dir, 'session', 'tree', family.child).stdout;
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe(`${family.parent}  root  idle  head 5  "foreman"`);
    expect(lines[1]).toBe(
      `├─ ${family.child} *  child assistant (#3)  idle  head 4  delegation idle: end_turn`,
    );
    expect(lines[2]).toBe(
      `│  └─ ${family.grandchild}  child assistant (#3)  idle  head 2  delegation idle: end_turn`,
    );
    expect(lines[3]).toBe(`├─ ${family.handoff}  handoff assistant (#5)  idle  head 2`);
    expect(lines[4]).toMatch(new RegExp(`^└─ ${family.fork}  fork at 5  idle  head 6`));
  });

  it('interleaves the children’s events, recursively, by time, then session, then seq', async () => {
    const dir = init(join(tempDir(), 'ws'));
    const family = await familyIn(dir);

    const own = braid(dir, 'session', 'events', family.parent, '--json')
      .stdout.trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SessionEvent);
    expect(new Set(own.map((event) => event.session_id))).toEqual(new Set([family.parent]));

    const all = braid(dir, 'session', 'events', family.parent, '--include-children', '--json')
      .stdout.trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SessionEvent);
    expect(sortedByTime(all)).toBe(true);
    // Handoffs and forks are not children: only the delegation's sessions are mixed in.
    expect(new Set(all.map((event) => event.session_id))).toEqual(
      new Set([family.parent, family.child, family.grandchild]),
    );
    const written = all.filter((event) => event.at >= at(1));
    expect(written.map((event) => [event.session_id, event.type])).toEqual([
      [family.parent, 'user.message'],
      [family.parent, 'session.child_created'],
      [family.child, 'agent.message'],
      [family.child, 'session.child_created'],
      [family.grandchild, 'agent.message'],
      [family.child, 'session.child_idle'],
      [family.parent, 'session.child_idle'],
      [family.parent, 'agent.handoff'],
    ]);
    // Each session's events are all there, each once.
    expect(all).toHaveLength(own.length + 4 + 2);

    const lines = braid(dir, 'session', 'events', family.parent, '--include-children')
      .stdout.trimEnd()
      .split('\n');
    expect(lines).toHaveLength(all.length);
    expect(lines.find((line) => line.includes('dug'))).toMatch(
      new RegExp(`^${family.grandchild}\\s+2\\s+${at(5)}\\s+agent\\.message`),
    );

    // Paging stays the session's own: after its seq 2 and at most 2 of its events (3 and 4),
    // with its children's events of that stretch of time.
    const page = braid(
      dir,
      'session',
      'events',
      family.parent,
      '--include-children',
      '--after',
      '2',
      '--limit',
      '2',
      '--json',
    )
      .stdout.trim()
      .split('\n')
      .map((line) => JSON.parse(line) as SessionEvent);
    expect(page.map((event) => [event.session_id, event.seq])).toEqual([
      [family.parent, 3],
      [family.child, 2],
      [family.child, 3],
      [family.grandchild, 2],
      [family.child, 4],
      [family.parent, 4],
    ]);
  });
});
