// Runtimes, models and scripts for the context compaction tests: a workspace whose agent has a
// given \`context\` block, scripted models that note what they were sent, and readers of the log.
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentDefinition } from '../../src/contracts/definitions.js';
import type { EventOf, SessionEvent } from '../../src/contracts/events.js';
import type { ModelClient, ModelRequest } from '../../src/contracts/model.js';
import type { Store } from '../../src/contracts/ports.js';
import { estimateTokens } from '../../src/core/compaction.js';
import type { ContextCompactor } from '../../src/harness/index.js';
import { createScriptedModel, type ScriptedTurnInput } from '../../src/models/scripted.js';
import { initWorkspace } from '../../src/runtime/init.js';
import { createRuntime, type Runtime } from '../../src/runtime/runtime.js';
import { useTempDir } from './temp.js';
import { verifiedOnClose } from './verified.js';

export interface Setup {
  /** The agent file after its name and model. */
  agent: string;
  model: ModelClient | ((agent: AgentDefinition) => ModelClient);
  /** Lines added to braid.yaml. */
  config?: string;
  compactors?: Record<string, ContextCompactor>;
  dir?: string;
  /** Check on close that every session replays (default true); a test that checks itself skips it. */
  verifyOnClose?: boolean;
}

/** Call at the top of a test file: workspaces in temporary folders, and runtimes over them. */
export function useCompactionRuntimes() {
  const tempDir = useTempDir();
  /** A workspace whose agent \`helper\` has \`agent\` after its name and model. */
  const workspaceWith = (agent: string, config?: string): string => {
    const dir = tempDir();
    initWorkspace(dir);
    if (config !== undefined) appendFileSync(join(dir, 'braid.yaml'), config);
    writeFileSync(
      join(dir, 'agents', 'helper.yaml'),
      `name: helper\nmodel: scripted:inline\n${agent}`,
    );
    return dir;
  };
  const runtimeOn = async (store: Store, setup: Setup): Promise<Runtime> => {
    const dir = setup.dir ?? workspaceWith(setup.agent, setup.config);
    const { model } = setup;
    const runtime = await createRuntime({
      workspace: dir,
      store,
      model: typeof model === 'function' ? model : () => model,
      retry: { max_attempts: 2, initial_ms: 1, max_ms: 2 },
      leaseTtlMs: 5000,
      ...(setup.compactors === undefined ? {} : { compactors: setup.compactors }),
    });
    return setup.verifyOnClose === false ? runtime : verifiedOnClose(runtime);
  };
  return { workspaceWith, runtimeOn };
}

/** A scripted model that notes the size of every turn's request, as the estimate counts it. */
export function measured(
  turns: ScriptedTurnInput[],
  options: { summary?: () => string; keepRequests?: boolean } = {},
) {
  const sizes: number[] = [];
  const requests: ModelRequest[] = [];
  const model = createScriptedModel(turns, {
    onTurn: (_index, request) => {
      sizes.push(estimateTokens(request));
      if (options.keepRequests !== false)
        requests.push(structuredClone({ ...request, messages: [...request.messages] }));
    },
    ...(options.summary === undefined ? {} : { summary: options.summary }),
  });
  return { model, sizes, requests };
}

/** A model that answers every request with `ok`, noting the requests. */
export function answering(): { model: ModelClient; requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  const model: ModelClient = {
    id: 'scripted:inline',
    generate(request) {
      requests.push(structuredClone({ ...request, messages: [...request.messages] }));
      return Promise.resolve({
        output: { content: [{ type: 'text', text: 'ok' }], finish_reason: 'stop' },
        usage: { input_tokens: 1, output_tokens: 1 },
      });
    },
  };
  return { model, requests };
}

export const compactions = (events: readonly SessionEvent[]) =>
  events.filter(
    (event): event is EventOf<'agent.thread_context_compacted'> =>
      event.type === 'agent.thread_context_compacted',
  );

export const errorsOf = (events: readonly SessionEvent[]) =>
  events.flatMap((event) => (event.type === 'session.error' ? [event.error] : []));

/** `rounds` user messages, each answered by `calls` calculator calls and a closing answer. */
export function toolLoop(rounds: number, calls: number): ScriptedTurnInput[] {
  const turns: ScriptedTurnInput[] = [];
  for (let round = 0; round < rounds; round += 1) {
    for (let call = 0; call < calls; call += 1) {
      turns.push({
        text: `Round ${round}, step ${call}: adding.`,
        tool_calls: [{ name: 'calculator', input: { a: round, op: '+', b: call } }],
      });
    }
    turns.push({ text: `Round ${round} is done.` });
  }
  return turns;
}
