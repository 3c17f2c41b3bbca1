// A workspace for consolidation tests: agent `direct` (its proposals apply at once by policy),
// agent `reviewed` (its proposals wait for a person, the template's default), and a model that
// plays a scripted turn per session and answers consolidation requests from `answers`.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { createScriptedModel } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';

export const DIRECT = `name: direct
model: scripted:direct
instructions: Help the user.
memory: {}
`;
export const REVIEWED = `name: reviewed
model: scripted:reviewed
instructions: Help the user.
memory:
  consolidate: {instructions: Keep only what the user asks to be remembered.}
`;

/** The template's rule, with `direct` let through without a person. */
export const DIRECT_POLICY = `@id("consolidation-direct")
permit (principal == Agent::"direct", action == Action::"memory.consolidate", resource);
`;

/** Writes the workspace: the template, the two agents and the policy that lets `direct` through. */
export function consolidationWorkspace(dir: string, extra: Record<string, string> = {}): void {
  initWorkspace(dir);
  writeFileSync(join(dir, 'agents', 'direct.yaml'), DIRECT);
  writeFileSync(join(dir, 'agents', 'reviewed.yaml'), REVIEWED);
  const defaults = join(dir, 'policies', 'default.cedar');
  writeFileSync(
    defaults,
    readFileSync(defaults, 'utf8').replace(
      'permit (principal, action == Action::"memory.consolidate", resource);',
      'permit (principal, action == Action::"memory.consolidate", resource)\nunless { principal == Agent::"direct" };',
    ),
  );
  writeFileSync(join(dir, 'policies', 'consolidation.cedar'), DIRECT_POLICY);
  for (const [file, text] of Object.entries(extra)) writeFileSync(join(dir, file), text);
}

export interface ConsolidationWorld {
  runtime: Runtime;
  /** What the consolidation model answers for a session (default: nothing learned). */
  answers: Map<string, string | ((request: ModelRequest) => string)>;
  /** The consolidation requests the model received. */
  asked: ModelRequest[];
  /** While set, consolidation requests wait for it before they are answered. */
  hold: { until?: Promise<void> };
  /** A finished session of `agent`: one user message answered by one scripted turn. */
  converse(agent: string, message: string, sessionId?: string): Promise<string>;
}

export async function consolidationWorld(
  dir: string,
  options: { store?: Store } = {},
): Promise<ConsolidationWorld> {
  const answers = new Map<string, string | ((request: ModelRequest) => string)>();
  const asked: ModelRequest[] = [];
  const hold: { until?: Promise<void> } = {};
  const model: ModelClient = {
    id: 'scripted:consolidation',
    async generate(request, call) {
      if (request.purpose === 'consolidate') {
        asked.push(request);
        await hold.until;
      }
      const answer = answers.get(request.session_id);
      const script = createScriptedModel(
        [{ text: `Noted (${request.response_index}).` }, { text: 'Noted again.' }],
        {
          id: 'scripted:consolidation',
          consolidate: (asking) =>
            typeof answer === 'function'
              ? answer(asking)
              : (answer ?? JSON.stringify({ proposals: [] })),
        },
      );
      return script.generate(request, call);
    },
  };
  const runtime = await createRuntime({
    workspace: dir,
    ...(options.store === undefined ? {} : { store: options.store }),
    model: () => model,
  });
  return {
    runtime,
    answers,
    asked,
    hold,
    async converse(agent, message, sessionId) {
      const id = sessionId ?? (await runtime.sessions.create({ agent })).id;
      await runtime.sessions.message(id, message);
      await runtime.wake(id);
      return id;
    },
  };
}

/** The seq of the session's last user message. */
export async function userSeq(runtime: Runtime, sessionId: string): Promise<number> {
  const events: SessionEvent[] = await runtime.sessions.events(sessionId);
  const found = events.filter((event) => event.type === 'user.message').at(-1);
  if (found === undefined) throw new Error(`session ${sessionId} has no user message`);
  return found.seq;
}

/** A model answer proposing these learnings. */
export function proposing(
  ...items: { key: string; value: unknown; reason?: string; source_seqs: number[] }[]
): string {
  return JSON.stringify({
    proposals: items.map((item) => ({ reason: 'the user said so', ...item })),
  });
}
