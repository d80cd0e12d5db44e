// A page built on TetherAgent (@tether/client/ag-ui) in a real Chromium
// against the real binary: reloaded mid-answer, it shows the whole answer,
// once.
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Server, launch, newPage, shot, type FinalAnswer } from './helpers.js';

let browser: Browser;
let server: Server;
let script: string;

beforeAll(async () => {
  const out = await build({
    entryPoints: [new URL('./ag-ui-page/main.ts', import.meta.url).pathname],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
  });
  script = out.outputFiles[0]!.text;
  [browser, server] = await Promise.all([launch(), Server.start()]);
});
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const html = (js: string) =>
  `<!doctype html><meta charset="utf-8"><title>TetherAgent</title><p id="status">idle</p><p id="answer" data-count="0"></p><script type="module">${js.replace(/<\/script/g, '<\\/script')}</script>`;

describe('a page with TetherAgent', () => {
  it('reloaded mid-answer, shows the whole answer once', async () => {
    const { page, context, errors } = await newPage(browser);
    // The page is served from the server's origin (its API is same-origin).
    await context.route(`${server.url}/ag-ui-page*`, (route) => route.fulfill({ contentType: 'text/html', body: html(script) }));
    await page.goto(`${server.url}/ag-ui-page?tokens=150&delay_ms=30`);
    await page.waitForFunction(() => (document.getElementById('answer')?.textContent ?? '').split(' ').length >= 15, undefined, { timeout: 20_000 });
    const tid = new URL(page.url()).hash.slice(1);
    expect(await page.textContent('#status')).toBe('running');
    await shot(page, 'ag-ui-before-reload');

    await page.reload();
    await page.waitForFunction(() => document.getElementById('status')?.textContent === 'done', undefined, { timeout: 30_000 });
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.complete).toBe(true);
    expect(fa.content.split(' ')).toHaveLength(150);
    expect(await page.textContent('#answer')).toBe(fa.content);
    expect(await page.getAttribute('#answer', 'data-count')).toBe('1');
    await shot(page, 'ag-ui-after-reload');
    expect(errors).toEqual([]);
    await context.close();
  });
});
