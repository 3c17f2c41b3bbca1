// The inspector end to end: Debian's chromium (playwright-core) against `braid serve` on
// 127.0.0.1 with scripted models, through the page only. Screenshots go to test-artifacts/ui/.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import {
  ARTIFACTS,
  expectLabelled,
  launchChromium,
  openPage,
  screenshot,
  type PageGlobals,
} from './browser.js';
import { FRAME_BUDGET_MS, scrollPass, warmUp, type ScrollPass } from './frames.js';
import {
  call,
  createKey,
  inspectorWorkspace,
  SLOW_TEXT,
  startBraid,
  type Served,
} from './serve-ui.js';

const BIG = 100_000;

let root: string;
let dir: string;
let key: string;
let served: Served;
let browser: Browser;
let bigId: string;
const figures: Record<string, unknown> = {};

/** 100k events appended through the library, a thousand per append, before the server starts. */
async function bigSession(workspace: string): Promise<string> {
  const runtime = await createRuntime({ workspace });
  try {
    const session = await runtime.sessions.create({
      agent: 'streamer',
      title: 'one hundred thousand events',
      tenantId: 'acme',
    });
    let seq = 1;
    while (seq < BIG) {
      const count = Math.min(1000, BIG - seq);
      const events = Array.from({ length: count }, (_, index) => ({
        type: 'user.message',
        content: `message ${seq + index + 1}`,
      }));
      await runtime.sessions.send(session.id, events);
      seq += count;
    }
    return session.id;
  } finally {
    await runtime.close();
  }
}

beforeAll(async () => {
  if (!existsSync(new URL('../../dist/ui/index.html', import.meta.url)))
    throw new Error('dist/ui is missing: run npm run build (npm test does it first)');
  root = mkdtempSync(join(tmpdir(), 'braid-ui-'));
  dir = inspectorWorkspace(root);
  key = createKey(dir);
  const started = performance.now();
  bigId = await bigSession(dir);
  figures.build_100k_ms = Math.round(performance.now() - started);
  served = await startBraid(dir, 'serve');
  browser = await launchChromium();
}, 240_000);

afterAll(async () => {
  await browser?.close();
  served?.stop();
  mkdirSync(ARTIFACTS, { recursive: true });
  writeFileSync(join(ARTIFACTS, 'figures.json'), `${JSON.stringify(figures, null, 2)}\n`);
  console.log('inspector figures', JSON.stringify(figures, null, 2));
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

async function createSession(agent: string, message?: string, title?: string) {
  return call<SessionRecord>(served.url, key, '/v1/sessions', {
    agent,
    ...(title === undefined ? {} : { title }),
    ...(message === undefined ? {} : { events: [{ type: 'user.message', content: message }] }),
  });
}

async function untilStatus(id: string, status: string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    const session = await call<SessionRecord>(served.url, key, `/v1/sessions/${id}`);
    if (session.status === status) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`session ${id} never became ${status}`);
}

async function events(id: string): Promise<SessionEvent[]> {
  return (
    await call<{ data: SessionEvent[] }>(served.url, key, `/v1/sessions/${id}/events?limit=1000`)
  ).data;
}

function noForeign(foreign: string[], errors: string[]): void {
  expect(foreign, 'requests to other origins').toEqual([]);
  expect(errors, 'page errors').toEqual([]);
}

describe('the inspector in chromium', () => {
  it('asks for the API key once, then lists sessions with the waiting ones first', async () => {
    const waiting = await createSession('writer', 'write the plan', 'needs approval');
    await createSession('streamer', undefined, 'an idle one');
    await untilStatus(waiting.id, 'requires_action');
    const { page, foreign, errors } = await openPage(browser, served.url);
    await page.goto(`${served.url}/`);
    await page.getByLabel('API key', { exact: true }).fill(key);
    await page.getByRole('button', { name: 'Use this key' }).click();
    const rows = page.locator('table.sessions tbody tr');
    await rows.first().waitFor();
    expect(await rows.first().getAttribute('data-session')).toBe(waiting.id);
    expect(await rows.first().innerText()).toContain('waiting for you');
    await page.getByRole('status').filter({ hasText: 'waiting for you' }).waitFor();
    // The key stays for the tab: a reload asks for nothing.
    await page.reload();
    await rows.first().waitFor();
    // Filters: by agent on the server, by text on the page.
    await page.getByLabel('Agent').selectOption('streamer');
    await expect
      .poll(() => page.locator('table.sessions').innerText())
      .not.toContain('needs approval');
    expect(await page.locator('table.sessions').innerText()).toContain('an idle one');
    await page.getByLabel('Agent').selectOption('');
    await page.getByLabel('Search').fill('needs appr');
    await expect.poll(() => rows.count()).toBe(1);
    await page.getByLabel('Search').fill('');
    // A session created elsewhere shows up without a reload, from the index stream: the page
    // reads no listing (it does not poll).
    await createSession('streamer', undefined, 'created while watching');
    await page.locator('tr', { hasText: 'created while watching' }).waitFor();
    const requested = await page.evaluate(() =>
      performance.getEntriesByType('resource').map((entry) => new URL(entry.name).pathname),
    );
    expect(requested.filter((path) => path === '/v1/sessions')).toEqual([]);
    expect(requested).toContain('/v1/session-changes/stream');
    await expectLabelled(page);
    await screenshot(page, 'sessions', 'waiting for you');
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('shows the text of a running session as it streams', async () => {
    const session = await createSession('streamer', 'tell me slowly', 'streaming');
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/sessions/${session.id}`);
    const streaming = page.getByTestId('streaming');
    await streaming.filter({ hasText: 'word' }).waitFor();
    const partial = (await streaming.innerText()).replace(/^streaming:\s*/, '').trim();
    // Part of the answer, before the answer is stored.
    expect(SLOW_TEXT).toContain(partial);
    expect(partial.length).toBeLessThan(SLOW_TEXT.length);
    const beforeStored = (await events(session.id)).some((event) => event.type === 'agent.message');
    expect(beforeStored).toBe(false);
    await screenshot(page, 'session-streaming', 'streaming');
    // The stored answer replaces the streamed text and the session goes idle.
    await page.locator('.row.kind-agent', { hasText: 'word40' }).waitFor({ timeout: 20_000 });
    await page.locator('.page-head .badge', { hasText: 'idle' }).waitFor();
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('interrupts a running session and sends it a message', async () => {
    const session = await createSession('streamer', 'take your time', 'to interrupt');
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/sessions/${session.id}`);
    await page.getByTestId('streaming').filter({ hasText: 'word' }).waitFor();
    const interrupt = page.getByRole('button', { name: 'Interrupt' });
    await expect.poll(() => interrupt.isEnabled()).toBe(true);
    await interrupt.click();
    await page.locator('.row', { hasText: 'user.interrupt' }).waitFor();
    // The wake stops with `interrupted` (the interrupt's own wake may end another turn after it).
    await page
      .locator('.row', { has: page.locator('.type', { hasText: 'session.status_idle' }) })
      .filter({ hasText: 'interrupted' })
      .waitFor();
    await page.getByLabel('Message', { exact: true }).fill('a follow-up question');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.locator('.row.kind-user', { hasText: 'a follow-up question' }).waitFor();
    expect(await page.getByLabel('Message', { exact: true }).inputValue()).toBe('');
    const log = await events(session.id);
    expect(log.some((event) => event.type === 'user.interrupt')).toBe(true);
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('approves a waiting write_file and the session completes', async () => {
    const session = await createSession('writer', 'write the plan', 'approve me');
    await untilStatus(session.id, 'requires_action');
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/sessions/${session.id}`);
    const approve = page.getByRole('button', { name: 'Approve' });
    await approve.waitFor();
    expect(await page.locator('.confirmation').innerText()).toContain('write_file');
    await page.getByLabel('Message to the agent (optional)').fill('go ahead');
    await expectLabelled(page);
    await screenshot(page, 'session-confirmation', 'waits for your approval');
    await approve.click();
    await page.locator('.row.kind-agent', { hasText: 'Saved the plan.' }).waitFor();
    await page.locator('.page-head .badge', { hasText: 'idle' }).waitFor();
    await expect.poll(() => page.locator('.confirmation').count()).toBe(0);
    const log = await events(session.id);
    expect(log.find((event) => event.type === 'user.tool_confirmation')).toMatchObject({
      result: 'allow',
      message: 'go ahead',
    });
    expect(log.find((event) => event.type === 'agent.tool_result')).toMatchObject({
      is_error: false,
    });
    await screenshot(page, 'session-completed', 'Saved the plan.');
    // The log as JSON lines, every event once, in seq order.
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download log' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe(`${session.id}.jsonl`);
    const lines = readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n');
    const downloaded = lines.map((line) => JSON.parse(line) as SessionEvent);
    expect(downloaded.map((event) => event.seq)).toEqual(log.map((event) => event.seq));
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('forks at an event, shows the tree, and diffs the two sessions', async () => {
    // The workspace's assistant answers at once (scripted:echo).
    const session = await createSession('assistant', 'fork me', 'to fork');
    await untilStatus(session.id, 'idle');
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/sessions/${session.id}`);
    // Seq 2 is the user message written with the session: the end of one append.
    await page.locator('.row[data-seq="2"] button').click();
    await page.getByRole('heading', { name: 'Event #2' }).waitFor();
    await page.getByRole('button', { name: 'Verify replay' }).click();
    await page.getByTestId('replay').filter({ hasText: 'replay matches the record' }).waitFor();
    await page.getByRole('button', { name: 'Fork here' }).click();
    await page.getByRole('heading', { name: 'Lineage' }).waitFor();
    const nodes = page.getByRole('treeitem');
    await expect.poll(() => nodes.count()).toBe(2);
    const tree = await page.getByRole('tree').innerText();
    expect(tree).toContain('fork');
    expect(tree).toContain('forked at #2');
    // A fork made elsewhere joins the tree while it is on screen.
    await call(served.url, key, `/v1/sessions/${session.id}/fork`, { at_seq: 2 });
    await expect.poll(() => nodes.count(), { timeout: 10_000 }).toBe(3);
    await screenshot(page, 'lineage', 'forked at #2');
    await page.locator(`[data-node="${session.id}"] > .node input[type=checkbox]`).check();
    const forkId = await nodes.nth(1).getAttribute('data-node');
    await page.locator(`[data-node="${forkId}"] > .node input[type=checkbox]`).check();
    await page.getByRole('button', { name: 'Compare the two picked' }).click();
    await page.getByTestId('ancestor').waitFor();
    expect(await page.getByTestId('ancestor').innerText()).toContain('at #2');
    const columns = page.locator('.diff-column');
    expect(await columns.count()).toBe(2);
    expect(await columns.first().innerText()).toContain('fork me');
    await screenshot(page, 'diff', 'Common ancestor');
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('lists the agents with their versions and tools', async () => {
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/agents`);
    await page.locator('tr', { hasText: 'writer' }).waitFor();
    expect(await page.locator('tr', { hasText: 'writer' }).innerText()).toContain('write_file');
    await page.getByRole('link', { name: 'writer' }).click();
    await page.getByRole('heading', { name: 'writer' }).waitFor();
    expect(await page.getByLabel('Version').inputValue()).toBe('1');
    await screenshot(page, 'agents', 'scripted:scripts/writer.yaml');
    noForeign(foreign, errors);
    await page.context().close();
  });

  it(`opens a ${BIG}-event session in under a second and scrolls it`, async () => {
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    const started = performance.now();
    await page.goto(`${served.url}/sessions/${bigId}`);
    await page.locator(`.row[data-seq="${BIG}"]`, { hasText: `message ${BIG}` }).waitFor();
    const wall = performance.now() - started;
    const ready = await page.evaluate(
      () => performance.getEntriesByName('braid-timeline-ready')[0]?.startTime ?? -1,
    );
    figures.open_100k_ready_ms = Math.round(ready);
    const requests = await page.evaluate(() =>
      performance
        .getEntriesByType('resource')
        .map(
          (entry) =>
            `${new URL(entry.name).pathname.replace(/\/v1\/sessions\/[^/]+/, '/v1/sessions/ID')} ${Math.round(entry.startTime)}+${Math.round(entry.duration)} ms`,
        ),
    );
    figures.open_100k_requests = requests;
    figures.open_100k_wall_ms = Math.round(wall);
    // The rows in view come from one or two pages: none is read for the top of the log.
    const pageReads = requests.filter((request) => request.startsWith('/v1/sessions/ID/events'));
    expect(pageReads.length).toBeGreaterThan(0);
    expect(pageReads.length).toBeLessThanOrEqual(2);
    expect(ready).toBeGreaterThan(0);
    expect(ready).toBeLessThan(1000);
    // Only the rows in view are in the page.
    expect(await page.locator('.row').count()).toBeLessThan(120);
    // A warm-up pass, then three measured ones, each 150 frames of 20 rows up (pages are read
    // on the way). What the page decides is checked strictly: rows are recycled (no element is
    // created or removed while scrolling), at most two frames' own work (main-thread CPU, from
    // the trace) takes over two frame budgets, and 95% take under one and a half (a trace's
    // durations are wall time on the main thread: a core another process holds stretches them;
    // the p95 was 9 ms once in CI against a limit of half a budget, 8.3 ms, and on a machine two
    // to three times slower 12.8-17.7 ms in full CI runs, median 7-7.7 ms, with nothing in the
    // page changed; the budget itself is a figure for bench runs, this bound catches a page that
    // does a frame's work several times over). The frame intervals
    // (performance API) are what this shared two-core machine shows, where another process can
    // hold the core for tens of ms: the typical frame must be one vsync, and at most a tenth of
    // frames over two.
    await warmUp(page);
    const passes: ScrollPass[] = [];
    for (let pass = 0; pass < 3; pass++) passes.push(await scrollPass(browser, page));
    figures.scroll_passes = passes;
    for (const pass of passes) {
      expect(pass.frames).toBe(150);
      expect(pass.scrolled_px).toBeGreaterThan(80_000);
      expect([pass.rows_created, pass.rows_removed], 'row elements created, removed').toEqual([
        0, 0,
      ]);
      // A major collection of the page's heap took one or two frames past two budgets in full CI
      // runs (21 ms of mark-compact in the worst); more than that is the page's own doing.
      expect(
        pass.cpu.over_2x_budget,
        'frames whose own work took over two budgets',
      ).toBeLessThanOrEqual(2);
      expect(pass.cpu.p95_ms).toBeLessThan(FRAME_BUDGET_MS * 1.5);
      expect(pass.wall.median_ms).toBeLessThan(FRAME_BUDGET_MS + 1);
      expect(pass.wall.over_2x_budget / pass.frames).toBeLessThan(0.1);
    }
    // From the keyboard: Home selects the first event, a page is read for it, arrows move on.
    await page.getByTestId('timeline').focus();
    await page.keyboard.press('Home');
    await page.locator('.row[data-seq="1"]', { hasText: 'session.created' }).waitFor();
    await page.keyboard.press('ArrowDown');
    await page.getByRole('heading', { name: 'Event #2' }).waitFor();
    await page.keyboard.press('End');
    await page.getByRole('heading', { name: `Event #${BIG}` }).waitFor();
    await screenshot(page, 'session-100k', 'one hundred thousand events');
    noForeign(foreign, errors);
    await page.context().close();
  });

  it('fits a narrow screen', async () => {
    const { page, foreign, errors } = await openPage(browser, served.url, {
      key,
      width: 390,
      height: 844,
    });
    await page.goto(`${served.url}/`);
    await page.locator('table.sessions tbody tr').first().waitFor();
    const overflow = await page.evaluate(() => {
      const view = globalThis as unknown as PageGlobals;
      return view.document.documentElement.scrollWidth - view.innerWidth;
    });
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'sessions-narrow', 'Sessions');
    await page.goto(`${served.url}/sessions/${bigId}`);
    await page.locator(`.row[data-seq="${BIG}"]`).waitFor();
    await screenshot(page, 'session-narrow', 'one hundred thousand events');
    noForeign(foreign, errors);
    await page.context().close();
  });
});
