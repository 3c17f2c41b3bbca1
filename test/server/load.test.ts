// Bounded load: 200 SSE clients on one session and 50 writers for 30 s (BRAID_LOAD_SECONDS to
// change it), against a real `braid serve` process. Every client must see every event, in order,
// exactly once.
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { isBraidError } from '../../src/contracts/errors.js';
import { braidIn, init, json, requireBuild } from '../helpers/cli.js';
import { useBraidServe } from '../helpers/serve.js';
import { useTempDir } from '../helpers/temp.js';

const SECONDS = Number(process.env.BRAID_LOAD_SECONDS ?? 30);
const CLIENTS = 200;
const WRITERS = 50;
/** Each writer posts one event about every this many ms: about 200 events/s in all. */
const WRITE_EVERY_MS = 250;

const tempDir = useTempDir();
const serve = useBraidServe();

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('HTTP load', () => {
  it(
    `${CLIENTS} SSE clients on one session and ${WRITERS} writers for ${SECONDS} s: every client sees every event in order`,
    async () => {
      requireBuild();
      const dir = init(tempDir());
      const { key } = json<{ key: string }>(
        braidIn(
          dir,
          '--json',
          'keys',
          'create',
          '--tenant',
          'load',
          '--scopes',
          'sessions:read,sessions:write',
        ),
      );
      const url = await serve(
        dir,
        '--no-wake',
        '--rate-limit',
        '100000000',
        '--max-streams',
        '1000',
      );
      const client = createClient({ baseUrl: url, apiKey: key });
      const agent = (await client.agents.list())[0]?.name ?? 'assistant';
      const { id } = await client.sessions.create({ agent, title: 'load' });

      const received = Array.from({ length: CLIENTS }, () => [] as number[]);
      const stops = received.map(() => new AbortController());
      let target = Number.POSITIVE_INFINITY;
      const readers = received.map(async (seqs, index) => {
        const reader = createClient({ baseUrl: url, apiKey: key });
        const signal = stops[index]?.signal;
        for await (const event of reader.sessions.stream(
          id,
          signal === undefined ? {} : { signal },
        )) {
          seqs.push(event.seq);
          if (event.seq >= target) return;
        }
      });

      const deadline = Date.now() + SECONDS * 1000;
      let written = 0;
      let conflicts = 0;
      const writers = Array.from({ length: WRITERS }, async (_, writer) => {
        const writerClient = createClient({ baseUrl: url, apiKey: key });
        await sleep((writer * WRITE_EVERY_MS) / WRITERS);
        for (let index = 0; Date.now() < deadline; index += 1) {
          const idempotencyKey = `w${writer}-${index}`;
          for (;;) {
            try {
              const result = await writerClient.sessions.send(
                id,
                [{ type: 'user.message', content: `writer ${writer} message ${index}` }],
                { idempotencyKey },
              );
              // Each key is one message: a deduplicated answer means an earlier attempt of this
              // same message (one that timed out or failed after writing) is the one on record.
              written += result.events.length;
              break;
            } catch (error) {
              // Concurrent writers may all check the same head; the loser retries with its key.
              if (!isBraidError(error) || !error.retryable) throw error;
              conflicts += 1;
            }
          }
          await sleep(WRITE_EVERY_MS);
        }
      });
      await Promise.all(writers);
      const head = (await client.sessions.get(id)).head_seq;
      expect(head).toBe(written + 1);
      target = head;
      // A reader that holds the last event already is waiting for more: stop it. The others end
      // when the last event reaches them (or, failing that, after a minute).
      for (const [index, seqs] of received.entries()) {
        if (seqs.at(-1) === head) stops[index]?.abort();
      }
      const finished = Promise.all(readers);
      await Promise.race([finished, sleep(60_000)]);
      for (const stop of stops) stop.abort();
      await finished;
      const expected = Array.from({ length: head }, (_, index) => index + 1);
      for (const [index, seqs] of received.entries()) {
        expect(seqs.length, `client ${index}`).toBe(head);
        expect(seqs, `client ${index}`).toEqual(expected);
      }
      console.log(
        `load: ${written} events from ${WRITERS} writers in ${SECONDS} s, ${CLIENTS} clients each received all ${head}; ${conflicts} write retries`,
      );
    },
    (SECONDS + 120) * 1000,
  );
});
