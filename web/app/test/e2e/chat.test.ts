// The chat page on the real binary in a real Chromium: the issue's five
// acceptance scenarios, plus phone width and the token prompt. Each test
// has its own server and browser context; screenshots of the key moments go
// to artifacts/screenshots/ (<scenario>-<moment>.png).
import { describe, expect, it } from 'vitest';
import {
  assistantText,
  lastRunStatus,
  pageTests,
  send,
  shot,
  sleep,
  threadOf,
  waitForRunStatus,
  waitForWords,
  type FinalAnswer,
} from './helpers.js';

const setup = pageTests();

describe('chat page', () => {
  it('1: a demo run streams in; the page is reloaded mid-run and ends with exactly the final answer', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=160&delay_ms=40`);
    await shot(page, '1-reload-welcome');
    const tid = await send(page, 'What is a durable stream?');
    await waitForWords(page, 12);
    expect(await lastRunStatus(page)).toBe('running');
    await shot(page, '1-reload-streaming');

    await page.reload();
    await waitForWords(page, 1);
    expect(threadOf(page)).toBe(tid); // the hash kept the thread
    expect(await lastRunStatus(page)).toBe('running'); // reloaded mid-run, not after
    await shot(page, '1-reload-after-reload');

    await waitForRunStatus(page, 'done');
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.complete).toBe(true);
    expect(fa.content.split(' ').length).toBeGreaterThanOrEqual(160);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await page.getByTestId('message').and(page.locator('[data-role="assistant"]')).count()).toBe(1);
    await expect.poll(() => page.getByTestId('thread-item').first().getAttribute('data-status'), { timeout: 10_000 }).toBe('idle');
    await page.getByTestId('thinking').locator('summary').click();
    await page.getByTestId('tool-card').locator('summary').click();
    await shot(page, '1-reload-done');
    expect(errors).toEqual([]);
  });

  it('2: the browser goes offline for 5 s mid-run and back; the final text is exactly the answer, nothing twice', async () => {
    const { server, page, context, errors } = await setup();
    await page.goto(`${server.url}/?tokens=220&delay_ms=40`);
    const tid = await send(page, 'How does resuming work?');
    await waitForWords(page, 10);

    await context.setOffline(true);
    const { run } = await server.get<{ run: { status: string } }>(`/v1/runs/${(await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`)).run_id}`);
    expect(run.status).toBe('running'); // offline mid-run
    await page.waitForFunction(() => document.querySelector('[data-testid="connection"]')?.getAttribute('data-state') !== 'open', undefined, { timeout: 5000 });
    const wordsOffline = (await assistantText(page)).split(' ').length;
    await sleep(2000);
    await shot(page, '2-offline-during');
    await sleep(3000);
    // Nothing reached the page while offline.
    expect((await assistantText(page)).split(' ').length).toBeLessThanOrEqual(wordsOffline + 1);
    await context.setOffline(false);

    await waitForRunStatus(page, 'done');
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 10_000 }).toBe('open');
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.complete).toBe(true);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await page.locator('[data-testid="message"][data-role="assistant"]').count()).toBe(1);
    expect(await page.locator('[data-testid="message"][data-role="assistant"] [data-testid="text-part"]').count()).toBe(1);
    await shot(page, '2-offline-done');
    expect(errors).toEqual([]);
  });

  it('3: the server is killed (-9) and restarted mid-run; the page shows the aborted run, then a new run works without a reload', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=400&delay_ms=30`);
    await page.evaluate(() => ((window as unknown as { sameDocument: boolean }).sameDocument = true));
    const tid = await send(page, 'Tell me a long story');
    await waitForWords(page, 30);

    await server.kill9();
    await page.waitForFunction(() => document.querySelector('[data-testid="connection"]')?.getAttribute('data-state') === 'reconnecting', undefined, { timeout: 10_000 });
    await shot(page, '3-restart-server-down');
    await server.restart();

    await waitForRunStatus(page, 'aborted');
    const status = page.locator('[data-testid="run"]').last().getByTestId('run-status');
    expect(await status.textContent()).toBe('The run stopped because the server restarted.');
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.status).toBe('aborted');
    expect(await assistantText(page)).toBe(fa.content); // what was committed before the crash, once
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 10_000 }).toBe('open');
    await shot(page, '3-restart-aborted');

    await page.getByTestId('options').locator('summary').click();
    await page.getByTestId('opt-tokens').fill('25');
    await page.getByTestId('opt-delay').fill('20');
    await send(page, 'And now?');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
    await waitForRunStatus(page, 'done');
    const fa2 = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa2.run_id).not.toBe(fa.run_id);
    expect(await assistantText(page)).toBe(fa2.content);
    expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true); // no reload
    await shot(page, '3-restart-new-run');
    expect(errors).toEqual([]);
  });

  it('4: a run that asks for input shows a form; the answer is sent and the run completes', async () => {
    const { server, page, errors } = await setup();
    await page.goto(server.url);
    await page.getByTestId('options').locator('summary').click();
    await page.getByTestId('opt-ask').check();
    await page.getByTestId('opt-tokens').fill('40');
    await page.getByTestId('opt-delay').fill('20');
    const tid = await send(page, 'Summarize the design notes');

    const form = page.getByTestId('input-form');
    await form.waitFor({ timeout: 20_000 });
    expect(await form.getByTestId('input-prompt').textContent()).toBe('Which detail should the answer focus on?');
    expect(await lastRunStatus(page)).toBe('waiting');
    await expect.poll(() => page.getByTestId('thread-item').first().getAttribute('data-status'), { timeout: 10_000 }).toBe('waiting');
    await shot(page, '4-input-form');

    await form.getByTestId('input-value').fill('tone');
    await form.getByTestId('input-submit').click();
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('input-form').count()).toBe(0);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.content.startsWith('You asked me to focus on “tone”.')).toBe(true);
    expect(await assistantText(page)).toBe(fa.content);
    await shot(page, '4-input-done');
    expect(errors).toEqual([]);
  });

  it('4b: a tool call that needs approval shows Approve and Deny; a reason typed and Enter denies it', async () => {
    const { server, page, errors } = await setup();
    await page.goto(server.url + '/?approve=1&tokens=20&delay_ms=10');
    const tid = await send(page, 'Tidy the archive');

    const form = page.getByTestId('input-form');
    await form.waitFor({ timeout: 20_000 });
    expect(await form.getAttribute('data-kind')).toBe('approval');
    expect(await form.getByTestId('input-prompt').textContent()).toBe('Allow search({"query":"Tidy the archive"})?');
    expect(await form.getByTestId('input-submit').count()).toBe(0);
    await shot(page, '4b-approval-form');

    await form.getByTestId('input-value').fill('Not the archive.');
    await form.getByTestId('input-value').press('Enter');
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('input-form').count()).toBe(0);
    const snap = await server.get<{ messages: { parts: { type: string; status?: string; error?: unknown }[] }[] }>(`/v1/threads/${tid}`);
    const call = snap.messages.flatMap((m) => m.parts).find((p) => p.type === 'tool');
    expect(call).toMatchObject({ status: 'error', error: { code: 'denied', message: 'Not the archive.' } });
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.content.startsWith('You did not allow the search')).toBe(true);
    expect(await assistantText(page)).toBe(fa.content);

    // The next run's call is approved with the button: it runs.
    await send(page, 'Tidy the archive again');
    await form.waitFor({ timeout: 20_000 });
    await form.getByTestId('input-approve').click();
    await waitForRunStatus(page, 'done');
    const snap2 = await server.get<{ messages: { parts: { type: string; status?: string }[] }[] }>(`/v1/threads/${tid}`);
    const calls = snap2.messages.flatMap((m) => m.parts).filter((p) => p.type === 'tool');
    expect(calls.map((c) => c.status)).toEqual(['error', 'done']);
    await shot(page, '4b-approval-done');
    expect(errors).toEqual([]);
  });

  it('5: the stop button cancels a run', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=600&delay_ms=25`);
    const tid = await send(page, 'Write something very long');
    await waitForWords(page, 8);
    expect(await page.getByTestId('send').isVisible()).toBe(false);
    await shot(page, '5-stop-running');

    await page.getByTestId('stop').click();
    await waitForRunStatus(page, 'cancelled', 15_000);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(fa.status).toBe('cancelled');
    expect(fa.content.split(' ').length).toBeLessThan(600);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await page.locator('[data-testid="run"]').last().getByTestId('run-status').textContent()).toBe('Stopped');
    expect(await page.getByTestId('send').isVisible()).toBe(true);
    await shot(page, '5-stop-cancelled');
    expect(errors).toEqual([]);
  });

  it('when the stream cannot be resumed, the page recovers the run from the server and says so', async () => {
    const { server, page, context, errors } = await setup();
    await page.goto(`${server.url}/?tokens=150&delay_ms=30`);
    const tid = await send(page, 'What if the stream never comes back?');
    await waitForWords(page, 5);
    // Every stream request fails from now on (a proxy that kills event
    // streams); REST still works. A short network loss drops the current one.
    await page.route(/\/v1\/threads\/[^/?]+\/events/, (route) => route.abort('connectionreset'));
    await context.setOffline(true);
    await sleep(300);
    await context.setOffline(false);

    await waitForRunStatus(page, 'done', 45_000);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(await assistantText(page)).toBe(fa.content);
    const note = page.locator('[data-testid="run"]').last().locator('.run-foot').getByTestId('recovered-note');
    expect(await note.isVisible()).toBe(true);
    expect(await note.textContent()).toBe('Stream dropped — recovered');
    expect(await page.getByTestId('connection').getAttribute('data-state')).toBe('reconnecting');
    await shot(page, '8-recovered');
    await page.unroute(/\/v1\/threads\/[^/?]+\/events/);
    expect(errors).toEqual([]);
  });

  it('works at phone width (375 px): no sideways scroll, the thread list is a drawer', async () => {
    const { server, page, errors } = await setup([], { viewport: { width: 375, height: 812 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    await page.goto(`${server.url}/?tokens=60&delay_ms=10`);
    await shot(page, '6-phone-welcome');
    const tid = await send(page, 'What is a durable stream?');
    await waitForRunStatus(page, 'done');
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    expect(await page.getByTestId('sidebar').isVisible()).toBe(false); // in the DOM, off-canvas and hidden (out of the Tab order)
    expect(await page.getByTestId('sidebar').evaluate((el) => el.getBoundingClientRect().right)).toBeLessThanOrEqual(0);
    await shot(page, '6-phone-chat');
    await page.getByTestId('menu').click();
    await expect.poll(() => page.getByTestId('sidebar').evaluate((el) => el.getBoundingClientRect().left), { timeout: 10_000 }).toBe(0);
    expect(await page.getByTestId('sidebar').isVisible()).toBe(true);
    await shot(page, '6-phone-drawer');
    expect(errors).toEqual([]);
  });

  it('asks for a token when the server answers 401, and keeps it', async () => {
    const token = 'page-test-token-0123456789';
    const { server, page, errors } = await setup(['--token', token]);
    await page.goto(`${server.url}/?tokens=20&delay_ms=10`);
    const prompt = page.getByTestId('token-prompt');
    await prompt.waitFor();
    await shot(page, '7-token-prompt');
    await prompt.getByTestId('token-input').fill(token);
    await prompt.getByTestId('token-save').click();
    await page.waitForLoadState('load');
    const tid = await send(page, 'hello');
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('token-prompt').count()).toBe(0);
    // In this tab's storage only: not on disk for every tab, not in a cookie or the URL.
    expect(await page.evaluate((t) => [sessionStorage.getItem('tether.token'), localStorage.getItem('tether.token'), document.cookie, location.href.includes(t)], token)).toEqual([token, null, '', false]);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`, token);
    expect(await assistantText(page)).toBe(fa.content);
    expect(errors).toEqual([]);
  });
});
