// A thread's life on the page, on the real binary in a real Chromium: a
// first message the server refuses (413, 429) leaves no empty thread
// behind, one whose outcome is unknown (503) keeps its thread to send again
// to, a thread deleted while open gives the tab its default title back, and
// the rows of threads that leave the list are freed.
// Screenshots: artifacts/screenshots/12-*.png.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { apiPost, pageTests, send, shot, sleep, threadOf, waitForRunStatus, type Server } from './helpers.js';

const setup = pageTests();

/** The sidebar row of a thread. */
const row = (page: Page, tid: string) => page.locator(`[data-testid="thread-item"][data-thread-id="${tid}"]`);

/** The ids of the threads the server has. */
async function serverThreads(server: Server): Promise<string[]> {
  return (await server.get<{ threads: { id: string }[] }>('/v1/threads')).threads.map((t) => t.id);
}

/**
 * Checks what the page shows after a first message was refused: the
 * message still in the box, `said` in the composer's error, the new-chat
 * screen, and no thread on the server or in the list (after a poll).
 */
async function refusedFirst(page: Page, server: Server, text: string, said: string): Promise<void> {
  await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 10_000 }).toBe(said);
  expect(await page.getByTestId('composer-input').inputValue()).toBe(text); // kept, to shorten or send again
  await expect.poll(() => threadOf(page), { timeout: 5000 }).toBeUndefined();
  expect(await page.getByTestId('welcome').isVisible()).toBe(true);
  expect(await page.title()).toBe('Tether');
  expect(await serverThreads(server)).toEqual([]);
  await sleep(2500); // a poll of the list
  expect(await page.getByTestId('thread-item').count()).toBe(0);
  expect(await page.getByTestId('composer-error').textContent()).toBe(said); // still said
}

describe('thread lifecycle', () => {
  it('a first message over the size limit (413) leaves no thread behind, keeps the message and says it is too long', async () => {
    const { server, page, errors } = await setup(['--max-body', '4096']);
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    const big = 'word '.repeat(1000).trim();
    await page.getByTestId('composer-input').fill(big);
    await page.getByTestId('send').click();
    await refusedFirst(page, server, big, 'The message is too long to send: request body is larger than 4096 bytes.');
    await shot(page, '12-first-run-too-large');

    // Shortened, it goes, into one new thread.
    await page.getByTestId('composer-input').fill('A shorter one');
    await page.getByTestId('send').click();
    await page.waitForURL(/#\/t\/.+/);
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false);
    expect(await serverThreads(server)).toEqual([threadOf(page)]);
    await expect.poll(() => page.getByTestId('thread-item').count(), { timeout: 5000 }).toBe(1);
    expect(errors).toEqual([]);
  });

  it('a first message refused by a rate limit (429) leaves no thread behind and says to wait', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    const runs = '**/v1/threads/*/runs';
    await page.route(runs, (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({ status: 429, headers: { 'Retry-After': '2' }, json: { error: { code: 'rate_limited', message: 'too many runs started: retry in 2 s' } } })
        : route.continue(),
    );
    await page.getByTestId('composer-input').fill('Hello there');
    await page.getByTestId('composer-input').press('Enter');
    await refusedFirst(page, server, 'Hello there', 'Too many requests: wait 2 s, then send again.');
    await shot(page, '12-first-run-rate-limited');

    await page.unroute(runs);
    await page.getByTestId('composer-input').press('Enter');
    await page.waitForURL(/#\/t\/.+/);
    await waitForRunStatus(page, 'done');
    expect(await serverThreads(server)).toEqual([threadOf(page)]);
    expect(errors).toEqual([]);
  });

  it('a first message whose outcome is unknown (503) keeps its thread: sending again uses it, not a second one', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    const runs = '**/v1/threads/*/runs';
    await page.route(runs, (route) =>
      route.request().method() === 'POST'
        ? route.fulfill({ status: 503, json: { error: { code: 'unavailable', message: 'the store cannot be reached' } } })
        : route.continue(),
    );
    await page.getByTestId('composer-input').fill('Maybe sent');
    await page.getByTestId('composer-input').press('Enter');
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 10_000 }).toBe('the store cannot be reached');
    const tid = threadOf(page);
    expect(tid).toBeDefined();
    expect(await serverThreads(server)).toEqual([tid]);
    await page.unroute(runs);
    await page.getByTestId('composer-input').press('Enter');
    await waitForRunStatus(page, 'done');
    expect(threadOf(page)).toBe(tid);
    expect(await serverThreads(server)).toEqual([tid]);
    expect(errors).toEqual([]);
  });

  it('gives the tab its default title back when the open thread is deleted', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    const tid = await send(page, 'Soon deleted');
    await waitForRunStatus(page, 'done');
    expect(await page.title()).toBe('Soon deleted — Tether');
    const res = await fetch(`${server.url}/v1/threads/${encodeURIComponent(tid)}`, { method: 'DELETE' }); // another tab, or a program
    expect(res.status).toBe(204);
    await expect.poll(() => page.getByTestId('pane-status').textContent(), { timeout: 10_000 }).toBe('This conversation does not exist, or it was deleted.');
    await expect.poll(() => page.title(), { timeout: 5000 }).toBe('Tether');
    expect(await page.getByTestId('thread-title').textContent()).not.toContain('Soon deleted');
    await expect.poll(() => row(page, tid).count(), { timeout: 10_000 }).toBe(0);

    // Reopened by its link: the same.
    await page.reload();
    await expect.poll(() => page.getByTestId('pane-status').textContent(), { timeout: 10_000 }).toBe('This conversation does not exist, or it was deleted.');
    expect(await page.title()).toBe('Tether');
    expect(errors).toEqual([]);
  });

  it('frees the rows of threads that leave the list', async () => {
    // A tab left open for days sees threads come and go (deleted by another
    // tab or a program): a row that left the list must be garbage, not kept
    // for a thread that never comes back.
    const { server, page, errors } = await setup();
    const ids = ['keep', 'gone-1', 'gone-2', 'gone-3'];
    for (const id of ids) await apiPost(server, '/v1/threads', { id, metadata: { title: `Thread ${id}` } });
    await page.goto(server.url);
    await expect.poll(() => page.getByTestId('thread-item').count(), { timeout: 10_000 }).toBe(ids.length);
    await page.evaluate((gone) => {
      const w = window as unknown as { leftRows: WeakRef<Element>[] };
      w.leftRows = gone.map((id) => new WeakRef(document.querySelector(`[data-testid="thread-item"][data-thread-id="${id}"]`)!));
    }, ids.slice(1));
    for (const id of ids.slice(1)) expect((await fetch(`${server.url}/v1/threads/${id}`, { method: 'DELETE' })).status).toBe(204);
    await expect.poll(() => page.getByTestId('thread-item').count(), { timeout: 10_000 }).toBe(1);
    const cdp = await page.context().newCDPSession(page);
    const alive = async () => {
      await cdp.send('HeapProfiler.collectGarbage');
      return page.evaluate(() => (window as unknown as { leftRows: WeakRef<Element>[] }).leftRows.filter((r) => r.deref() !== undefined).length);
    };
    await expect.poll(alive, { timeout: 5000 }).toBe(0);
    expect(errors).toEqual([]);
  });
});
