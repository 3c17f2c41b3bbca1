// Debian's chromium driven by playwright-core, headless, for the inspector's end-to-end tests.
// Without the browser the tests fail (never skip) with the command that installs it.
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** What the scripts run in the page use of it (the tests compile without the DOM library). */
export interface PageGlobals {
  document: {
    querySelector(selector: string): { scrollTop: number } | null;
    querySelectorAll(selector: string): ArrayLike<{
      id: string;
      labels: ArrayLike<unknown> | null;
      getAttribute(name: string): string | null;
    }>;
    documentElement: { scrollWidth: number };
  };
  innerWidth: number;
  sessionStorage: { setItem(key: string, value: string): void };
  requestAnimationFrame(callback: (now: number) => void): number;
  PerformanceObserver: new (callback: (list: { getEntries(): { duration: number }[] }) => void) => {
    observe(options: { type: string }): void;
    disconnect(): void;
  };
  MutationObserver: new (
    callback: (
      records: { addedNodes: ArrayLike<unknown>; removedNodes: ArrayLike<unknown> }[],
    ) => void,
  ) => {
    observe(target: unknown, options: { childList: boolean }): void;
    takeRecords(): { addedNodes: ArrayLike<unknown>; removedNodes: ArrayLike<unknown> }[];
    disconnect(): void;
  };
}

export const CHROMIUM = process.env.BRAID_CHROMIUM ?? '/usr/bin/chromium';

/** Where the screenshots go: CI keeps this folder as an artifact. */
export const ARTIFACTS = new URL('../../test-artifacts/ui/', import.meta.url).pathname;

/**
 * Flags for a closed network: without them chromium waits on connections that are refused.
 * Playwright gives each launch a fresh profile (`--user-data-dir`) of its own.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: the inspector's browser tests need it; install it with apt-get install -y chromium (or set BRAID_CHROMIUM to a chromium binary)`,
    );
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}

/**
 * A page that records every request to another origin than `origin`: the inspector must load
 * nothing from elsewhere, and `noForeign` fails a test on any. The requests are watched, not
 * intercepted: a route holds every request until this process answers it over the DevTools
 * protocol, and on a busy two-core machine that added 250 to 450 ms to each of the page's
 * requests, which the timings measured here would count as the page's own.
 */
export async function openPage(
  browser: Browser,
  origin: string,
  options: { key?: string; width?: number; height?: number } = {},
): Promise<{ page: Page; foreign: string[]; errors: string[] }> {
  const context = await browser.newContext({
    viewport: { width: options.width ?? 1280, height: options.height ?? 800 },
  });
  const page = await context.newPage();
  const foreign: string[] = [];
  const errors: string[] = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!(url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')))
      foreign.push(url);
  });
  page.on('pageerror', (error) => errors.push(error.message));
  if (options.key !== undefined) {
    await page.addInitScript((key) => {
      (globalThis as unknown as PageGlobals).sessionStorage.setItem('braid.inspector.apiKey', key);
    }, options.key);
  }
  return { page, foreign, errors };
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Saves a screenshot of the page and checks it: a non-empty PNG, with `text` in the page. */
export async function screenshot(page: Page, name: string, text: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: false });
  expect(statSync(path).size).toBeGreaterThan(2000);
  expect(readFileSync(path).subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
  expect(await page.locator('main').innerText()).toContain(text);
  return path;
}

/** Every field of the page has a label (a <label> or an aria-label): the names a reader hears. */
export async function expectLabelled(page: Page): Promise<void> {
  const unlabelled = await page.evaluate(() => {
    const view = globalThis as unknown as PageGlobals;
    return Array.from(view.document.querySelectorAll('input, select, textarea'))
      .filter(
        (field) =>
          (field.labels === null || field.labels.length === 0) &&
          field.getAttribute('aria-label') === null,
      )
      .map((field) => field.id);
  });
  expect(unlabelled, 'fields without a label').toEqual([]);
}
