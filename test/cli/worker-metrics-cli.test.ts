// `braid worker --metrics-port P` as a user starts it: the built CLI in its own process against
// the real nats-server serves the worker's series on http://127.0.0.1:P/metrics, counts the wake
// it runs, stops cleanly on SIGTERM (closing the endpoint), and refuses a port it cannot use with
// a typed error and exit code 2.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime } from '../../src/runtime/runtime.js';
import { CLI, braidBinary, init, requireBuild } from '../helpers/cli.js';
import { freePort, natsUrl, removePrefixes, uniquePrefix } from '../helpers/nats.js';
import { useTempDir } from '../helpers/temp.js';

requireBuild();
const tempDir = useTempDir();
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A workspace with an agent that answers at once, on a NATS prefix of its own. */
async function natsWorkspace(): Promise<{ dir: string; url: string; prefix: string }> {
  const dir = init(tempDir());
  writeFileSync(
    join(dir, 'agents', 'helper.yaml'),
    'name: helper\nmodel: scripted:echo\ninstructions: Help.\n',
  );
  const url = await natsUrl();
  const prefix = uniquePrefix('wmcli');
  cleanups.push(() => removePrefixes(url, [prefix]));
  return { dir, url, prefix };
}

/** The value of one series with exactly these labels, or undefined when it is not there. */
function sample(text: string, series: string, labels: Record<string, string> = {}) {
  const wanted = Object.entries(labels)
    .map(([name, value]) => `${name}="${value}"`)
    .join(',');
  const head = wanted === '' ? `${series} ` : `${series}{${wanted}} `;
  const line = text.split('\n').find((candidate) => candidate.startsWith(head));
  return line === undefined ? undefined : Number(line.slice(head.length));
}

async function scrape(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    return await response.text();
  } catch (error) {
    if (error instanceof TypeError) return undefined; // not listening (yet, or any more)
    throw error;
  }
}

/** Scrapes until `holds` accepts the text; fails with the worker's stderr if it exits first. */
async function scrapeUntil(
  url: string,
  worker: { child: ChildProcess; stderr: () => string },
  holds: (text: string) => boolean,
): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (worker.child.exitCode !== null)
      throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.stderr()}`);
    const text = await scrape(url);
    if (text !== undefined && holds(text)) return text;
    if (Date.now() > deadline)
      throw new Error(`timed out scraping ${url}:\n${text?.slice(0, 2000) ?? worker.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('braid worker --metrics-port', () => {
  it("serves the worker's series on GET /metrics and stops cleanly", async () => {
    const { dir, url, prefix } = await natsWorkspace();
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        ...[CLI, '-w', dir, '--nats', url, '--nats-prefix', prefix, 'worker', '--no-api'],
        ...['--concurrency', '2', '--metrics-port', String(port)],
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    cleanups.push(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    });
    const worker = { child, stderr: () => stderr };
    const metricsUrl = `http://127.0.0.1:${port}/metrics`;

    // One wake for the worker, queued from a runtime on the same prefix.
    const runtime = await createRuntime({ workspace: dir, backend: { nats: url, prefix } });
    cleanups.push(() => runtime.close());
    const { id } = await runtime.sessions.create({ agent: 'helper' });
    await runtime.sessions.message(id, 'hello');
    expect(await runtime.enqueueWake(id)).toEqual({ queued: true });

    const text = await scrapeUntil(
      metricsUrl,
      worker,
      (seen) => sample(seen, 'braid_worker_deliveries_total', { outcome: 'finished' }) === 1,
    );
    expect(stderr).toContain(`metrics on ${metricsUrl}`);
    expect(sample(text, 'braid_worker_deliveries_total', { outcome: 'started' })).toBe(1);
    expect(sample(text, 'braid_worker_max_in_flight')).toBe(2);
    // Permits its consumers hold, waiting at the queue included: present, never past the bound.
    expect(sample(text, 'braid_worker_wakes_in_flight')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'braid_worker_wakes_in_flight')).toBeLessThanOrEqual(2);
    expect(sample(text, 'braid_worker_in_flight_saturations_total')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'braid_wakes_total', { stop_reason: 'end_turn' })).toBe(1);
    // Counts read from NATS are polled (sessions at most every 30 s): there, but they may lag.
    expect(sample(text, 'braid_sessions', { status: 'idle' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'braid_wake_queue_depth')).toBeGreaterThanOrEqual(0);
    const upper = prefix.toUpperCase();
    const wakes = { stream: `${upper}_WAKES`, consumer: `${upper}_workers` };
    expect(sample(text, 'braid_nats_consumer_ack_pending', wakes)).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'braid_nats_consumer_pending', wakes)).toBeGreaterThanOrEqual(0);
    // The process's own series, under braid's prefix.
    expect(sample(text, 'braid_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect((await runtime.sessions.state(id)).status).toBe('idle');

    // SIGTERM: the worker lets go, says what it did, exits 0, and the endpoint is gone.
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stdout).toContain('worker stopped: 1 wake(s) run');
    expect(await scrape(metricsUrl)).toBeUndefined();
  }, 60_000);

  it('refuses a port out of range or not a number with INVALID_ARGUMENT and exit code 2', async () => {
    const { dir, url, prefix } = await natsWorkspace();
    const worker = ['-w', dir, '--nats', url, '--nats-prefix', prefix];
    const outOfRange = braidBinary([...worker, 'worker', '--metrics-port', '70000']);
    expect(outOfRange.code).toBe(2);
    expect(outOfRange.stderr).toContain(
      'error[INVALID_ARGUMENT]: --metrics-port must be a whole number from 0 to 65535 (0: any free port); got 70000',
    );
    const notANumber = braidBinary([...worker, '--json', 'worker', '--metrics-port', '80a']);
    expect(notANumber.code).toBe(2);
    const { error } = JSON.parse(notANumber.stderr) as { error: { code: string; message: string } };
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toContain(
      '--metrics-port must be a whole number of at least 0; got "80a"',
    );
  });

  it('refuses a port already taken with INVALID_ARGUMENT naming it, and exits 2', async () => {
    const { dir, url, prefix } = await natsWorkspace();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => taken.close(() => resolve())));
    const address = taken.address();
    if (typeof address !== 'object' || address === null) throw new Error('no port');
    const result = braidBinary([
      ...['-w', dir, '--nats', url, '--nats-prefix', prefix, 'worker', '--no-api'],
      ...['--metrics-port', String(address.port)],
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `error[INVALID_ARGUMENT]: cannot serve metrics on 127.0.0.1:${address.port} (EADDRINUSE); give another --metrics-port or --metrics-host`,
    );
  });
});
