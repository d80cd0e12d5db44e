// The composer's Send and Stop on the real binary in a real Chromium: every
// state the two buttons take is recorded (a MutationObserver from the
// page's first frame), and Stop must never show while no run shown is
// pending, running or waiting; once a run's end is shown, Send is back for
// good. Through the ways a run's end reaches the page: its run.finished on
// the stream, a stop, and the server's snapshot after the stream could not
// be resumed, then the stream back from the snapshot's offset.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { pageTests, send, sleep, waitForRunStatus, waitForWords } from './helpers.js';

const setup = pageTests();

interface State {
  stop: boolean;
  /** Each run shown: its id and status. */
  runs: [string, string][];
}

/** Records, in window.composerLog, each change of Stop's visibility or of a run's status. */
function recordComposer(): void {
  const w = window as unknown as { composerLog: State[] };
  w.composerLog = [];
  const start = (): void => {
    const stop = document.querySelector<HTMLElement>('[data-testid="stop"]');
    if (!stop) return void requestAnimationFrame(start);
    let last = '';
    const note = (): void => {
      const runs = [...document.querySelectorAll('[data-testid="run"]')].map((r): [string, string] => [r.getAttribute('data-run-id') ?? '', r.getAttribute('data-status') ?? '']);
      const key = JSON.stringify([stop.hidden, runs]);
      if (key !== last) w.composerLog.push({ stop: !stop.hidden, runs });
      last = key;
    };
    note();
    new MutationObserver(note).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['hidden', 'data-status'] });
  };
  start();
}

const inProgress = (status: string) => status === 'pending' || status === 'running' || status === 'waiting';

/**
 * The recorded states that break the rule: Stop shown with no run in
 * progress, or a run shown in progress again after its end was shown.
 */
async function broken(page: Page): Promise<State[]> {
  const log = await page.evaluate(() => (window as unknown as { composerLog: State[] }).composerLog);
  expect(log.length).toBeGreaterThan(0);
  const ended = new Set<string>();
  const bad: State[] = [];
  for (const s of log) {
    const back = s.runs.some(([id, st]) => inProgress(st) && ended.has(id));
    if (back || (s.stop && !s.runs.some(([, st]) => inProgress(st)))) bad.push(s);
    for (const [id, st] of s.runs) if (!inProgress(st)) ended.add(id);
  }
  return bad;
}

describe('composer', () => {
  it('shows Stop only while a run is in progress, and Send for good once its end is shown', async () => {
    const { server, page, context, errors } = await setup();
    await page.addInitScript(recordComposer);
    await page.goto(`${server.url}/?tokens=60&delay_ms=20`);
    await send(page, 'To its end');
    await waitForRunStatus(page, 'done');

    // Stopped.
    await send(page, 'Stopped halfway');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 2);
    await waitForWords(page, 3);
    await page.getByTestId('stop').click();
    await waitForRunStatus(page, 'cancelled', 15_000);

    // Its end from the server's snapshot: the stream cannot be resumed
    // (every stream request fails, REST works), then it can again.
    await send(page, 'Recovered');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="run"]').length === 3);
    await waitForWords(page, 3);
    await page.route(/\/v1\/threads\/[^/?]+\/events/, (route) => route.abort('connectionreset'));
    await context.setOffline(true);
    await sleep(300);
    await context.setOffline(false);
    await waitForRunStatus(page, 'done', 45_000);
    await page.unroute(/\/v1\/threads\/[^/?]+\/events/);
    await expect.poll(() => page.getByTestId('connection').getAttribute('data-state'), { timeout: 20_000 }).toBe('open');
    await sleep(1000); // what the stream brings back after the snapshot

    expect(await broken(page)).toEqual([]);
    expect(await page.getByTestId('send').isVisible()).toBe(true);
    expect(await page.getByTestId('stop').isVisible()).toBe(false);
    expect(await page.getByTestId('run').count()).toBe(3);
    expect(errors).toEqual([]);
  });
});
