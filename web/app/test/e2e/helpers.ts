// The page tests' world: a real `tether serve` per test (killable with -9
// and restartable on the same port and data directory), Debian's Chromium
// driven by playwright-core, screenshots, and reads of the page and the API.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, inject } from 'vitest';

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.unref();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => ok(port));
    });
  });
}

/** A `tether serve` process on 127.0.0.1 with its own data directory. */
export class Server {
  private child: ChildProcess | undefined;
  private log = '';

  private constructor(
    readonly port: number,
    readonly dataDir: string,
    private readonly args: string[],
  ) {}

  /** The page's and the API's base URL. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts a server on a free port; `args` are extra flags. */
  static async start(args: string[] = []): Promise<Server> {
    const s = new Server(await freePort(), mkdtempSync(join(tmpdir(), 'tether-app-data-')), args);
    await s.spawn();
    return s;
  }

  private async spawn(): Promise<void> {
    const child = spawn(inject('tetherBin'), ['serve', '--addr', `127.0.0.1:${this.port}`, '--data', this.dataDir, '--log-level', 'warn', ...this.args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (b: Buffer) => (this.log += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (this.log += b.toString()));
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`tether exited with ${child.exitCode}:\n${this.log}`);
      try {
        if ((await fetch(`${this.url}/readyz`)).ok) return;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    throw new Error(`tether did not become ready:\n${this.log}`);
  }

  /** kill -9: no shutdown, no goodbye to the streams. */
  async kill9(): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }

  /** Starts the server again on the same port and data directory. */
  async restart(): Promise<void> {
    await this.kill9();
    await this.spawn();
  }

  /** Stops the server (SIGTERM, then SIGKILL) and removes its data. */
  async stop(): Promise<void> {
    const c = this.child;
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      const t = setTimeout(() => c.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** GET a JSON resource of the API (from Node: the browser's network state does not apply). */
  async get<T>(path: string, token?: string): Promise<T> {
    const res = await fetch(this.url + path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as T;
  }
}

/** POSTs JSON to the API as a program would (from Node: no Origin), and returns the answer's JSON. */
export async function apiPost<T>(server: Server, path: string, body: unknown = {}): Promise<T> {
  const res = await fetch(server.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Waits until a run, read from the API, has the status. */
export async function waitForApiRun(server: Server, runId: string, status: string, timeout = 20_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const { run } = await server.get<{ run: { status: string } }>(`/v1/runs/${runId}`);
    if (run.status === status) return;
    if (Date.now() > deadline) throw new Error(`run ${runId} is ${run.status}, not ${status}`);
    await sleep(50);
  }
}

/** The answer of GET /v1/threads/{tid}/final-answer. */
export interface FinalAnswer {
  content: string;
  complete: boolean;
  status: string;
  run_id: string;
}

/** Launches Debian's Chromium, headless, with a fresh profile. */
export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: inject('chromium'),
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A new context and page that fail the test on any page error. */
export async function newPage(browser: Browser, opts: Parameters<Browser['newContext']>[0] = {}): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...opts });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { context, page, errors };
}

/**
 * Registers, for the test file that calls it at its top level, one
 * Chromium for the file and a clean-up after each test, and returns
 * setup: a fresh server (started with args) and a page in a context of
 * its own, both ended after the test.
 */
export function pageTests(): (
  args?: string[],
  opts?: Parameters<typeof newPage>[1],
) => Promise<{ server: Server; context: BrowserContext; page: Page; errors: string[] }> {
  let browser: Browser;
  const cleanups: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    browser = await launch();
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
  });
  afterAll(async () => {
    await browser?.close();
  });
  return async (args = [], opts = {}) => {
    const server = await Server.start(args);
    cleanups.push(() => server.stop());
    const p = await newPage(browser, opts);
    cleanups.push(() => p.context.close());
    return { server, ...p };
  };
}

/** Saves a PNG of the page under artifacts/screenshots/. */
export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(inject('screenshots'), `${name}.png`), animations: 'disabled', caret: 'hide' });
}

/** Types a message in the composer and sends it; returns the thread id once the page shows it. */
export async function send(page: Page, text: string): Promise<string> {
  const before = threadOf(page);
  await page.getByTestId('composer-input').fill(text);
  await page.getByTestId('send').click();
  if (!before) await page.waitForURL(/#\/t\/.+/);
  return threadOf(page)!;
}

/** The thread id in the page's URL hash. */
export function threadOf(page: Page): string | undefined {
  const m = /#\/t\/(.+)$/.exec(new URL(page.url()).hash);
  return m ? decodeURIComponent(m[1]!) : undefined;
}

/** The text the page shows for the last assistant message: its text parts, joined. */
export function assistantText(page: Page): Promise<string> {
  return page.evaluate(() => {
    const msgs = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
    const last = msgs[msgs.length - 1];
    if (!last) return '';
    return [...last.querySelectorAll('[data-testid="text-part"]')].map((e) => e.textContent ?? '').join('');
  });
}

/** Waits until the page shows at least `n` words of the last assistant message. */
export async function waitForWords(page: Page, n: number): Promise<void> {
  await page.waitForFunction(
    (n) => {
      const msgs = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const last = msgs[msgs.length - 1];
      const text = last ? [...last.querySelectorAll('[data-testid="text-part"]')].map((e) => e.textContent ?? '').join('') : '';
      return text.split(/\s+/).filter(Boolean).length >= n;
    },
    n,
    { timeout: 20_000 },
  );
}

/** Waits until the last run on the page has the status. */
export async function waitForRunStatus(page: Page, status: string, timeout = 30_000): Promise<void> {
  await page.waitForFunction(
    (status) => {
      const runs = document.querySelectorAll('[data-testid="run"]');
      return runs[runs.length - 1]?.getAttribute('data-status') === status;
    },
    status,
    { timeout },
  );
}

/** The status of the last run on the page. */
export function lastRunStatus(page: Page): Promise<string | null> {
  return page.evaluate(() => {
    const runs = document.querySelectorAll('[data-testid="run"]');
    return runs[runs.length - 1]?.getAttribute('data-status') ?? null;
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
