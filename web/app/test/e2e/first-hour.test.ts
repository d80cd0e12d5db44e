// What a newcomer meets in the first hour, on the real binary in a real
// Chromium: threads made through the API are titled by their first
// message, aborted and stopped runs are badged as such (not "error"), the
// Options panel closes after sending, and titles are plain text (also at
// phone width). Screenshots: artifacts/screenshots/9-*.png.
import { describe, expect, it } from 'vitest';
import { Server, apiPost, pageTests, send, shot, waitForApiRun, waitForRunStatus } from './helpers.js';

const setup = pageTests();

interface Run {
  id: string;
}

/** A thread made through the API, as a program would, with one run of `agent`. */
async function apiThread(server: Server, prompt: string, agent: string, demo?: object): Promise<{ tid: string; run: Run }> {
  const { id: tid } = await apiPost<{ id: string }>(server, '/v1/threads', {});
  const run = await apiPost<Run>(server, `/v1/threads/${tid}/runs`, {
    agent,
    input: { messages: [{ role: 'user', content: prompt }] },
    ...(demo ? { metadata: { demo } } : {}),
  });
  return { tid, run };
}

/** The sidebar row of a thread. */
const row = (page: import('playwright-core').Page, tid: string) => page.locator(`[data-testid="thread-item"][data-thread-id="${tid}"]`);

describe('first hour', () => {
  it('titles threads made through the API by their first message, and badges aborted and stopped runs as such', async () => {
    // "ext" is an external agent (declared, so runs of it are accepted); its
    // worker claims a run and vanishes, so the run ends aborted (worker_lost).
    const { server, page, errors } = await setup(['--agents', 'ext', '--lease-ttl', '1s', '--sweep-interval', '100ms']);
    const done = await apiThread(server, '**Where** is my `order`?', 'demo', { tokens: 5, delay_ms: 0 });
    const stopped = await apiThread(server, 'A long one, please', 'demo', { tokens: 5000, delay_ms: 50 });
    const lost = await apiThread(server, 'Ask the external agent', 'ext');
    await apiPost(server, '/v1/workers/claim', { worker_id: 'vanishing', agents: ['ext'], wait_ms: 5000 });
    await apiPost(server, `/v1/runs/${stopped.run.id}/cancel`);
    await waitForApiRun(server, done.run.id, 'done');
    await waitForApiRun(server, stopped.run.id, 'cancelled');
    await waitForApiRun(server, lost.run.id, 'aborted');

    await page.goto(server.url);
    await expect.poll(() => row(page, done.tid).locator('.thread-title').textContent(), { timeout: 10_000 }).toBe('Where is my order?');
    expect(await row(page, stopped.tid).locator('.thread-title').textContent()).toBe('A long one, please');
    await expect.poll(() => row(page, lost.tid).getByTestId('thread-status').textContent(), { timeout: 10_000 }).toBe('aborted');
    expect(await row(page, lost.tid).getByTestId('thread-status').getAttribute('data-status')).toBe('aborted');
    expect(await row(page, lost.tid).getAttribute('data-status')).toBe('error'); // what the thread itself says
    await expect.poll(() => row(page, stopped.tid).getByTestId('thread-status').textContent(), { timeout: 10_000 }).toBe('stopped');
    expect(await row(page, done.tid).getByTestId('thread-status').getAttribute('data-status')).toBe('idle');
    await shot(page, '9-api-threads-sidebar');

    await row(page, done.tid).click();
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('thread-title').textContent()).toBe('Where is my order?');
    await row(page, lost.tid).click();
    await waitForRunStatus(page, 'aborted');
    expect(await row(page, lost.tid).getByTestId('thread-status').textContent()).toBe('aborted');
    await shot(page, '9-api-thread-aborted');
    expect(errors).toEqual([]);
  });

  it('an aborted run (server killed) is badged aborted in the sidebar, not error', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=400&delay_ms=30`);
    const tid = await send(page, 'Tell me a long story');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="text-part"]').length > 0, undefined, { timeout: 20_000 });
    await server.kill9();
    await server.restart();
    await waitForRunStatus(page, 'aborted');
    const badge = row(page, tid).getByTestId('thread-status');
    await expect.poll(() => badge.textContent(), { timeout: 10_000 }).toBe('aborted');
    expect(await badge.getAttribute('data-status')).toBe('aborted');
    await shot(page, '9-restart-aborted-badge');
    expect(errors).toEqual([]);
  });

  it('closes Options after sending', async () => {
    const { server, page, errors } = await setup();
    await page.goto(server.url);
    const options = page.getByTestId('options');
    await options.locator('summary').click();
    await page.getByTestId('opt-tokens').fill('12');
    await page.getByTestId('opt-delay').fill('5');
    expect(await options.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);
    await shot(page, '9-options-open');
    await send(page, 'Short answer please');
    await expect.poll(() => options.evaluate((d) => (d as HTMLDetailsElement).open), { timeout: 10_000 }).toBe(false);
    expect(await page.getByTestId('options-summary').textContent()).toBe('12 words · 5 ms'); // the options stay set
    await waitForRunStatus(page, 'done');
    await shot(page, '9-options-closed');
    expect(errors).toEqual([]);
  });

  it('keeps the focus in the message box after Send or a suggestion is clicked', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=20&delay_ms=5`);
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName);
    await page.locator('.chip').first().click();
    await page.waitForURL(/#\/t\/.+/);
    await expect.poll(focused, { timeout: 10_000 }).toBe('composer-input');
    await waitForRunStatus(page, 'done');
    await page.getByTestId('composer-input').fill('And with the button');
    await page.getByTestId('send').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
    await expect.poll(focused, { timeout: 10_000 }).toBe('composer-input');
    await waitForRunStatus(page, 'done');
    await page.keyboard.type('typed right away'); // where a person types next
    expect(await page.getByTestId('composer-input').inputValue()).toBe('typed right away');
    expect(errors).toEqual([]);
  });

  it('says why a message is not sent while a run is active, and sends it once the run ended', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=60&delay_ms=40`);
    const tid = await send(page, 'A long one');
    await page.waitForFunction(() => document.querySelector('[data-testid="run"]')?.getAttribute('data-status') === 'running');
    await page.getByTestId('composer-input').fill('And another thing');
    await page.getByTestId('composer-input').press('Enter');
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 5000 }).toBe('A run is in progress: wait for it to end, or stop it.');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(true);
    await shot(page, '9-busy-send');
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false); // said while it was so
    await page.getByTestId('composer-input').press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
    await waitForRunStatus(page, 'done');

    // A run that waits for an answer: the page points at its form.
    await page.getByTestId('options').locator('summary').click();
    await page.getByTestId('opt-ask').check();
    await page.getByTestId('composer-input').fill('Ask me first');
    await page.getByTestId('composer-input').press('Enter');
    await page.getByTestId('input-form').waitFor();
    await page.getByTestId('composer-input').fill('Not the answer');
    await page.getByTestId('composer-input').press('Enter');
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 5000 }).toBe('The agent is waiting for your answer: use the form above, or stop the run.');
    await page.getByTestId('input-value').fill('Short');
    await page.getByTestId('input-submit').click();
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false);

    // Another tab started a run this one has not heard of yet: the server's
    // 409 run_active says the same, in words, not ids.
    await page.route('**/v1/threads/*/runs', (route) =>
      route.fulfill({ status: 409, json: { error: { code: 'run_active', message: `thread ${tid} has an active run run_01x` } } }),
    );
    await page.getByTestId('composer-input').fill('Third');
    await page.getByTestId('composer-input').press('Enter');
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 5000 }).toBe('A run is in progress: wait for it to end, or stop it.');
    expect(await page.getByTestId('composer-input').inputValue()).toBe('Third');
    expect(errors).toEqual([]);
  });

  it('says the server could not be reached when a message is sent offline, and sends it once back', async () => {
    const { server, page, context, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    await context.setOffline(true);
    await page.getByTestId('composer-input').fill('Are you there?');
    await page.getByTestId('composer-input').press('Enter');
    // Said once the client's own retries of the write are spent (four, with backoff).
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 15_000 }).toBe('Could not reach the server: check the connection, then try again.');
    await context.setOffline(false);
    await page.getByTestId('composer-input').press('Enter');
    await page.waitForURL(/#\/t\/.+/);
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false);
    expect(errors).toEqual([]);
  });

  it('keeps the closed thread drawer out of the Tab order at phone width', async () => {
    const { server, page, errors } = await setup([], { viewport: { width: 375, height: 812 } });
    await page.goto(`${server.url}/?tokens=3&delay_ms=0`);
    const tid = await send(page, 'One thread');
    await waitForRunStatus(page, 'done');
    await page.goto(`${server.url}/`);
    await row(page, tid).waitFor({ state: 'attached' });
    // Every stop of the Tab key is on the screen: none in the drawer hidden to the left.
    const stops: string[] = [];
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press('Tab');
      stops.push(
        await page.evaluate(() => {
          const e = document.activeElement as HTMLElement;
          const r = e.getBoundingClientRect();
          return r.right <= 0 || r.left >= innerWidth ? `off screen: ${e.tagName} ${e.textContent}` : 'on screen';
        }),
      );
    }
    expect(stops.filter((s) => s !== 'on screen')).toEqual([]);
    // Opened, the drawer's links are there to use.
    await page.getByTestId('menu').click();
    await expect.poll(() => row(page, tid).isVisible(), { timeout: 5000 }).toBe(true);
    await row(page, tid).focus();
    expect(await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('thread-item');
    expect(errors).toEqual([]);
  });

  it('shows titles as plain text, also at phone width', async () => {
    const { server, page, errors } = await setup([], { viewport: { width: 375, height: 812 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    await page.goto(`${server.url}/?tokens=20&delay_ms=5`);
    const tid = await send(page, '**Why** does `fsync` matter for _durability_?');
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('thread-title').textContent()).toBe('Why does fsync matter for durability?');
    expect(await page.evaluate(() => document.title)).toBe('Why does fsync matter for durability? — Tether');
    await shot(page, '9-phone-plain-title');
    await page.getByTestId('menu').click();
    await expect.poll(() => row(page, tid).locator('.thread-title').textContent(), { timeout: 10_000 }).toBe('Why does fsync matter for durability?');
    await shot(page, '9-phone-drawer-title');
    expect(errors).toEqual([]);
  });
});
