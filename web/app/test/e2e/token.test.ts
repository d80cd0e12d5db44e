// The page with per-user tokens (JWTs) on the real binary in Chromium: a
// login hook (`window.tetherToken`, as an operator's wrapper page sets it)
// hands out short-lived tokens; the page follows a long demo run while its
// tokens expire mid-answer, and ends with the complete answer, once.
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Server, assistantText, lastRunStatus, launch, newPage, send, shot, waitForRunStatus, waitForWords, type FinalAnswer } from './helpers.js';

const SECRET = 'page-test-hmac-secret-of-more-than-32-bytes';

/** An HS256 user token: the minimal one of the contract, `{sub, exp}`. */
function mint(sub: string, lifeSeconds: number): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = b64({ alg: 'HS256', typ: 'JWT' });
  const body = b64({ sub, exp: Math.floor(Date.now() / 1000) + lifeSeconds });
  return `${head}.${body}.${createHmac('sha256', SECRET).update(`${head}.${body}`).digest('base64url')}`;
}

/** A token's exp in milliseconds. */
function expiry(token: string): number {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp * 1000;
}

let browser: Browser;
const cleanups: (() => Promise<unknown> | void)[] = [];

beforeAll(async () => {
  browser = await launch();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await Promise.resolve(c()).catch(() => {});
});
afterAll(async () => {
  await browser?.close();
});

/** A server that takes user tokens signed with SECRET. */
async function jwtServer(): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'tether-app-jwt-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const secretFile = join(dir, 'secret');
  writeFileSync(secretFile, `${SECRET}\n`);
  const server = await Server.start(['--jwt-secret-file', secretFile]);
  cleanups.push(() => server.stop());
  return server;
}

/** The thread event stream requests of a page: token, cursor, when. */
function watchStreams(page: Page): { token: string; last: string | undefined; at: number }[] {
  const streams: { token: string; last: string | undefined; at: number }[] = [];
  page.on('request', (req) => {
    if (!/\/v1\/threads\/[^/]+\/events$/.test(new URL(req.url()).pathname)) return;
    const at = Date.now();
    void req.allHeaders().then((h) => streams.push({ token: (h['authorization'] ?? '').replace(/^Bearer /, ''), last: h['last-event-id'], at }));
  });
  return streams;
}

describe('chat page with expiring tokens', () => {
  it('follows a long run while its token expires mid-answer: refreshed by the client, the complete answer once', async () => {
    const server = await jwtServer();
    const { context, page, errors } = await newPage(browser);
    cleanups.push(() => context.close());

    // The login hook an operator's wrapper page would set: it keeps its
    // session's token (6-second tokens for alice, minted by its backend:
    // here Node, so the page never sees the secret) and gets a new one only
    // when the client says the old one is expiring or expired.
    const minted: { reason: string; token: string }[] = [];
    await page.exposeFunction('mintTetherToken', (reason: string) => {
      const token = mint('alice', 6);
      minted.push({ reason, token });
      return token;
    });
    await page.addInitScript(() => {
      const w = window as unknown as { tetherToken: unknown; mintTetherToken: (reason: string) => Promise<string> };
      let held: Promise<string> | undefined;
      w.tetherToken = (r?: { reason: string }) => {
        if (!held || (r && r.reason !== 'initial')) held = w.mintTetherToken(r?.reason ?? 'initial');
        return held;
      };
    });
    const streams = watchStreams(page);

    // About 14 s of answer: more than two token lifetimes.
    await page.goto(`${server.url}/?tokens=140&delay_ms=100`);
    const tid = await send(page, 'Tell me a long story');
    await waitForWords(page, 10);
    await shot(page, '10-token-streaming');
    await waitForRunStatus(page, 'done', 60_000);
    await shot(page, '10-token-done');

    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`, mint('alice', 60));
    expect(fa.complete).toBe(true);
    expect(fa.content.split(' ').length).toBeGreaterThanOrEqual(140);
    expect(await assistantText(page)).toBe(fa.content);
    const assistant = page.getByTestId('message').and(page.locator('[data-role="assistant"]'));
    expect(await assistant.count()).toBe(1);
    expect(await assistant.getByTestId('text-part').count()).toBe(1);

    // The stream was ended at a token's exp mid-answer and resumed from its
    // cursor with a newer token, more than once.
    const resumed = streams.filter((s) => s.last);
    expect(resumed.length).toBeGreaterThanOrEqual(2);
    expect(new Set(streams.map((s) => s.token)).size).toBeGreaterThanOrEqual(3);
    for (const s of streams) {
      expect(minted.map((m) => m.token)).toContain(s.token);
      // Never a resume with the token that just expired (the server's leeway
      // on requests would take it, and end the stream at once, again and
      // again until the leeway ran out).
      expect(expiry(s.token)).toBeGreaterThan(s.at);
    }
    // Refreshed ahead of exp (and, if the server ended a stream first, on token_expired): never a prompt.
    expect(minted.filter((m) => m.reason !== 'initial').length).toBeGreaterThanOrEqual(2);
    expect(await page.getByTestId('token-prompt').count()).toBe(0);
    // Never stored: the hook's tokens live in memory only.
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length, document.cookie])).toEqual([0, 0, '']);
    expect(errors).toEqual([]);
  });

  it('works with the wrapper page of docs/operations.md, as written', async () => {
    const server = await jwtServer();
    const { context, page, errors } = await newPage(browser);
    cleanups.push(() => context.close());
    // The wrapper, taken from the docs, served at the page's address; its
    // token route answers as an app's backend would, with 4-second tokens.
    const ops = readFileSync(resolve(import.meta.dirname, '../../../../docs/operations.md'), 'utf8');
    const wrapper = /\*\*The page\.\*\*[\s\S]*?```html\n([\s\S]*?)```/.exec(ops)?.[1];
    expect(wrapper).toContain('window.tetherToken');
    await page.route((u) => u.pathname === '/', (route) => route.fulfill({ contentType: 'text/html', body: wrapper! }));
    const minted: string[] = [];
    await page.route('**/auth/tether-token', (route) => {
      minted.push(mint('alice', 4));
      return route.fulfill({ json: { token: minted[minted.length - 1] } });
    });
    const streams = watchStreams(page);

    await page.goto(`${server.url}/?tokens=80&delay_ms=100`);
    const tid = await send(page, 'Another long one');
    await waitForRunStatus(page, 'done', 60_000);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`, mint('alice', 60));
    expect(fa.complete).toBe(true);
    expect(await assistantText(page)).toBe(fa.content);
    expect(await page.getByTestId('message').and(page.locator('[data-role="assistant"]')).count()).toBe(1);
    expect(streams.filter((s) => s.last).length).toBeGreaterThanOrEqual(1);
    for (const s of streams) expect(expiry(s.token)).toBeGreaterThan(s.at);
    expect(await page.getByTestId('token-prompt').count()).toBe(0);
    expect(errors).toEqual([]);
  });

  it('asks again when a pasted token expires, and the answer goes on with the new one', async () => {
    const server = await jwtServer();
    const { context, page, errors } = await newPage(browser);
    cleanups.push(() => context.close());
    await page.goto(`${server.url}/?tokens=80&delay_ms=100`);
    const prompt = page.getByTestId('token-prompt');
    await prompt.getByTestId('token-input').fill(mint('alice', 3));
    await prompt.getByTestId('token-save').click();
    await page.waitForLoadState('load');
    const tid = await send(page, 'And one more');
    // At the exp the server ends the stream: a pasted token cannot be
    // renewed by the page, so it asks at once (not after the leeway).
    await expect.poll(() => (prompt.count().then((n) => (n ? prompt.textContent() : ''))), { timeout: 10_000 }).toContain('The token has expired');
    await shot(page, '10-token-pasted-expired');
    expect(await lastRunStatus(page)).toBe('running');
    await prompt.getByTestId('token-input').fill(mint('alice', 60));
    await prompt.getByTestId('token-save').click();
    await page.waitForLoadState('load');
    await waitForRunStatus(page, 'done', 30_000);
    const fa = await server.get<FinalAnswer>(`/v1/threads/${tid}/final-answer`, mint('alice', 60));
    expect(await assistantText(page)).toBe(fa.content);
    expect(errors).toEqual([]);
  });
});
