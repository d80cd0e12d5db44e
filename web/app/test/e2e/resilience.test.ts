// The page under what real use throws at it, on the real binary in a real
// Chromium: a server restart during a run, two tabs sending to one thread
// at once, a long thread, a slow network (Chromium's own throttling, over
// the DevTools protocol) and a person using the keyboard only.
// Screenshots: artifacts/screenshots/13-*.png.
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { apiPost, assistantText, pageTests, send, shot, sleep, waitForApiRun, waitForRunStatus, waitForWords, type FinalAnswer, type Server } from './helpers.js';

const setup = pageTests();

/** Throttles the page's network as Chromium's DevTools do: `latency` ms added to each request. */
async function throttle(context: BrowserContext, page: Page, latency: number): Promise<void> {
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency, downloadThroughput: 256 * 1024, uploadThroughput: 64 * 1024 });
}

/** The test id (or tag) of the focused element. */
const focused = (page: Page) => page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName);

/** The runs and messages of a thread, from the server. */
function snapshot(server: Server, tid: string) {
  return server.get<{ runs: { id: string; status: string }[]; messages: { role: string; run_id: string }[] }>(`/v1/threads/${encodeURIComponent(tid)}`);
}

describe('resilience', () => {
  it('server restarted mid-run: the page shows the run aborted, with nothing lost or twice, and is not left running', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=400&delay_ms=30&ask=1`);
    const tid = await send(page, 'Ask me, then restart');
    await page.getByTestId('input-form').waitFor();
    await server.restart(); // kill -9, then up again on the same data
    await waitForRunStatus(page, 'aborted');
    expect(await page.getByTestId('input-form').count()).toBe(0);
    expect(await page.getByTestId('stop').isVisible()).toBe(false);
    expect(await page.getByTestId('send').isVisible()).toBe(true);
    const snap = await snapshot(server, tid);
    expect(await page.getByTestId('message').count()).toBe(snap.messages.length);
    await expect.poll(() => page.locator('[data-testid="thread-item"] [data-testid="thread-status"]').first().textContent(), { timeout: 10_000 }).toBe('aborted');
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 15_000 }).toBe('open');
    expect(errors).toEqual([]);
  });

  it('a run aborted by a restart, handed back again to a resend of its lost answer, can be retried as a new run', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    const tid = await send(page, 'First');
    await waitForRunStatus(page, 'done');
    // The next run is made, its answer is lost on the way back, and the
    // server is killed under it: on restart the run is aborted.
    const keys: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && /\/v1\/threads\/[^/]+\/runs$/.test(new URL(r.url()).pathname)) keys.push(r.headers()['idempotency-key'] ?? '');
    });
    await page.route('**/v1/threads/*/runs', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      await route.fetch();
      await route.abort('connectionreset');
    });
    await page.getByTestId('composer-input').fill('Long answer, please');
    await page.locator('[data-testid="options"] summary').click();
    // Long enough to be still going when the client's retries are spent
    // and the server is killed, however slow the machine.
    await page.getByTestId('opt-tokens').fill('2000');
    await page.getByTestId('opt-delay').fill('30');
    await page.getByTestId('send').click();
    // The client sends it again itself, with its key, until its retries
    // are spent (the first try and four more), then the page says so.
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 20_000 }).toContain('Could not reach the server');
    expect(keys.length).toBe(5);
    await page.unroute('**/v1/threads/*/runs');
    await server.restart(); // kill -9, then up again on the same data
    await waitForRunStatus(page, 'aborted');

    // Sent again, with the same key (its run may exist): the server hands
    // back the aborted run, and the message has left the box.
    await page.getByTestId('composer-input').press('Enter');
    await expect.poll(() => page.getByTestId('composer-input').inputValue(), { timeout: 10_000 }).toBe('');
    expect(keys.length).toBe(6);
    expect(new Set(keys).size).toBe(1);
    expect((await snapshot(server, tid)).runs.map((r) => r.status)).toEqual(['done', 'aborted']);

    // Retry: the same message as a new run, with a key of its own (and
    // the options as set now: a short answer).
    await page.locator('[data-testid="options"] summary').click();
    await page.getByTestId('opt-tokens').fill('5');
    await page.getByTestId('opt-delay').fill('0');
    const retry = page.locator('[data-testid="run"]').last().getByTestId('run-retry');
    await retry.waitFor();
    expect(await page.locator('[data-testid="run-retry"]:visible').count()).toBe(1); // on the last run only
    await shot(page, '13-aborted-run-retry');
    await retry.click();
    await expect.poll(async () => (await snapshot(server, tid)).runs.length, { timeout: 10_000 }).toBe(3);
    expect(keys.length).toBe(7);
    expect(keys[6]).not.toBe(keys[0]);
    await waitForRunStatus(page, 'done');
    const snap = await snapshot(server, tid);
    expect(snap.runs.map((r) => r.status)).toEqual(['done', 'aborted', 'done']);
    const users = await page.locator('[data-testid="message"][data-role="user"] .parts').allInnerTexts();
    expect(users.map((t) => t.trim())).toEqual(['First', 'Long answer, please', 'Long answer, please']);
    expect(await page.locator('[data-testid="run-retry"]:visible').count()).toBe(0); // the last run is done
    expect(errors).toEqual([]);
  });

  it('Retry sends the failed message again with the options as set now: another agent, other settings', async () => {
    const { server, page, errors } = await setup(['--agents', 'ext']);
    await page.goto(`${server.url}/?agent=ext&tokens=5&delay_ms=0&fail=1`);
    const tid = await send(page, 'Answer this');
    // The external agent's worker fails the run.
    const claim = await apiPost<{ run: { id: string }; lease: { token: string } }>(server, '/v1/workers/claim', { worker_id: 'w', agents: ['ext'], wait_ms: 10_000 });
    const res = await fetch(`${server.url}/v1/runs/${claim.run.id}/events`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Tether-Lease': claim.lease.token },
      body: JSON.stringify([{ type: 'run.finished', status: 'error', error: { code: 'agent_error', message: 'the model is down' } }]),
    });
    expect(res.ok).toBe(true);
    await waitForRunStatus(page, 'error');

    // The person picks the server's default agent, does not want it to
    // fail this time and asks for more words, then presses Retry.
    await page.locator('[data-testid="options"] summary').click();
    await page.getByTestId('opt-agent').fill('');
    await page.getByTestId('opt-fail').uncheck();
    await page.getByTestId('opt-tokens').fill('7');
    await page.locator('[data-testid="run"]').last().getByTestId('run-retry').click();
    await expect.poll(async () => (await snapshot(server, tid)).runs.length, { timeout: 10_000 }).toBe(2);
    await waitForRunStatus(page, 'done');
    const { runs } = await server.get<{ runs: { agent: string; status: string; metadata?: unknown; input: { messages: { content: string }[] } }[] }>(
      `/v1/threads/${encodeURIComponent(tid)}`,
    );
    expect(runs[1]!.agent).toBe('demo');
    expect(runs[1]!.metadata).toEqual({ demo: { tokens: 7, delay_ms: 0 } });
    expect(runs[1]!.input.messages.map((m) => m.content)).toEqual(['Answer this']);
    expect(runs.map((r) => r.status)).toEqual(['error', 'done']);
    expect(errors).toEqual([]);
  });

  it('Retry after a send whose answer was lost makes a new run, not the failed one handed back', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0&fail=1`);
    // The run is made, its answer is lost on the way back, and it fails.
    await page.route('**/v1/threads/*/runs', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      await route.fetch();
      await route.abort('connectionreset');
    });
    const tid = await send(page, 'Flaky');
    await expect.poll(() => page.getByTestId('composer-error').textContent(), { timeout: 20_000 }).toContain('Could not reach the server');
    await page.unroute('**/v1/threads/*/runs');
    await waitForRunStatus(page, 'error');
    // Retry, with the options unchanged: a second run.
    await page.locator('[data-testid="run"]').last().getByTestId('run-retry').click();
    await expect.poll(async () => (await snapshot(server, tid)).runs.length, { timeout: 10_000 }).toBe(2);
    await expect.poll(() => page.getByTestId('run').count(), { timeout: 10_000 }).toBe(2);
    expect(errors).toEqual([]);
  });

  it('two tabs send to the same thread at once: one run, the other tab keeps its message and says why', async () => {
    const { server, page, context, errors } = await setup();
    // Runs of ~3 s: both sends reach the server while the first one's run
    // is still going (with shorter runs the second could arrive after it
    // ended, and start a run of its own).
    await page.goto(`${server.url}/?tokens=120&delay_ms=20`);
    const tid = await send(page, 'Start');
    await waitForRunStatus(page, 'done');
    const other = await context.newPage();
    await other.goto(`${server.url}/?tokens=120&delay_ms=20#/t/${encodeURIComponent(tid)}`);
    await waitForRunStatus(other, 'done');
    await page.getByTestId('composer-input').fill('From tab one');
    await other.getByTestId('composer-input').fill('From tab two');
    await Promise.all([page.getByTestId('composer-input').press('Enter'), other.getByTestId('composer-input').press('Enter')]);
    await expect.poll(async () => (await snapshot(server, tid)).runs.length, { timeout: 10_000 }).toBe(2);
    await waitForRunStatus(page, 'done');
    await waitForRunStatus(other, 'done');
    const inBox = [await page.getByTestId('composer-input').inputValue(), await other.getByTestId('composer-input').inputValue()];
    expect(inBox.filter((t) => t !== '').length).toBe(1); // the loser kept its message
    expect(await page.getByTestId('run').count()).toBe(2);
    expect(await other.getByTestId('run').count()).toBe(2);
    // The loser sends it now: a third run, in both tabs, each message once.
    const loser = inBox[0] ? page : other;
    // As a person would: once Send is back (the tab may show Stop a moment
    // longer than the run's end, and Enter then keeps the message).
    await expect.poll(() => loser.getByTestId('send').isVisible(), { timeout: 10_000 }).toBe(true);
    await loser.getByTestId('composer-input').press('Enter');
    await expect.poll(async () => (await snapshot(server, tid)).runs.length, { timeout: 10_000 }).toBe(3);
    for (const p of [page, other]) {
      await expect.poll(() => p.getByTestId('run').count(), { timeout: 10_000 }).toBe(3);
      await waitForRunStatus(p, 'done');
      expect(await p.locator('[data-testid="message"][data-role="user"]').count()).toBe(3);
    }
    expect(errors).toEqual([]);
  });

  it('a long thread opens at its end; reading back is not disturbed by a run; a message sent from there is brought into view', async () => {
    const { server, page, errors } = await setup();
    const { id: tid } = await apiPost<{ id: string }>(server, '/v1/threads', { metadata: { title: 'Long' } });
    for (let i = 0; i < 40; i++) {
      const run = await apiPost<{ id: string }>(server, `/v1/threads/${tid}/runs`, {
        input: { messages: [{ role: 'user', content: `Question ${i}` }] },
        metadata: { demo: { tokens: 40, delay_ms: 0, reasoning: false, tool: false } },
      });
      await waitForApiRun(server, run.id, 'done');
    }
    await page.goto(`${server.url}/?tokens=200&delay_ms=20#/t/${tid}`);
    await expect.poll(() => page.getByTestId('run').count(), { timeout: 10_000 }).toBe(40);
    const t = page.getByTestId('transcript');
    const fromEnd = () => t.evaluate((e) => e.scrollHeight - e.scrollTop - e.clientHeight);
    await expect.poll(fromEnd, { timeout: 5000 }).toBeLessThan(2);

    // Reading back while a run (from elsewhere) streams: the page stays put.
    await t.evaluate((e) => (e.scrollTop = 200));
    await apiPost(server, `/v1/threads/${tid}/runs`, { input: { messages: [{ role: 'user', content: 'From elsewhere' }] }, metadata: { demo: { tokens: 30, delay_ms: 10 } } });
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 41);
    await waitForRunStatus(page, 'done');
    expect(await t.evaluate((e) => e.scrollTop)).toBe(200);

    // Sending from up there shows the message sent.
    await page.getByTestId('composer-input').fill('And now mine');
    await page.getByTestId('composer-input').press('Enter');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 42);
    await expect.poll(fromEnd, { timeout: 5000 }).toBeLessThan(120);
    await waitForRunStatus(page, 'done');
    await shot(page, '13-long-thread-sent');
    expect(errors).toEqual([]);
  });

  it('on a slow network a sent message leaves the box at once, and what is typed meanwhile is kept', async () => {
    const { server, page, context, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    await throttle(context, page, 1500);
    const box = page.getByTestId('composer-input');
    await box.fill('First question');
    await box.press('Enter');
    await expect.poll(() => box.inputValue(), { timeout: 1000 }).toBe('');
    const pending = page.getByTestId('pending-message');
    expect(await pending.isVisible()).toBe(true); // shown as on its way, in the transcript
    expect(await pending.textContent()).toContain('First question');
    await page.keyboard.type('Second thought');
    await page.waitForURL(/#\/t\/.+/, { timeout: 20_000 });
    await waitForRunStatus(page, 'done');
    await shot(page, '13-slow-network-sent');
    expect(await box.inputValue()).toBe('Second thought');
    expect(await pending.isVisible()).toBe(false);
    expect(await page.locator('[data-testid="message"][data-role="user"]').count()).toBe(1);
    expect(errors).toEqual([]);
  });

  it('on a slow network the thread just made is listed at once, not after the list\'s slow poll', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    await page.getByTestId('thread-list').waitFor();
    // The list's polls from now on take 15 s to answer.
    await page.route(
      (u) => u.pathname === '/v1/threads',
      async (route) => (route.request().method() === 'GET' ? (await sleep(15_000), route.continue().catch(() => {})) : route.continue()),
    );
    await sleep(2500); // a poll is under way
    const tid = await send(page, 'Listed at once');
    await waitForRunStatus(page, 'done');
    await expect.poll(() => page.locator(`[data-testid="thread-item"][data-thread-id="${tid}"]`).count(), { timeout: 3000 }).toBe(1);
    expect(errors).toEqual([]);
  });

  it('keyboard only: after Stop, the focus is back in the message box', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=400&delay_ms=30`);
    await page.getByTestId('composer-input').fill('Long one');
    await page.keyboard.press('Enter');
    await page.waitForURL(/#\/t\/.+/);
    await waitForRunStatus(page, 'running');
    await page.getByTestId('stop').focus();
    await page.keyboard.press('Enter');
    await waitForRunStatus(page, 'cancelled');
    await expect.poll(() => focused(page), { timeout: 5000 }).toBe('composer-input');
    expect(errors).toEqual([]);
  });

  it('keyboard only: after answering the form, the focus is back in the message box', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=20&delay_ms=5&ask=1`);
    await page.getByTestId('composer-input').fill('Ask me');
    await page.keyboard.press('Enter');
    await page.getByTestId('input-form').waitFor();
    await expect.poll(() => focused(page), { timeout: 5000 }).toBe('input-value');
    await page.keyboard.type('Blue');
    await page.keyboard.press('Enter');
    await waitForRunStatus(page, 'done');
    await sleep(300);
    expect(await focused(page)).toBe('composer-input');
    expect(errors).toEqual([]);
  });

  it('a tab frozen in the background mid-answer, then active again, shows the whole answer once', async () => {
    const { server, page, context, errors } = await setup(['--heartbeat', '1s']);
    await page.goto(`${server.url}/?tokens=300&delay_ms=20&reasoning=0&tool=0`);
    const tid = await send(page, 'Long answer');
    await waitForWords(page, 20);
    const cdp = await context.newCDPSession(page);
    await cdp.send('Page.enable');
    await cdp.send('Page.setWebLifecycleState', { state: 'frozen' });
    await sleep(12_000);
    await cdp.send('Page.setWebLifecycleState', { state: 'active' });
    await waitForRunStatus(page, 'done', 30_000);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(await assistantText(page)).toBe(fa.content);
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 15_000 }).toBe('open');
    expect(errors).toEqual([]);
  });

  it('a waiting run answered from two tabs at once: one answer, the run goes on in both, no form left', async () => {
    const { server, page, context, errors } = await setup();
    await page.goto(`${server.url}/?tokens=20&delay_ms=5&ask=1`);
    const tid = await send(page, 'Ask me');
    await page.getByTestId('input-form').waitFor();
    const other = await context.newPage();
    await other.goto(`${server.url}/#/t/${encodeURIComponent(tid)}`);
    await other.getByTestId('input-form').waitFor();
    await page.getByTestId('input-value').fill('Blue');
    await other.getByTestId('input-value').fill('Red');
    // Both at once, as near as two tabs can: the second click may find its
    // form gone already (the first answer reached that tab), which is one
    // of the outcomes; at least one click must land.
    const answer = (p: Page) =>
      p
        .getByTestId('input-submit')
        .click({ timeout: 5_000 })
        .then(() => true)
        .catch(async (err: unknown) => {
          if ((await p.getByTestId('input-form').count()) > 0) throw err;
          return false;
        });
    const clicked = await Promise.all([answer(page), answer(other)]);
    expect(clicked).toContain(true);
    await waitForRunStatus(page, 'done');
    await waitForRunStatus(other, 'done');
    await sleep(500);
    for (const p of [page, other]) {
      expect(await p.getByTestId('input-form').count()).toBe(0);
      expect(await p.getByTestId('send').isVisible()).toBe(true);
      expect(await p.getByTestId('composer-error').isVisible()).toBe(false);
    }
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await assistantText(other)).toBe(fa.content);
    expect(errors).toEqual([]);
  });
});
