import { describe, expect, it } from 'vitest';
import { assistantText, pageTests, send, sleep, waitForRunStatus, waitForWords, type FinalAnswer } from './helpers.js';

const setup = pageTests();

describe('probe', () => {
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
    await Promise.all([page.getByTestId('input-submit').click(), other.getByTestId('input-submit').click()]);
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
