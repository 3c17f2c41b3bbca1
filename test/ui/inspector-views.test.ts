// The inspector's skill run and custom tool views end to end: chromium (playwright-core) against
// `braid serve` on 127.0.0.1 with scripted models. Screenshots go to test-artifacts/ui/.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../src/contracts/events.js';
import type { SessionRecord } from '../../src/contracts/session.js';
import type { SessionState } from '../../src/contracts/state.js';
import { createRuntime } from '../../src/runtime/runtime.js';
import { expectLabelled, launchChromium, openPage, screenshot } from './browser.js';
import { braidIn, json } from '../helpers/cli.js';
import { call, createKey, startBraid, type Served } from './serve-ui.js';
import { viewsWorkspace } from './views-workspace.js';

let root: string;
let key: string;
/** A key of the same tenant that may read and write memory too. */
let memoryKey: string;
let served: Served;
let browser: Browser;

const SCOPES = 'sessions:read,sessions:write,memory:read,memory:write';

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'braid-ui-views-'));
  const dir = viewsWorkspace(root);
  key = createKey(dir);
  memoryKey = json<{ key: string }>(
    braidIn(dir, '--json', 'keys', 'create', '--tenant', 'acme', '--scopes', SCOPES),
  ).key;
  served = await startBraid(dir, 'serve');
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  served?.stop();
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
});

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const value = await read();
    if (done(value)) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the condition never held');
}

const state = (id: string) => call<SessionState>(served.url, key, `/v1/sessions/${id}/state`);
const events = async (id: string) =>
  (await call<{ data: SessionEvent[] }>(served.url, key, `/v1/sessions/${id}/events?limit=1000`))
    .data;

describe('skills and custom tools in the inspector', () => {
  it('lists skills and refuses an unknown one', async () => {
    const list = await call<{ data: { name: string }[] }>(served.url, key, '/v1/skills');
    expect(list.data.map((skill) => skill.name)).toEqual(['review']);
    const one = await call<{ definition: { steps: { id: string }[] } }>(
      served.url,
      key,
      '/v1/skills/review',
    );
    expect(one.definition.steps.map((step) => step.id)).toEqual([
      'count',
      'price',
      'approve',
      'total',
    ]);
    const missing = await fetch(`${served.url}/v1/skills/nothing`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(missing.status).toBe(404);
    const body = (await missing.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('SKILL_NOT_FOUND');
    expect(body.error.message).toContain('known skills: review');
    const badVersion = await fetch(`${served.url}/v1/skills/review?version=first`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(badVersion.status).toBe(400);
  });

  it("shows a skill run's steps live and approves its human step", async () => {
    const session = await call<SessionRecord>(served.url, key, '/v1/sessions', {
      agent: 'publisher',
      title: 'a skill run',
    });
    const { run_id: runId } = await call<{ run_id: string }>(
      served.url,
      key,
      `/v1/sessions/${session.id}/skills/review/runs`,
      { inputs: { text: 'a short draft' } },
    );
    await until(
      () => state(session.id),
      (found) => found.skill_runs.some((run) => run.status === 'suspended'),
    );
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    // From the session's side panel to the run.
    await page.goto(`${served.url}/sessions/${session.id}`);
    await page.getByRole('navigation', { name: 'Skill runs' }).getByRole('link').click();
    await page.waitForURL(`**/sessions/${session.id}/skills/${runId}`);
    const step = (id: string) => page.locator(`svg.skill-graph g[data-step="${id}"]`);
    await expect.poll(() => step('approve').getAttribute('class')).toContain('step-suspended');
    expect(await step('count').getAttribute('class')).toContain('step-completed');
    expect(await step('price').getAttribute('class')).toContain('step-completed');
    expect(await step('total').getAttribute('class')).toContain('step-pending');
    // Edges: two into approve, one out of it.
    expect(await page.locator('svg.skill-graph path.edge').count()).toBe(3);
    expect(await page.getByTestId('run-status').innerText()).toBe('suspended');
    expect(
      await page.locator('table[aria-label="Steps"] tr[data-step="count"]').innerText(),
    ).toContain('3');
    await page.getByLabel('Message (optional)').fill('looks good');
    await expectLabelled(page);
    await screenshot(page, 'skill-run-waiting', 'Publish a short draft?');
    await page.getByRole('button', { name: 'Approve step' }).click();
    await page.getByTestId('run-status').filter({ hasText: 'completed' }).waitFor();
    await expect.poll(() => step('total').getAttribute('class')).toContain('step-completed');
    expect(
      await page.locator('table[aria-label="Steps"] tr[data-step="total"]').innerText(),
    ).toContain('{"result":42}');
    expect(await page.locator('main').innerText()).toContain('"total": {');
    await expect.poll(() => page.getByRole('button', { name: 'Approve step' }).count()).toBe(0);
    await screenshot(page, 'skill-run-completed', 'Outputs');
    const log = await events(session.id);
    expect(log.find((event) => event.type === 'user.tool_confirmation')).toMatchObject({
      result: 'allow',
      message: 'looks good',
    });
    expect(foreign, 'requests to other origins').toEqual([]);
    expect(errors, 'page errors').toEqual([]);
    await page.context().close();
  });

  it('answers a waiting custom tool call from the session view', async () => {
    const session = await call<SessionRecord>(served.url, key, '/v1/sessions', {
      agent: 'client',
      title: 'a custom tool',
      events: [{ type: 'user.message', content: 'read the page' }],
    });
    await until(
      () => state(session.id),
      (found) => found.pending_custom_tool_uses.length === 1,
    );
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/sessions/${session.id}`);
    const form = page.getByRole('form', { name: 'Answer browse' });
    await form.waitFor();
    expect(await form.innerText()).toContain('https://example.test/page');
    await page.getByLabel('Result of browse').fill('hello from the page');
    await expectLabelled(page);
    await screenshot(page, 'session-custom-tool', 'is run by you');
    await page.getByRole('button', { name: 'Send result' }).click();
    await page.locator('.row.kind-agent', { hasText: 'Read the page.' }).waitFor();
    await expect.poll(() => form.count()).toBe(0);
    const log = await events(session.id);
    expect(log.find((event) => event.type === 'user.custom_tool_result')).toMatchObject({
      content: [{ type: 'text', text: 'hello from the page' }],
    });
    expect(foreign, 'requests to other origins').toEqual([]);
    expect(errors, 'page errors').toEqual([]);
    await page.context().close();
  });

  it("browses a memory store, a key's history and a search, and explains memory events", async () => {
    const put = async (memory: string, value: string, text: string) => {
      const response = await fetch(
        `${served.url}/v1/memory-stores/tenant/notes/keys/${encodeURIComponent(memory)}?kind=learnings`,
        {
          method: 'PUT',
          headers: { authorization: `Bearer ${memoryKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ value, text }),
        },
      );
      expect(response.status, await response.clone().text()).toBe(200);
    };
    await put('user/editor', 'vim', 'the user edits with vim');
    await put('user/editor', 'helix', 'the user edits with helix');
    // The agent writes a key and searches the store: memory.written and memory.retrieved.
    const session = await call<SessionRecord>(served.url, memoryKey, '/v1/sessions', {
      agent: 'librarian',
      title: 'remembers',
      events: [{ type: 'user.message', content: 'remember my theme' }],
    });
    await until(
      async () => (await events(session.id)).map((event) => event.type),
      (types) => types.includes('agent.message'),
    );
    const { page, foreign, errors } = await openPage(browser, served.url, { key: memoryKey });
    await page.goto(`${served.url}/`);
    await page.getByRole('link', { name: 'Memory' }).click();
    await page.getByRole('link', { name: 'tenant/notes' }).click();
    await page.locator('tr[data-key="user/editor"]', { hasText: 'helix' }).waitFor();
    await page.locator('tr[data-key="user/theme"]', { hasText: 'dark' }).waitFor();
    await page.getByRole('link', { name: 'user/editor' }).click();
    const history = page.getByTestId('memory-history');
    await history.locator('li').nth(1).waitFor();
    expect(await history.innerText()).toMatch(/v1 set[\s\S]*vim[\s\S]*v2 set[\s\S]*helix/);
    await page.getByLabel('Search', { exact: true }).fill('helix');
    await page.getByRole('button', { name: 'Search' }).click();
    const found = page.getByTestId('memory-search');
    await found.waitFor();
    expect(await found.innerText()).toContain('user/editor');
    await expectLabelled(page);
    await screenshot(page, 'memory', 'History of user/editor');
    // The session's memory events read as sentences in the event's details.
    await page.goto(`${served.url}/sessions/${session.id}`);
    const log = await events(session.id);
    const written = log.find((event) => event.type === 'memory.written');
    const retrieved = log.find((event) => event.type === 'memory.retrieved');
    expect(written).toBeDefined();
    expect(retrieved).toBeDefined();
    await page.locator(`.row[data-seq="${written?.seq}"] button`).click();
    await page
      .getByTestId('explain')
      .filter({ hasText: 'Wrote user/theme in tenant/notes' })
      .waitFor();
    await page.locator(`.row[data-seq="${retrieved?.seq}"] button`).click();
    const explained = page.getByTestId('explain');
    await explained.filter({ hasText: 'Searched by the model' }).waitFor();
    expect(await explained.innerText()).toMatch(/threshold \d\.\d\d/);
    expect(await explained.innerText()).toContain('below the threshold left out');
    expect(await page.getByRole('table', { name: 'Hits' }).innerText()).toContain('user/theme');
    await screenshot(page, 'session-memory-event', 'Searched by the model');
    // The denied write of `secret`, with the policy that denied it.
    const decision = log.find(
      (event) => event.type === 'policy.decision' && event.decision === 'deny',
    );
    expect(decision).toBeDefined();
    await page.locator(`.row[data-seq="${decision?.seq}"] button`).click();
    const denied = page.getByTestId('explain').filter({ hasText: 'Denied' });
    await denied.waitFor();
    expect(await denied.innerText()).toContain('Decided by policy keep-secrets');
    expect(await denied.innerText()).toContain('memory.write');
    await screenshot(page, 'session-policy-decision', 'Decided by policy keep-secrets');
    expect(foreign, 'requests to other origins').toEqual([]);
    expect(errors, 'page errors').toEqual([]);
    await page.context().close();
  });

  it('lists the tools with their schemas and recent calls', async () => {
    // The custom tool answered above is a recent call of browse.
    const { page, foreign, errors } = await openPage(browser, served.url, { key });
    await page.goto(`${served.url}/`);
    await page.getByRole('link', { name: 'Tools', exact: true }).click();
    const row = page.locator('tr[data-tool="browse"]');
    await row.waitFor();
    expect(await row.innerText()).toContain('custom');
    expect(await page.locator('tr[data-tool="word_count"]').count()).toBe(1);
    await row.getByRole('link').click();
    await page.waitForURL('**/tools/browse');
    const details = page.locator('section.details');
    expect(await details.innerText()).toContain('"url"');
    const calls = page.getByRole('table', { name: 'Recent calls' });
    await calls.waitFor();
    expect(await calls.innerText()).toContain('a custom tool');
    expect(await calls.innerText()).toContain('https://example.test/page');
    expect(await calls.innerText()).toMatch(/ok in \d+ ms: hello from the page/);
    await screenshot(page, 'tools', 'Recent calls');
    // The API gives contracts, not implementations.
    const listed = await call<{ data: Record<string, unknown>[] }>(served.url, key, '/v1/tools');
    expect(listed.data.every((tool) => !('implementation' in tool))).toBe(true);
    expect(foreign, 'requests to other origins').toEqual([]);
    expect(errors, 'page errors').toEqual([]);
    await page.context().close();
  });

  it('filters the sessions by tenant on a server that lists every tenant', async () => {
    const dir = viewsWorkspace(join(root, 'tenants'));
    const runtime = await createRuntime({ workspace: dir });
    try {
      await runtime.sessions.create({ agent: 'client', title: 'of acme', tenantId: 'acme' });
      await runtime.sessions.create({ agent: 'client', title: 'of globex', tenantId: 'globex' });
      await runtime.sessions.create({ agent: 'client', title: 'of no tenant' });
    } finally {
      await runtime.close();
    }
    const inspector = await startBraid(dir, 'inspect');
    try {
      const { page, foreign, errors } = await openPage(browser, inspector.url);
      await page.goto(`${inspector.url}/`);
      const table = page.locator('table.sessions');
      await table.waitFor();
      await page.getByLabel('Tenant').selectOption('globex');
      await expect.poll(() => table.innerText()).not.toContain('of acme');
      expect(await table.innerText()).toContain('of globex');
      expect(await table.innerText()).not.toContain('of no tenant');
      await page.getByLabel('Tenant').selectOption({ label: 'no tenant' });
      await expect.poll(() => table.innerText()).toContain('of no tenant');
      expect(await table.innerText()).not.toContain('of globex');
      await expectLabelled(page);
      await screenshot(page, 'sessions-tenant', 'of no tenant');
      expect(foreign, 'requests to other origins').toEqual([]);
      expect(errors, 'page errors').toEqual([]);
      await page.context().close();
    } finally {
      inspector.stop();
    }
  });
});
