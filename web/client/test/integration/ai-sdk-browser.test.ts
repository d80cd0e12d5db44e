// useChat in a real Chromium (Debian's, driven by playwright-core) on the
// real binary: the page of test/ai-sdk-page, built here with esbuild and
// served on the server's origin, with the unmodified DefaultChatTransport
// (reloaded mid-answer, and mid-approval) and with TetherChatTransport
// (offline for 5 s).
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { threadName, url } from './helpers.js';

const pageDir = join(import.meta.dirname, '..', 'ai-sdk-page');
let browser: Browser;
let script = '';

beforeAll(async () => {
  const out = await build({
    absWorkingDir: join(import.meta.dirname, '..', '..'),
    entryPoints: [join(pageDir, 'main.tsx')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    jsx: 'automatic',
    define: { 'process.env.NODE_ENV': '"production"' },
    write: false,
    logLevel: 'error',
  });
  script = out.outputFiles[0]!.text;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** A context whose requests for /aisdk-page/ on the server's origin get the page. */
async function open(): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext();
  await context.route(`${url()}/aisdk-page/**`, (route) => {
    const path = new URL(route.request().url()).pathname;
    if (path.endsWith('/main.js')) return route.fulfill({ contentType: 'text/javascript', body: script });
    return route.fulfill({ contentType: 'text/html', body: readFileSync(join(pageDir, 'index.html'), 'utf8') });
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { context, page, errors };
}

const assistantTexts = (page: Page) =>
  page.evaluate(() =>
    [...document.querySelectorAll('[data-testid="message"][data-role="assistant"]')].map((m) =>
      [...m.querySelectorAll('[data-testid="text-part"]')].map((p) => p.textContent ?? '').join(''),
    ),
  );

async function waitForWords(page: Page, n: number): Promise<void> {
  await page.waitForFunction(
    (n) => {
      const msgs = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const last = msgs[msgs.length - 1];
      const text = last ? [...last.querySelectorAll('[data-testid="text-part"]')].map((e) => e.textContent ?? '').join('') : '';
      return text.split(/\s+/).filter(Boolean).length >= n;
    },
    n,
    { timeout: 20_000 },
  );
}

async function finalAnswer(chat: string): Promise<{ content: string; complete: boolean; status: string }> {
  return (await (await fetch(`${url()}/v1/threads/${chat}/final-answer`)).json()) as { content: string; complete: boolean; status: string };
}

async function untilComplete(chat: string): Promise<{ content: string; status: string }> {
  const end = Date.now() + 40_000;
  for (;;) {
    const fa = await finalAnswer(chat);
    if (fa.complete) return fa;
    if (Date.now() > end) throw new Error(`run of ${chat} did not end`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function send(page: Page, text: string): Promise<void> {
  await page.getByTestId('input').fill(text);
  await page.getByTestId('send').click();
}

describe('useChat in Chromium', () => {
  it('default transport, reloaded mid-answer: one assistant message equal to the final answer, with reasoning and a tool call', async () => {
    const chat = threadName('page-default');
    const { context, page, errors } = await open();
    try {
      await page.goto(`${url()}/aisdk-page/?chat=${chat}&tokens=160&delay_ms=25`);
      await send(page, 'What is a durable stream?');
      await waitForWords(page, 12);
      expect((await finalAnswer(chat)).complete).toBe(false);
      await page.reload();
      await waitForWords(page, 1);
      expect((await finalAnswer(chat)).complete).toBe(false); // reloaded mid-answer
      const fa = await untilComplete(chat);
      await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent === 'ready', null, { timeout: 20_000 });
      await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([fa.content]);
      expect(await page.getByTestId('reasoning-part').count()).toBe(1);
      expect(await page.locator('[data-testid="tool-part"][data-type="tool-search"][data-state="output-available"]').count()).toBe(1);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('TetherChatTransport survives setOffline for 5 s: the final answer, once', async () => {
    const chat = threadName('page-tether');
    const { context, page, errors } = await open();
    try {
      await page.goto(`${url()}/aisdk-page/?chat=${chat}&tokens=300&delay_ms=30&transport=tether`);
      await send(page, 'How does resuming work?');
      await waitForWords(page, 10);
      await context.setOffline(true);
      await new Promise((r) => setTimeout(r, 5000));
      expect((await finalAnswer(chat)).complete).toBe(false); // still going while offline
      await context.setOffline(false);
      const fa = await untilComplete(chat);
      await expect.poll(() => assistantTexts(page), { timeout: 20_000 }).toEqual([fa.content]);
      const stats = await page.evaluate(() => (window.transport as unknown as { stats: Record<string, number> }).stats);
      console.log(`TetherChatTransport in Chromium, 5 s offline: ${JSON.stringify(stats)}`);
      expect(await page.getByTestId('error').count()).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('tool approvals: reloaded while one waits, Allow runs the call; Deny ends the next one denied; the page shows what /messages lists', async () => {
    const chat = threadName('page-approval');
    const { context, page, errors } = await open();
    const asked = '[data-testid="tool-part"][data-type="tool-search"][data-state="approval-requested"]';
    try {
      await page.goto(`${url()}/aisdk-page/?chat=${chat}&tokens=12&delay_ms=5&approve=1`);
      await send(page, 'Search, if I allow it');
      await page.locator(asked).waitFor({ timeout: 20_000 });
      expect(await page.locator('[data-testid="tool-part"][data-type="dynamic-tool"]').count()).toBe(0);
      await page.reload(); // mid-approval: loaded from /messages, then resumed
      await page.locator(asked).waitFor({ timeout: 20_000 });
      await page.getByTestId('allow').click();
      const first = await untilComplete(chat);
      await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([first.content]);
      expect(await page.locator('[data-testid="tool-part"][data-state="output-available"]').count()).toBe(1);

      await send(page, 'Search again');
      await page.locator(asked).waitFor({ timeout: 20_000 });
      await page.getByTestId('deny').click();
      await page.getByTestId('denied').waitFor({ timeout: 20_000 });
      const second = await untilComplete(chat);
      expect(second.content.startsWith('You did not allow the search')).toBe(true);
      await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([first.content, second.content]);
      expect(await page.getByTestId('denied').textContent()).toContain('Not from the page.');
      await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent === 'ready', null, { timeout: 20_000 });
      expect(await page.getByTestId('error').count()).toBe(0);
      // Loaded again: the same conversation.
      await page.reload();
      await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([first.content, second.content]);
      expect(await page.getByTestId('denied').textContent()).toContain('Not from the page.');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('a cancelled run: the stop endpoint ends the answer where it was, as useChat shows it', async () => {
    const chat = threadName('page-stop');
    const { context, page, errors } = await open();
    try {
      await page.goto(`${url()}/aisdk-page/?chat=${chat}&tokens=2000&delay_ms=10`);
      await send(page, 'A long answer');
      await waitForWords(page, 10);
      await page.getByTestId('stop').click();
      const fa = await untilComplete(chat);
      expect(fa.status).toBe('cancelled');
      await page.waitForFunction(() => document.querySelector('[data-testid="status"]')?.textContent === 'ready', null, { timeout: 20_000 });
      await expect.poll(() => assistantTexts(page), { timeout: 10_000 }).toEqual([fa.content]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
