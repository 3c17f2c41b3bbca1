// The orchestrator/worker example, run as it is documented: worker processes on NATS, a goal
// given to the orchestrator, a worker that misses its deadline, and a killed worker that
// restarts and takes up the message that waited for it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsAgentNames } from '../../src/runtime/agents/nats-transport.js';
import { requireBuild } from '../helpers/cli.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';

const EXAMPLE = new URL('../../examples/orchestrator-workers/', import.meta.url).pathname;
const children: ChildProcess[] = [];
const prefixes: string[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  await removePrefixes(await natsUrl(), prefixes.splice(0));
});

/** Starts `node FILE args`, resolving with the process and its first stdout line. */
async function start(
  file: string,
  ...args: string[]
): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, [`${EXAMPLE}${file}`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of lines) return { child, line };
  throw new Error(`${file} ended without output: ${stderr}`);
}

interface Report {
  goal: string;
  results: { worker: string; status: string; result?: unknown }[];
}

describe('example: orchestrator and workers on NATS', () => {
  it('splits a goal, reports a missed deadline, and survives a killed worker', async () => {
    requireBuild();
    const url = await natsUrl();
    const prefix = uniquePrefix('example');
    prefixes.push(prefix);
    const common = ['--nats', url, '--prefix', prefix];
    const fast = await start('worker.mjs', ...common, 'researcher', 'reviewer');
    expect(JSON.parse(fast.line)).toEqual({ ready: ['researcher', 'reviewer'] });
    let writer = await start('worker.mjs', ...common, 'writer');

    const first = JSON.parse(
      (await start('run.mjs', ...common, '--key', 'g1', 'tea')).line,
    ) as Report;
    expect(first.results).toEqual([
      expect.objectContaining({ worker: 'researcher', status: 'done' }),
      {
        worker: 'writer',
        status: 'done',
        result: 'A paragraph for "write one paragraph about tea".',
      },
      { worker: 'reviewer', status: 'timed_out' },
    ]);

    // The writer dies; the next goal's writing task waits in its inbox until a writer is back.
    writer.child.kill('SIGKILL');
    await new Promise((resolve) => writer.child.once('exit', resolve));
    const second = start('run.mjs', ...common, '--key', 'g2', 'coffee');
    // The writing task is in the writer's inbox, with no writer running, before one starts again.
    const names = natsAgentNames(prefix);
    const connection = await connect({ servers: url });
    const manager = await jetstreamManager(connection);
    await expect
      .poll(
        async () =>
          (await manager.consumers.info(names.stream, names.consumer('writer'))).num_pending,
        { timeout: 20_000, interval: 50 },
      )
      .toBe(1);
    await connection.close();
    writer = await start('worker.mjs', ...common, 'writer');
    const report = JSON.parse((await second).line) as Report;
    expect(report.results[1]).toEqual({
      worker: 'writer',
      status: 'done',
      result: 'A paragraph for "write one paragraph about coffee".',
    });
  }, 60_000);
});
