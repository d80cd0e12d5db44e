// The WebSocket transport in a real Chromium (Debian's, driven by
// playwright-core) with the page's own WebSocket, on the real binary: the
// page of test/ws-page, built with esbuild and served by a TCP proxy in
// front of the server (a real server on the origin the page talks to; the
// proxy also cuts the socket).
import { build } from 'esbuild';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { TetherClient } from '../../src/client.js';
import { demo, threadName, until, url } from './helpers.js';
import { Proxy } from './proxy.js';

let browser: Browser;
let script = '';

beforeAll(async () => {
  const out = await build({
    absWorkingDir: import.meta.dirname,
    entryPoints: ['../ws-page/main.ts'],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
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

const html = '<!doctype html><meta charset="utf-8"><body><script type="module" src="./main.js"></script></body>';

/** A proxy to `target` that also serves the page at /ws-page/ (a real server on the page's origin). */
const pageProxy = (target: string) =>
  Proxy.start(target, {
    '/ws-page/': { type: 'text/html', body: html },
    '/ws-page/main.js': { type: 'text/javascript', body: script },
    '/favicon.ico': { type: 'image/x-icon', body: '' },
  });

/** The page at `${base}/ws-page/`. */
async function open(base: string): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/WebSocket connection .* failed|401|status of 426/.test(m.text())) errors.push(m.text());
  });
  await page.goto(`${base}/ws-page/`);
  await page.waitForFunction(() => document.body.dataset.ready === 'true');
  return { context, page, errors };
}

type State = { thread: unknown; runs: unknown; messages: unknown; offset: string; loaded: boolean; connection: string; error?: string };
const states = (page: Page) => page.evaluate(() => (window as unknown as { wsPage: { states(): Record<string, State> } }).wsPage.states());

describe('WebSocket transport in Chromium', () => {
  it('8 thread stores on one socket, the socket cut twice mid-run: each store the server\'s, each event applied once', async () => {
    const proxy = await pageProxy(url());
    const direct = new TetherClient({ baseUrl: url(), lifecycle: null });
    const tids = Array.from({ length: 8 }, (_, i) => threadName(`ws-page-${i}`));
    await Promise.all(tids.map((id) => direct.createThread({ id })));
    const { context, page, errors } = await open(proxy.url);
    try {
      await page.evaluate((tids) => (window as unknown as { wsPage: { follow(t: string[]): void } }).wsPage.follow(tids), tids);
      await until(async () => Object.values(await states(page)).every((s) => s.loaded && s.connection === 'open'), 10_000, 'open');
      expect(proxy.sockets).toBe(1);
      const runs = await Promise.all(tids.map((tid) => direct.createRun(tid, demo(150, 8))));
      const applied = () => page.evaluate(() => (window as unknown as { wsPage: { results: Record<string, number> } }).wsPage.results.applied ?? 0);
      for (const at of [300, 700]) {
        await until(async () => (await applied()) >= at, 15_000, `event ${at}`); // mid-run: 8 runs of about 160 events
        expect(proxy.cutSockets()).toBe(1);
      }
      await until(async () => (await Promise.all(runs.map((r) => direct.getRun(r.id)))).every((r) => r.run.status === 'done'), 30_000, 'the runs');
      const want = Object.fromEntries(
        await Promise.all(tids.map(async (tid) => [tid, await direct.getThread(tid)] as const)),
      );
      await until(async () => {
        const got = await states(page);
        return tids.every((tid) => got[tid]!.offset === want[tid]!.offset);
      }, 15_000, 'every store caught up');
      const got = await states(page);
      for (const tid of tids) {
        const w = want[tid]!;
        expect({ thread: got[tid]!.thread, runs: got[tid]!.runs, messages: got[tid]!.messages }).toStrictEqual(JSON.parse(JSON.stringify({ thread: w.thread, runs: w.runs, messages: w.messages })));
      }
      const results = await page.evaluate(() => (window as unknown as { wsPage: { results: Record<string, number> } }).wsPage.results);
      expect(Object.keys(results)).toEqual(['applied']);
      expect(proxy.upgrades).toBe(3);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
      await proxy.close();
    }
  }, 90_000);

  it('a token the server refuses: the page\'s WebSocket only sees a failed upgrade; the subscription closes unauthorized (401) all the same', async () => {
    const proxy = await pageProxy(inject('tetherJwtUrl'));
    const { context, page, errors } = await open(proxy.url);
    try {
      const closed = await page.evaluate(async () => {
        const p = (window as unknown as { wsPage: { follow(t: string[], token: string): void; closedOf(t: string): Promise<unknown> } }).wsPage;
        p.follow(['t1'], 'not-a-token-the-server-knows');
        return p.closedOf('t1');
      });
      expect(closed).toEqual({ reason: 'error', code: 'unauthorized', status: 401 });
      expect(proxy.upgrades).toBe(1); // the upgrade reached the server, which refused it
      expect(errors).toEqual([]);
    } finally {
      await context.close();
      await proxy.close();
    }
  }, 30_000);
});
