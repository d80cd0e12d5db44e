// The WebSocket transport against a real `tether serve`: many
// subscriptions on one socket, sockets cut mid-run, a server restarted,
// expiring tokens, and each way the server ends a subscription. Every
// store must end with exactly the server's state, each event applied once.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import WebSocket from 'ws';
import { TetherClient, type TetherClientOptions } from '../../src/client.js';
import type { ApplyResult } from '../../src/store.js';
import type { TokenRequest } from '../../src/token.js';
import type { TetherEvent } from '../../src/types.js';
import { webSocket, type WebSocketConstructor } from '../../src/websocket.js';
import { mintJWT } from '../helpers/jwt.js';
import { demo, expectSameAsServer, threadName, until, url } from './helpers.js';
import { Proxy } from './proxy.js';

/** Every frame the server sent to the client's sockets, parsed. */
let frames: Record<string, unknown>[] = [];

// The ws package's WebSocket (Node 20 has no global one), recording what
// the server sends.
class RecordingWS extends WebSocket {
  constructor(address: string) {
    super(address);
    this.on('message', (data) => frames.push(JSON.parse(String(data)) as Record<string, unknown>));
  }
}

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
  frames = [];
});

function wsClient(opts: Partial<TetherClientOptions> = {}): TetherClient {
  const client = new TetherClient({
    baseUrl: url(),
    transport: webSocket({ WebSocket: RecordingWS as unknown as WebSocketConstructor }),
    backoff: { initialMs: 50, maxMs: 400 },
    lifecycle: null,
    ...opts,
  });
  return client;
}

const direct = () => new TetherClient({ baseUrl: url(), lifecycle: null });

async function metric(name: string, base = url()): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}
const openSockets = (base?: string) => metric('tether_ws_connections', base);

/** Counts what the stores did with each event. */
function counting() {
  const results = new Map<ApplyResult, number>();
  return { results, onEvent: (_e: TetherEvent, r: ApplyResult) => results.set(r, (results.get(r) ?? 0) + 1) };
}

const ends = (reason: string) => frames.filter((f) => f.op === 'end' && f.reason === reason);

describe('WebSocket transport (real server)', () => {
  it('follows 8 threads and their runs on one socket (past the browser\'s 6 connections per origin), each store the server\'s', async () => {
    const d = direct();
    const proxy = await Proxy.start(url());
    cleanup.push(() => proxy.close());
    const requests: string[] = [];
    const client = wsClient({ baseUrl: proxy.url, fetch: (input, init) => (requests.push(`${init?.method ?? 'GET'} ${String(input)}`), fetch(input, init)) });
    const c = counting();
    const tids = Array.from({ length: 8 }, (_, i) => threadName(`ws-many-${i}`));
    await Promise.all(tids.map((id) => d.createThread({ id })));
    const lives = tids.map((tid) => client.followThread(tid, { reconcileIntervalMs: 0, onEvent: c.onEvent }));
    cleanup.push(() => lives.forEach((l) => l.close()));
    await until(() => lives.every((l) => l.store.getState().loaded), 10_000, 'snapshots');
    const runs = await Promise.all(lives.map((l) => l.startRun(demo(30, 5))));
    // And each run followed on its own too, on the same socket.
    const followers = runs.map((r) => client.followRun(r.id, { reconcileIntervalMs: 0 }));
    cleanup.push(() => followers.forEach((l) => l.close()));
    const finished = await Promise.all(followers.map((f) => f.finished));
    expect(finished.map((r) => r?.status)).toEqual(runs.map(() => 'done'));
    await until(() => lives.every((l, i) => l.store.run(runs[i]!.id)?.status === 'done'), 15_000, 'runs in the thread stores');
    expect(proxy.upgrades).toBe(1);
    expect(requests.filter((r) => r.includes('/events'))).toEqual([]); // no SSE stream at all
    for (const l of [...lives, ...followers]) await expectSameAsServer(l.store, d);
    expect([...c.results.keys()]).toEqual(['applied']);
    expect(new Set(frames.filter((f) => f.op === 'subscribed').map((f) => f.id)).size).toBe(16);
    for (const l of lives) l.close();
    await until(() => proxy.sockets === 0, 5000, 'the socket closed with the last subscription');
  });

  it('sockets cut mid-run (no close frame) resume every subscription from its offset: nothing lost, nothing twice', async () => {
    const d = direct();
    const proxy = await Proxy.start(url());
    cleanup.push(() => proxy.close());
    const client = wsClient({ baseUrl: proxy.url });
    const tid = threadName('ws-cut');
    await d.createThread({ id: tid });
    const c = counting();
    const thread = client.followThread(tid, { reconcileIntervalMs: 0, onEvent: c.onEvent });
    cleanup.push(() => thread.close());
    await until(() => thread.store.getState().loaded, 5000, 'snapshot');
    const run = client.startRun(tid, demo(200, 5), { reconcileIntervalMs: 0, onEvent: c.onEvent });
    cleanup.push(() => run.close());
    // Cut the socket each time some more of the answer has arrived.
    let applied = 0;
    for (let i = 0; i < 4; i++) {
      const at = applied + 40;
      await until(() => (c.results.get('applied') ?? 0) >= at, 15_000, `event ${at}`);
      applied = c.results.get('applied') ?? 0;
      expect(proxy.cutSockets()).toBe(1);
    }
    expect((await run.finished)?.status).toBe('done');
    await until(() => thread.store.run(run.runId!)?.status === 'done', 15_000, 'the run in the thread store');
    expect(proxy.upgrades).toBeGreaterThanOrEqual(5);
    expect([...c.results.keys()]).toEqual(['applied']);
    await expectSameAsServer(thread.store, d);
    await expectSameAsServer(run.store, d);
    const fa = await d.finalAnswer(tid);
    expect(run.store.finalAnswer()?.content).toBe(fa.content);
    expect(thread.store.getState().recoveredRuns.size).toBe(0); // resumed by the socket, no fallback
  });

  it('each end reason: run_finished, message_finished (done), thread_deleted (not_found), unsubscribed (close)', async () => {
    const d = direct();
    const client = wsClient();
    const tid = threadName('ws-ends');
    await d.createThread({ id: tid });
    const run = await d.createRun(tid, demo(10, 2));
    await until(async () => (await d.getRun(run.id)).run.status === 'done', 10_000, 'the run');
    const { messages } = await d.getRun(run.id);
    const msg = messages.find((m) => m.role === 'assistant')!;

    const byRun = client.subscribe({ runId: run.id }, { after: '-1' });
    expect(await byRun.closed).toEqual({ reason: 'done' });
    const byMessage = client.subscribe({ runId: run.id, messageId: msg.id }, { after: '-1' });
    expect(await byMessage.closed).toEqual({ reason: 'done' });
    // The client is done at the terminal event; the end frame follows it.
    await until(() => ends('run_finished').length === 1 && ends('message_finished').length === 1, 5000, 'the end frames');

    const keep = client.subscribe({ threadId: tid }, { after: 'now' });
    const gone = client.subscribe({ threadId: tid }, { after: 'now' });
    await until(() => keep.state === 'open' && gone.state === 'open', 5000, 'open');
    gone.close();
    await until(() => ends('unsubscribed').length === 1, 5000, 'the unsubscribe answered');
    expect(keep.state).toBe('open');
    await d.deleteThread(tid);
    expect(await keep.closed).toMatchObject({ reason: 'error', error: { code: 'not_found' } });
    expect(ends('thread_deleted')).toHaveLength(1);
    const unknown = client.subscribe({ threadId: `${tid}-none` }, {});
    expect(await unknown.closed).toMatchObject({ reason: 'error', error: { code: 'not_found', status: 404 } });
  });

  it('a cursor the server cannot place gets a reset snapshot, then every later event', async () => {
    const d = direct();
    const client = wsClient();
    const tid = threadName('ws-reset');
    await d.createThread({ id: tid });
    const run = await d.createRun(tid, demo(5, 1));
    await until(async () => (await d.getRun(run.id)).run.status === 'done', 10_000, 'the run');
    const c = counting();
    // A store that holds state of a log the server no longer has (another epoch).
    const live = client.followThread(tid, { after: '0000000001_0000000000000001', reconcileIntervalMs: 0, onEvent: c.onEvent });
    cleanup.push(() => live.close());
    await until(() => live.store.getState().resets === 1 && live.subscription.state === 'open', 5000, 'the reset');
    const r2 = await live.startRun(demo(5, 1));
    await until(() => live.store.run(r2.id)?.status === 'done', 10_000, 'a later run');
    expect(frames.filter((f) => f.op === 'snapshot').map((f) => f.reset)).toEqual([true]);
    await expectSameAsServer(live.store, d);
    expect([...c.results.keys()]).toEqual(['applied']);
  });

  it('a lone subscription that reconnects mid-run comes back on the socket it had: one upgrade, the store the server\'s', async () => {
    const d = direct();
    const proxy = await Proxy.start(url());
    cleanup.push(() => proxy.close());
    const client = wsClient({ baseUrl: proxy.url });
    const tid = threadName('ws-lone');
    await d.createThread({ id: tid });
    const c = counting();
    const live = client.followThread(tid, { reconcileIntervalMs: 0, onEvent: c.onEvent });
    cleanup.push(() => live.close());
    await until(() => live.subscription.state === 'open', 5000, 'open');
    const run = await live.startRun(demo(40, 10));
    for (let i = 0; i < 3; i++) {
      const seen = live.store.offset;
      await until(() => live.store.offset !== seen, 5000, 'an event');
      live.subscription.reconnect();
      await until(() => live.subscription.state === 'open', 5000, 'open again');
    }
    await until(() => live.store.run(run.id)?.status === 'done', 15_000, 'the run');
    expect(frames.filter((f) => f.op === 'subscribed').length).toBe(4);
    expect(proxy.upgrades).toBe(1);
    await expectSameAsServer(live.store, d);
    expect([...c.results.keys()]).toEqual(['applied']);
    live.close();
    await until(() => proxy.sockets === 0, 5000, 'the socket closed');
  });

  it('close() unsubscribes and closes the socket, on the client and on the server', async () => {
    const proxy = await Proxy.start(url());
    cleanup.push(() => proxy.close());
    const client = wsClient({ baseUrl: proxy.url });
    const tid = threadName('ws-close');
    await direct().createThread({ id: tid });
    const before = await openSockets();
    const live = client.followThread(tid);
    const sub = client.subscribe({ threadId: tid }, {});
    await until(() => live.subscription.state === 'open' && sub.state === 'open', 5000, 'open');
    expect(proxy.upgrades).toBe(1);
    live.close();
    await until(() => ends('unsubscribed').length === 1, 5000, 'unsubscribed');
    expect(proxy.sockets).toBe(1); // the other still holds it
    sub.close();
    await until(() => proxy.sockets === 0, 5000, 'the socket closed');
    // On the server too (its gauge counts the sockets of every test: back to at most what it was).
    await until(async () => (await openSockets()) <= before, 5000, 'server socket closed');
    expect(await sub.closed).toEqual({ reason: 'closed' });
  });
});

describe('WebSocket transport, expiring user tokens (real server)', () => {
  const base = () => inject('tetherJwtUrl');
  const token = (sub: string, life: number) => mintJWT({ sub, exp: Math.floor(Date.now() / 1000) + life }, inject('tetherJwtSecret'));

  it('a run followed across several 2-second tokens: token_expired ends, a new socket with a fresh token, the store the server\'s', async () => {
    const reasons: string[] = [];
    const client = wsClient({ baseUrl: base(), token: (r: TokenRequest) => (reasons.push(r.reason), token('alice', 2)) });
    const d = new TetherClient({ baseUrl: base(), token: () => token('alice', 60), lifecycle: null });
    const tid = threadName('ws-jwt');
    await client.createThread({ id: tid });
    const c = counting();
    const thread = client.followThread(tid, { reconcileIntervalMs: 0, onEvent: c.onEvent });
    cleanup.push(() => thread.close());
    const live = client.startRun(tid, demo(50, 100), { onEvent: c.onEvent });
    cleanup.push(() => live.close());
    expect((await live.finished)?.status).toBe('done');
    await until(() => thread.store.run(live.runId!)?.status === 'done', 10_000, 'the run in the thread store');
    await expectSameAsServer(live.store, d);
    await expectSameAsServer(thread.store, d);
    expect([...c.results.keys()]).toEqual(['applied']);
    expect(reasons.filter((r) => r !== 'initial').length).toBeGreaterThanOrEqual(2);
    // The server ended both subscriptions at each token's exp, and the
    // client came back on a new socket with the next token.
    expect(ends('token_expired').length).toBeGreaterThanOrEqual(4);
    expect(new Set(frames.filter((f) => f.op === 'subscribed').map((f) => f.id)).size).toBeGreaterThanOrEqual(6);
  });

  it('a socket refused for its token closes the subscription with the server\'s error (the upgrade\'s 401, asked over fetch)', async () => {
    const client = wsClient({ baseUrl: base(), token: 'not-a-token-the-server-knows' });
    const sub = client.subscribe({ threadId: 't1' }, {});
    expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'unauthorized', status: 401 } });
  });
});

describe('WebSocket transport, server restart', () => {
  function freePort(): Promise<number> {
    return new Promise((ok, fail) => {
      const s = createServer();
      s.on('error', fail);
      s.listen(0, '127.0.0.1', () => {
        const a = s.address();
        s.close(() => ok(typeof a === 'object' && a ? a.port : 0));
      });
    });
  }

  async function serve(port: number, data: string): Promise<ChildProcess> {
    const child = spawn(inject('tetherBin'), ['serve', '--addr', `127.0.0.1:${port}`, '--data', data, '--heartbeat', '200ms', '--log-level', 'warn'], { stdio: 'ignore' });
    await until(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.ok === true, 20_000, 'the server ready');
    return child;
  }

  async function stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }

  it('a server that stops ends every subscription shutdown; after its restart they resume from their offsets', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tether-ws-restart-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    let server = await serve(port, dir);
    cleanup.push(() => stop(server));
    const d = new TetherClient({ baseUrl: base, lifecycle: null });
    const client = wsClient({ baseUrl: base });
    const tids = [threadName('ws-restart-a'), threadName('ws-restart-b')];
    for (const id of tids) await d.createThread({ id });
    const c = counting();
    const lives = tids.map((tid) => client.followThread(tid, { reconcileIntervalMs: 0, onEvent: c.onEvent }));
    cleanup.push(() => lives.forEach((l) => l.close()));
    await until(() => lives.every((l) => l.store.getState().loaded && l.subscription.state === 'open'), 5000, 'open');
    const r1 = await lives[0]!.startRun(demo(10, 1));
    await until(() => lives[0]!.store.run(r1.id)?.status === 'done', 10_000, 'a first run');
    await stop(server);
    await until(() => ends('shutdown').length === 2, 5000, 'an end shutdown for each');
    await until(() => lives.every((l) => l.subscription.state === 'reconnecting'), 5000, 'reconnecting');
    server = await serve(port, dir);
    await until(() => lives.every((l) => l.subscription.state === 'open'), 10_000, 'open again');
    const r2 = await lives[1]!.startRun(demo(10, 1));
    await until(() => lives[1]!.store.run(r2.id)?.status === 'done', 10_000, 'a run after the restart');
    for (const l of lives) await expectSameAsServer(l.store, d);
    expect([...c.results.keys()]).toEqual(['applied']);
    expect(await openSockets(base)).toBe(1);
  });
});
