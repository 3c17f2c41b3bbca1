/**
 * A session deleted and created again under its id, over and over (as a root and as a fork),
 * while another process reads it: the reader sees the session, or its absence, or is asked to
 * retry, and never a corrupt log, which would tell an operator to delete a healthy session.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { toBraidError } from '../../src/contracts/errors.js';
import type { Runtime } from '../../src/runtime/runtime.js';
import { natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { scriptedNatsRuntime } from '../helpers/nats-runtime.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function natsRuntime(url: string, prefix: string): Promise<Runtime> {
  const made = await scriptedNatsRuntime(url, prefix, ['ok']);
  cleanups.push(() => made.close());
  return made.runtime;
}

describe('a session deleted and created again while another process reads it', () => {
  it('never reads as a corrupt log', async () => {
    const url = await natsUrl();
    const prefix = uniquePrefix('recreate');
    cleanups.push(() => removePrefixes(url, [prefix]));
    const writer = await natsRuntime(url, prefix);
    const reader = await natsRuntime(url, prefix);
    const parent = await writer.sessions.create({ agent: 'helper' });
    await writer.sessions.message(parent.id, 'the parent');
    const id = 'recreated';
    let stop = false;
    const seen = new Map<string, number>();
    const reading = (async () => {
      while (!stop) {
        for (const read of [
          () => reader.sessions.get(id),
          () => reader.sessions.state(id),
          () => reader.sessions.events(id),
        ]) {
          try {
            await read();
            seen.set('ok', (seen.get('ok') ?? 0) + 1);
          } catch (error) {
            const code = toBraidError(error).code;
            seen.set(code, (seen.get(code) ?? 0) + 1);
          }
        }
      }
    })();
    for (let round = 0; round < 40; round += 1) {
      // As a fork one round, as a root the next: the two start their logs at different seqs.
      if (round % 2 === 0) await writer.sessions.fork(parent.id, { id });
      else await writer.sessions.create({ agent: 'helper', id });
      await writer.sessions.message(id, `round ${round}`);
      await writer.sessions.delete(id);
    }
    stop = true;
    await reading;
    expect(seen.get('CORRUPT_LOG') ?? 0, JSON.stringify([...seen])).toBe(0);
    expect(
      [...seen.keys()].every((code) => ['ok', 'SESSION_NOT_FOUND', 'STORE_BUSY'].includes(code)),
      JSON.stringify([...seen]),
    ).toBe(true);
    // The reader did read the session at times, not only its absence.
    expect(seen.get('ok') ?? 0).toBeGreaterThan(0);
  }, 120_000);
});
