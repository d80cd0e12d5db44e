// What others send, shown by the page on the real binary in a real
// Chromium: an agent's text, tool calls, data, question and error full of
// markup and very long words (always text, never markup; wrapped at phone
// width, never cut off), a thread deleted while it is open, more threads
// than the list's first page, a send whose answer was lost and an error
// answer to the list's poll. Screenshots: artifacts/screenshots/11-*.png.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { Server, apiPost, pageTests, send, shot, waitForRunStatus, waitForWords } from './helpers.js';

const setup = pageTests();

const phone = { viewport: { width: 375, height: 812 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };

/** The sidebar row of a thread. */
const row = (page: Page, tid: string) => page.locator(`[data-testid="thread-item"][data-thread-id="${tid}"]`);

/** Markup that would run if the page inserted it as HTML. */
const EVIL = '<img src=x onerror="window.__injected=1"><b>bold</b>';
/** A word too long for any line. */
const LONG = 'x'.repeat(400);

async function postJSON(server: Server, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
  return res;
}

/**
 * Sends a message to the external agent "ext" from the page and answers it
 * as its worker would: reasoning, text, a tool call, a data part, then a
 * question (EVIL and LONG everywhere). Returns the thread id and a function
 * that appends more events.
 */
async function hostileRun(server: Server, page: Page): Promise<{ tid: string; append: (events: unknown[]) => Promise<void> }> {
  await page.goto(`${server.url}/?agent=ext`);
  const tid = await send(page, `${EVIL} ${LONG}`);
  const claim = (await (await postJSON(server, '/v1/workers/claim', { worker_id: 'w', agents: ['ext'], wait_ms: 10_000 })).json()) as {
    run: { id: string };
    lease: { token: string };
  };
  const append = async (events: unknown[]) => {
    await postJSON(server, `/v1/runs/${claim.run.id}/events`, events, { 'Tether-Lease': claim.lease.token });
  };
  await append([
    { type: 'message.started', message_id: 'm1', role: 'assistant' },
    { type: 'reasoning.delta', message_id: 'm1', delta: `${EVIL}${LONG}` },
    { type: 'text.delta', message_id: 'm1', delta: `**${EVIL}** \`${EVIL}\` ${LONG}\n\`\`\`${EVIL}\n${EVIL}${LONG}\n\`\`\`\n` },
    { type: 'tool.started', message_id: 'm1', call_id: 'c1', name: `${EVIL}${LONG}` },
    { type: 'tool.finished', message_id: 'm1', call_id: 'c1', input: { q: EVIL + LONG }, output: { html: EVIL + LONG } },
    { type: 'message.finished', message_id: 'm1', status: 'done' },
    { type: 'message.created', message: { id: 'm2', role: 'assistant', parts: [{ type: 'data', name: `${EVIL}${LONG}`, data: { x: EVIL } }] } },
    { type: 'run.waiting', request: { id: 'q1', kind: 'input', payload: { prompt: `${EVIL} ${LONG}` } } },
  ]);
  await page.getByTestId('input-form').waitFor();
  return { tid, append };
}

/**
 * Elements whose content sticks out of them sideways and is not scrolled
 * or cut with an ellipsis on purpose (a code block scrolls, a title ends in
 * "…"): text a person cannot read in full.
 */
function overflowing(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const out: string[] = [];
    const vw = document.documentElement.clientWidth;
    for (const el of document.querySelectorAll<HTMLElement>('#app *')) {
      const cs = getComputedStyle(el);
      if (cs.display === 'inline' || cs.display === 'none' || el.closest('pre.codeblock')) continue;
      const clipped = cs.overflowX !== 'visible';
      const r = el.getBoundingClientRect();
      if (r.width === 0) continue;
      if ((!clipped && el.scrollWidth > el.clientWidth + 1) || r.right > vw + 1) out.push(`${el.tagName.toLowerCase()}.${el.className}`);
    }
    return out;
  });
}

describe('what others send', () => {
  it('shows markup from the user, the agent and the server as text, never as HTML', async () => {
    const { server, page, errors } = await setup(['--agents', 'ext']);
    const { tid, append } = await hostileRun(server, page);
    expect(await page.getByTestId('input-prompt').textContent()).toBe(`${EVIL} ${LONG}`);
    await page.getByTestId('input-value').fill(EVIL);
    await page.getByTestId('input-submit').click();
    await waitForRunStatus(page, 'running'); // the answer reached the run
    await append([{ type: 'run.finished', status: 'error', error: { code: 'agent_error', message: `${EVIL} ${LONG}` } }]);
    await waitForRunStatus(page, 'error');
    await shot(page, '11-markup-as-text');

    expect(await page.evaluate(() => (window as { __injected?: number }).__injected)).toBeUndefined();
    expect(await page.locator('#app img, #app b').count()).toBe(0);
    expect(await page.getByTestId('run-status').textContent()).toBe(`${EVIL} ${LONG}`);
    expect(await page.getByTestId('tool-name').textContent()).toBe(`${EVIL}${LONG}`);
    expect(await page.locator('[data-role="user"] .parts').first().textContent()).toBe(`${EVIL} ${LONG}`);
    expect(await page.locator('.text strong').first().textContent()).toBe(EVIL); // **…** is markdown, its inside text
    expect(await page.locator('.codeblock code').first().textContent()).toBe(`${EVIL}${LONG}`);
    expect(await row(page, tid).locator('.thread-title').textContent()).toBe(`${EVIL} ${LONG}`.slice(0, 57) + '…');
    expect(await page.title()).toBe(`${`${EVIL} ${LONG}`.slice(0, 57)}… — Tether`);
    expect(errors).toEqual([]);
  });

  it('wraps very long words at phone width: nothing is cut off or scrolls the page sideways', async () => {
    const { server, page, errors } = await setup(['--agents', 'ext'], phone);
    const { append } = await hostileRun(server, page);
    await shot(page, '11-phone-long-question');
    expect(await overflowing(page)).toEqual([]);
    await page.getByTestId('input-value').fill('fine');
    await page.getByTestId('input-submit').click();
    await waitForRunStatus(page, 'running'); // the answer reached the run
    await append([{ type: 'run.finished', status: 'error', error: { code: 'agent_error', message: `Could not fetch https://example.com/${LONG}` } }]);
    await waitForRunStatus(page, 'error');
    await shot(page, '11-phone-long-error');
    expect(await overflowing(page)).toEqual([]);

    // A long agent name in Options, and the server's error about it.
    await page.goto(`${server.url}/?agent=${'y'.repeat(300)}`);
    await page.getByTestId('composer-input').fill('hi');
    await page.getByTestId('send').click();
    await page.getByTestId('composer-error').waitFor();
    await shot(page, '11-phone-long-agent');
    expect(await overflowing(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    expect(errors).toEqual([]);
  });

  it('says so when the open thread is deleted, drops it from the list, and a new message starts a new thread', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=400&delay_ms=40`);
    const tid = await send(page, 'Soon gone');
    await waitForWords(page, 5); // deleted mid-run
    await row(page, tid).waitFor();
    expect(await page.getByTestId('stop').isVisible()).toBe(true);
    const res = await fetch(`${server.url}/v1/threads/${encodeURIComponent(tid)}`, { method: 'DELETE' });
    expect(res.status).toBe(204);

    await expect.poll(() => page.getByTestId('pane-status').textContent(), { timeout: 10_000 }).toBe('This conversation does not exist, or it was deleted.');
    expect(await page.getByTestId('pane-status').isVisible()).toBe(true);
    expect(await page.getByTestId('run').count()).toBe(0);
    expect(await page.getByTestId('stop').isVisible()).toBe(false); // no run to stop
    await expect.poll(() => row(page, tid).count(), { timeout: 10_000 }).toBe(0);
    await shot(page, '11-deleted-while-open');

    await page.goto(`${server.url}/?tokens=5&delay_ms=0#/t/${encodeURIComponent(tid)}`); // short runs from here; the page reopens it
    await expect.poll(() => page.getByTestId('pane-status').textContent(), { timeout: 10_000 }).toBe('This conversation does not exist, or it was deleted.');
    await page.getByTestId('composer-input').fill('Still here?');
    await page.getByTestId('send').click();
    await page.waitForURL((u) => !u.hash.includes(encodeURIComponent(tid)) && /#\/t\/.+/.test(u.hash));
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false);
    expect(await page.getByTestId('pane-status').isVisible()).toBe(false);
    expect(errors).toEqual([]);
  });

  it('lists more threads than its first page: "Show more" reaches the oldest', async () => {
    const { server, page, errors } = await setup();
    const ids: string[] = [];
    for (let i = 0; i < 130; i++) ids.push((await apiPost<{ id: string }>(server, '/v1/threads', { metadata: { title: `Thread ${i}` } })).id);
    await page.goto(server.url);
    await expect.poll(() => page.getByTestId('thread-item').count(), { timeout: 10_000 }).toBe(100);
    expect(await row(page, ids[0]!).count()).toBe(0); // the oldest is not on the first page
    await page.getByTestId('threads-more').click();
    await expect.poll(() => page.getByTestId('thread-item').count(), { timeout: 10_000 }).toBe(130);
    expect(await row(page, ids[0]!).locator('.thread-title').textContent()).toBe('Thread 0');
    expect(await page.getByTestId('threads-more').isVisible()).toBe(false);
    // The next polls keep them all.
    await page.waitForTimeout(2500);
    expect(await page.getByTestId('thread-item').count()).toBe(130);
    expect(errors).toEqual([]);
  });

  it('a send whose answer was lost is sent again by the client with its key: one run, no error', async () => {
    const { server, page, errors } = await setup();
    await page.goto(`${server.url}/?tokens=5&delay_ms=0`);
    const tid = await send(page, 'First');
    await waitForRunStatus(page, 'done');
    // The next run is made, but its answer is lost on the way back: the
    // client hears 503 unavailable ("outcome unknown, retry"), and sends
    // the request again, with the same Idempotency-Key: the server answers
    // with the run it made. (Before, the page showed the error and kept
    // the message, for the user to send again.)
    let lost = 0;
    const keys: string[] = [];
    await page.route('**/v1/threads/*/runs', async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      keys.push(route.request().headers()['idempotency-key'] ?? '');
      if (lost > 0) return route.continue();
      lost++;
      await route.fetch();
      await route.fulfill({ status: 503, json: { error: { code: 'unavailable', message: 'the write timed out: its outcome is unknown' } } });
    });
    await page.getByTestId('composer-input').fill('Only once, please');
    await page.getByTestId('send').click();
    await expect.poll(() => keys.length, { timeout: 10_000 }).toBe(2); // the client's retry
    await expect.poll(() => page.getByTestId('composer-input').inputValue(), { timeout: 10_000 }).toBe('');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
    await waitForRunStatus(page, 'done');
    expect(await page.getByTestId('composer-error').isVisible()).toBe(false);
    const snap = await server.get<{ runs: unknown[]; messages: { role: string }[] }>(`/v1/threads/${encodeURIComponent(tid)}`);
    expect(snap.runs.length).toBe(2);
    expect(snap.messages.filter((m) => m.role === 'user').length).toBe(2);
    expect(await page.getByTestId('run').count()).toBe(2);
    expect(lost).toBe(1);
    expect(keys.length).toBe(2);
    expect(keys[1]).toBe(keys[0]);
    expect(errors).toEqual([]);
  });

  it("says what the server answered when the thread list gets an error, not that the server is unreachable", async () => {
    const { server, page, errors } = await setup();
    await page.goto(server.url);
    await page.getByTestId('thread-list').waitFor();
    const list = (u: URL) => u.pathname === '/v1/threads';
    await page.route(
      list,
      (r) => r.fulfill({ status: 503, headers: { 'Retry-After': '1' }, json: { error: { code: 'unavailable', message: 'the store cannot be reached' } } }),
    );
    const notice = page.getByTestId('server-notice');
    await expect.poll(() => notice.textContent(), { timeout: 10_000 }).toBe('Server unavailable: the store cannot be reached — retrying…');
    await page.unroute(list);
    await server.kill9(); // and now no answer at all
    await expect.poll(() => notice.textContent(), { timeout: 10_000 }).toBe('Server unreachable — retrying…');
    expect(errors).toEqual([]);
  });
});
