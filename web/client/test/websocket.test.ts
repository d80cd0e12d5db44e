// The WebSocket transport's frame handling, with a scripted socket: what it
// sends, how it reads subscribed, snapshot, event, end and error frames,
// and what it does when the socket drops, stalls or cannot open.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TetherClient, type TetherClientOptions } from '../src/client.js';
import type { ConnectionState, StatusInfo } from '../src/subscription.js';
import { defaultTimers, type Lifecycle, type WakeReason } from '../src/timing.js';
import type { TokenRequest } from '../src/token.js';
import type { Snapshot, TetherEvent } from '../src/types.js';
import { webSocket } from '../src/websocket.js';
import { FakeFetch, errorResponse, json, settle } from './helpers/fake.js';
import { FakeWS } from './helpers/fake-ws.js';
import { emptySnapshot, reduceVector } from './helpers/vectors.js';

const v = reduceVector('01'); // run.created … run.finished of r1
const ev = v.events;

class FakeLifecycle implements Lifecycle {
  wakes = new Set<(r: WakeReason) => void>();
  subscribe(wake: (r: WakeReason) => void) {
    this.wakes.add(wake);
    return () => this.wakes.delete(wake);
  }
  fire(r: WakeReason) {
    for (const w of this.wakes) w(r);
  }
}

let ff: FakeFetch;
let lifecycle: FakeLifecycle;
let client: TetherClient;

function newClient(opts: Partial<TetherClientOptions> = {}): TetherClient {
  return new TetherClient({
    baseUrl: 'http://tether.test/',
    fetch: ff.fetch,
    lifecycle,
    timers: { ...defaultTimers, random: () => 0 }, // no jitter: exact delays
    transport: webSocket({ WebSocket: FakeWS }),
    ...opts,
  });
}

function record() {
  const events: TetherEvent[] = [];
  const snapshots: Snapshot[] = [];
  const states: [ConnectionState, StatusInfo][] = [];
  return {
    events,
    snapshots,
    states,
    handlers: {
      onEvent: (e: TetherEvent) => events.push(e),
      onSnapshot: (s: Snapshot) => snapshots.push(s),
      onStatus: (s: ConnectionState, i: StatusInfo) => states.push([s, i]),
    },
  };
}

/** The last socket made, once the client made it. */
async function socket(n = FakeWS.made.length + 1): Promise<FakeWS> {
  await settle();
  expect(FakeWS.made.length).toBe(n);
  return FakeWS.made[n - 1]!;
}

const subscribed = (id: string, extra: Record<string, unknown> = {}) => ({ op: 'subscribed', id, thread_id: 't1', offset: '-1', ...extra });
const event = (id: string, e: TetherEvent) => ({ op: 'event', id, event: e });

beforeEach(() => {
  vi.useFakeTimers();
  FakeWS.made = [];
  ff = new FakeFetch();
  lifecycle = new FakeLifecycle();
  client = newClient();
});

afterEach(() => {
  expect(vi.getTimerCount(), 'timers left').toBe(0);
  expect(FakeWS.made.filter((s) => s.live), 'sockets left open').toEqual([]);
  expect(ff.open, 'connections left').toBe(0);
  expect(lifecycle.wakes.size, 'listeners left').toBe(0);
  vi.useRealTimers();
});

describe('WebSocket transport', () => {
  it('carries many subscriptions on one socket, each with its own id, and routes frames by id', async () => {
    const a = record();
    const b = record();
    const sa = client.subscribe({ threadId: 't1' }, a.handlers);
    const sb = client.subscribe({ runId: 'r1', messageId: 'm1' }, { ...b.handlers, types: ['text.delta'], after: '-1' });
    const ws = await socket(1);
    expect(ws.url).toBe('ws://tether.test/v1/ws');
    expect(ws.sent).toEqual([]); // nothing before the socket opened
    ws.open();
    const [fa, fb] = ws.subscribes();
    expect(fa).toEqual({ op: 'subscribe', id: fa!.id, thread_id: 't1' });
    expect(fb).toEqual({ op: 'subscribe', id: fb!.id, run_id: 'r1', message_id: 'm1', after: '-1', types: ['text.delta'] });
    expect(fa!.id).not.toBe(fb!.id);
    ws.recv(subscribed(fa!.id as string));
    ws.recv({ op: 'snapshot', id: fa!.id, ...emptySnapshot(v) });
    ws.recv(subscribed(fb!.id as string, { run_id: 'r1', message_id: 'm1' }));
    ws.recv(event(fa!.id as string, ev[0]!));
    ws.recv(event(fb!.id as string, ev[1]!));
    ws.recv({ op: 'ping', ts: '2026-01-01T00:00:00.000Z' });
    ws.recv(event('another', ev[2]!)); // a subscription this client does not hold: skipped
    expect(a.snapshots).toEqual([emptySnapshot(v)]);
    expect(a.events).toEqual([ev[0]]);
    expect(b.events).toEqual([ev[1]]);
    expect(sa.state).toBe('open');
    expect(sb.state).toBe('open');
    expect(FakeWS.made).toHaveLength(1);
    sa.close();
    sb.close();
    expect(ws.sent.filter((f) => f.op === 'unsubscribe')).toEqual([
      { op: 'unsubscribe', id: fa!.id },
      { op: 'unsubscribe', id: fb!.id },
    ]);
    expect(ws.closedWith).toBe(1000); // the last one closed the socket
  });

  it('sends the token in ?access_token= (a page cannot set headers on a WebSocket)', async () => {
    client = newClient({ token: 'tok/with+chars=&' });
    const sub = client.subscribe({ threadId: 't1' }, {});
    const ws = await socket(1);
    expect(new URL(ws.url).searchParams.get('access_token')).toBe('tok/with+chars=&');
    sub.close();
  });

  it('resumes every subscription after the socket drops, from its last offset, on a new socket, nothing twice', async () => {
    const a = record();
    const b = record();
    const sa = client.subscribe({ threadId: 't1' }, a.handlers);
    const sb = client.subscribe({ runId: 'r1' }, b.handlers);
    const ws = await socket(1);
    ws.open();
    const [ia, ib] = ws.subscribes().map((f) => f.id as string);
    ws.recv(subscribed(ia!));
    ws.recv({ op: 'snapshot', id: ia, ...emptySnapshot(v) });
    ws.recv(subscribed(ib!, { run_id: 'r1' }));
    for (const e of ev.slice(0, 3)) ws.recv(event(ia!, e));
    ws.recv(event(ib!, ev[0]!));
    ws.drop(1006);
    await settle();
    expect(sa.state).toBe('reconnecting');
    expect(sb.state).toBe('reconnecting');
    expect(a.states.at(-1)![1]).toMatchObject({ attempt: 1, delayMs: 500, error: { code: 'network' } });
    await vi.advanceTimersByTimeAsync(500);
    const ws2 = await socket(2);
    ws2.open();
    const [fa, fb] = ws2.subscribes();
    expect(fa).toMatchObject({ thread_id: 't1', after: ev[2]!.offset });
    expect(fb).toMatchObject({ run_id: 'r1', after: ev[0]!.offset });
    ws2.recv(subscribed(fa!.id as string));
    ws2.recv(subscribed(fb!.id as string, { run_id: 'r1' }));
    // A server or proxy that replays an event already seen: skipped.
    for (const e of ev.slice(2)) ws2.recv(event(fa!.id as string, e));
    for (const e of ev) ws2.recv(event(fb!.id as string, e));
    expect(a.events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(b.events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(a.snapshots).toHaveLength(1);
    expect(await sb.closed).toEqual({ reason: 'done' }); // its run.finished
    sa.close();
    expect(ws2.closedWith).toBe(1000);
  });

  it('creates a run with POST /runs (Idempotency-Key) and follows it from its first event', async () => {
    ff.next(
      () => new TypeError('no answer'),
      (req) => json({ id: 'r1', thread_id: 't1', status: 'queued' }, 201, { 'x-key': req.headers.get('idempotency-key') ?? '' }),
    );
    const rec = record();
    const sub = client.createRunStream('t1', { input: { messages: [{ role: 'user', content: 'hi' }] } }, rec.handlers);
    await settle();
    await vi.advanceTimersByTimeAsync(500); // the POST got no answer: sent again
    const ws = await socket(1);
    expect(ff.requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST http://tether.test/v1/threads/t1/runs', 'POST http://tether.test/v1/threads/t1/runs']);
    const key = ff.requests[0]!.headers.get('idempotency-key');
    expect(key).toBeTruthy();
    expect(ff.requests[1]!.headers.get('idempotency-key')).toBe(key);
    expect(sub.runId).toBe('r1');
    ws.open();
    expect(ws.subscribes()).toEqual([{ op: 'subscribe', id: ws.lastId(), run_id: 'r1', after: '-1' }]);
    ws.recv(subscribed(ws.lastId(), { run_id: 'r1' }));
    for (const e of ev) ws.recv(event(ws.lastId(), e));
    expect(await sub.closed).toEqual({ reason: 'done' });
    expect(rec.events).toHaveLength(ev.length);
  });

  it('closes with the error of a POST /runs the server refuses (run_active), as over SSE', async () => {
    ff.next(() => errorResponse(409, 'run_active'));
    const sub = client.createRunStream('t1', {}, {});
    const closed = await sub.closed;
    expect(closed).toMatchObject({ reason: 'error', error: { code: 'run_active', status: 409 } });
    expect(FakeWS.made).toHaveLength(0);
  });

  describe('end reasons', () => {
    async function ended(reason: string, target: { threadId: string } | { runId: string } = { threadId: 't1' }) {
      const rec = record();
      const sub = client.subscribe(target, rec.handlers);
      const ws = await socket();
      ws.open();
      const id = ws.lastId();
      ws.recv(subscribed(id));
      ws.recv(event(id, ev[0]!));
      ws.recv({ op: 'end', id, reason, offset: ev[1]!.offset });
      await settle();
      return { rec, sub, ws };
    }

    it('run_finished and message_finished close the subscription as done', async () => {
      for (const reason of ['run_finished', 'message_finished']) {
        const { sub, ws } = await ended(reason, { runId: 'r1' });
        expect(await sub.closed).toEqual({ reason: 'done' });
        expect(ws.closedWith).toBe(1000);
      }
    });

    it('thread_deleted closes with not_found, as over SSE', async () => {
      const { sub } = await ended('thread_deleted');
      expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'not_found' } });
    });

    it('slow_consumer resubscribes at once from the end offset (past what the filters skipped), on the same socket', async () => {
      const { rec, sub, ws } = await ended('slow_consumer');
      expect(rec.states.at(-1)).toEqual(['reconnecting', { attempt: 0, delayMs: 0 }]);
      // The socket carried nothing for a moment, and is kept for the
      // subscription coming back: not closed, no second one.
      expect(ws.live).toBe(true);
      expect(FakeWS.made).toHaveLength(1);
      const again = ws.subscribes()[1]!;
      expect(again).toMatchObject({ thread_id: 't1', after: ev[1]!.offset });
      expect(again.id).not.toBe(ws.subscribes()[0]!.id);
      ws.recv(subscribed(again.id as string));
      expect(sub.state).toBe('open');
      expect(sub.cursor).toBe(ev[1]!.offset);
      sub.close();
      expect(ws.closedWith).toBe(1000); // closed with its last subscription, as ever
    });

    it('a lone subscription that reconnects keeps its socket', async () => {
      const sub = client.subscribe({ threadId: 't1' }, {});
      const ws = await socket(1);
      ws.open();
      const id = ws.lastId();
      ws.recv(subscribed(id));
      ws.recv(event(id, ev[0]!));
      sub.reconnect();
      await settle();
      expect(ws.live).toBe(true);
      expect(FakeWS.made).toHaveLength(1);
      expect(ws.sent.slice(-2)).toEqual([{ op: 'unsubscribe', id }, expect.objectContaining({ op: 'subscribe', thread_id: 't1', after: ev[0]!.offset })]);
      sub.close();
      expect(ws.closedWith).toBe(1000);
    });

    it('a socket kept for a subscription that does not come back closes at the end of the turn', async () => {
      const sub = client.subscribe({ threadId: 't1' }, {});
      const ws = await socket(1);
      ws.open();
      const id = ws.lastId();
      ws.recv(subscribed(id));
      ws.recv({ op: 'end', id, reason: 'slow_consumer', offset: '-1' });
      sub.close(); // before its resubscribe reached the socket
      await settle();
      expect(ws.live).toBe(true); // kept until the end of the turn
      await vi.advanceTimersByTimeAsync(0);
      expect(ws.closedWith).toBe(1000);
      expect(ws.subscribes()).toHaveLength(1);
      expect(FakeWS.made).toHaveLength(1);
    });

    it('shutdown resubscribes at once on a new socket, and backs off while the server is away', async () => {
      const a = record();
      const sa = client.subscribe({ threadId: 't1' }, a.handlers);
      const sb = client.subscribe({ threadId: 't2' }, {});
      const ws = await socket(1);
      ws.open();
      const [ia, ib] = ws.subscribes().map((f) => f.id as string);
      ws.recv(subscribed(ia!));
      ws.recv(subscribed(ib!, { thread_id: 't2' }));
      ws.recv(event(ia!, ev[0]!));
      ws.recv({ op: 'end', id: ia, reason: 'shutdown', offset: ev[0]!.offset });
      await settle();
      // The old socket, still open for the other subscription, takes no new one.
      const ws2 = await socket(2);
      expect(ws.live).toBe(true);
      ws.recv({ op: 'end', id: ib, reason: 'shutdown', offset: '-1' });
      ws.drop(1001, 'server shutting down');
      await settle();
      expect(FakeWS.made).toHaveLength(2);
      ws2.drop(1006); // the server is gone: the new socket does not open
      ff.next(() => new TypeError('connection refused')); // nor does the request that asks why
      await settle();
      expect(a.states.at(-1)).toMatchObject(['reconnecting', { attempt: 1, delayMs: 500, error: { code: 'network' } }]);
      expect(ff.requests.map((r) => r.url)).toEqual(['http://tether.test/v1/ws']);
      sa.close();
      sb.close();
    });

    it('error resumes at once from the offset, with the error for the status, on the same socket', async () => {
      const { rec, sub, ws } = await ended('error');
      expect(rec.states.at(-1)).toMatchObject(['reconnecting', { delayMs: 0, error: { code: 'unavailable' } }]);
      expect(ws.subscribes()).toHaveLength(2);
      expect(ws.subscribes()[1]).toMatchObject({ after: ev[1]!.offset });
      expect(FakeWS.made).toHaveLength(1);
      sub.close();
    });

    it('unsubscribed (an answer to our unsubscribe) and unknown frames change nothing', async () => {
      const rec = record();
      const other = client.subscribe({ threadId: 't2' }, {});
      const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
      const ws = await socket(1);
      ws.open();
      const id = ws.lastId();
      ws.recv(subscribed(id));
      ws.recv({ op: 'novel', id });
      ws.recv({ op: 'pong', ts: 'x' });
      expect(sub.state).toBe('open');
      sub.reconnect();
      await settle();
      expect(ws.sent.at(-2)).toEqual({ op: 'unsubscribe', id });
      const id2 = ws.lastId();
      expect(id2).not.toBe(id);
      ws.recv({ op: 'end', id, reason: 'unsubscribed', offset: '-1' });
      ws.recv(subscribed(id2));
      expect(sub.state).toBe('open');
      expect(FakeWS.made).toHaveLength(1);
      sub.close();
      other.close();
    });
  });

  describe('error frames', () => {
    it('not_found and forbidden close the subscription with that error; the socket goes on for the others', async () => {
      const other = client.subscribe({ threadId: 't2' }, {});
      const sub = client.subscribe({ threadId: 'nope' }, {});
      const ws = await socket(1);
      ws.open();
      const [io, id] = ws.subscribes().map((f) => f.id as string);
      ws.recv(subscribed(io!, { thread_id: 't2' }));
      ws.recv({ op: 'error', id, error: { code: 'not_found', message: 'thread nope not found' } });
      expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'not_found', status: 404, message: 'thread nope not found' } });
      expect(ws.live).toBe(true);
      expect(other.state).toBe('open');
      other.close();
    });

    it('unavailable is retried with backoff', async () => {
      const rec = record();
      const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
      const ws = await socket(1);
      ws.open();
      ws.recv({ op: 'error', id: ws.lastId(), error: { code: 'unavailable', message: 'the store did not answer' } });
      await settle();
      expect(rec.states.at(-1)).toMatchObject(['reconnecting', { attempt: 1, delayMs: 500, error: { code: 'unavailable', status: 503 } }]);
      expect(ws.closedWith).toBe(1000);
      await vi.advanceTimersByTimeAsync(500);
      const ws2 = await socket(2);
      ws2.open();
      ws2.recv(subscribed(ws2.lastId()));
      expect(sub.state).toBe('open');
      sub.close();
    });

    it('too_large (the socket holds all the server takes) moves the subscription to another socket at once', async () => {
      const first = client.subscribe({ threadId: 't1' }, {});
      const ws = await socket(1);
      ws.open();
      ws.recv(subscribed(ws.lastId()));
      const second = client.subscribe({ threadId: 't2' }, {});
      await settle();
      ws.recv({ op: 'error', id: ws.lastId(), error: { code: 'too_large', message: 'a socket may hold at most 1 subscriptions' } });
      const ws2 = await socket(2);
      ws2.open();
      expect(ws2.subscribes()[0]).toMatchObject({ thread_id: 't2' });
      ws2.recv(subscribed(ws2.lastId(), { thread_id: 't2' }));
      expect(second.state).toBe('open');
      first.close();
      second.close();
    });
  });

  it('a message that is not JSON closes every subscription with protocol', async () => {
    const sub = client.subscribe({ threadId: 't1' }, {});
    const ws = await socket(1);
    ws.open();
    ws.recv('<html>a proxy</html>');
    expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'protocol' } });
    expect(ws.closedWith).toBe(1000);
  });

  it('a socket silent for 3 heartbeats is closed and every subscription resumes on a new one; pings keep it alive', async () => {
    client = newClient({ heartbeatMs: 1000 });
    const sa = client.subscribe({ threadId: 't1' }, {});
    const sb = client.subscribe({ threadId: 't2' }, {});
    const ws = await socket(1);
    ws.open();
    const [ia, ib] = ws.subscribes().map((f) => f.id as string);
    ws.recv(subscribed(ia!));
    ws.recv(subscribed(ib!, { thread_id: 't2' }));
    for (let i = 0; i < 5; i++) {
      await vi.advanceTimersByTimeAsync(1000);
      ws.recv({ op: 'ping', ts: 'x' });
    }
    expect(sa.state).toBe('open');
    await vi.advanceTimersByTimeAsync(2999);
    expect(ws.live).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(ws.closedWith).toBe(1000);
    await settle();
    expect(sa.state).toBe('reconnecting');
    expect(sb.state).toBe('reconnecting');
    await vi.advanceTimersByTimeAsync(500);
    const ws2 = await socket(2);
    ws2.open();
    expect(ws2.subscribes().map((f) => f.thread_id)).toEqual(['t1', 't2']);
    sa.close();
    sb.close();
  });

  it("the stall period follows the heartbeat the subscribed frame says, not the one assumed", async () => {
    const sub = client.subscribe({ threadId: 't1' }, {}); // 15 s assumed
    const ws = await socket(1);
    ws.open();
    ws.recv(subscribed(ws.subscribes()[0]!.id as string, { heartbeat_ms: 1000 }));
    await vi.advanceTimersByTimeAsync(2999);
    expect(ws.live).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(ws.closedWith).toBe(1000);
    await settle();
    expect(sub.state).toBe('reconnecting');
    sub.close();
  });

  it('a socket that does not open within the readiness timeout is given up', async () => {
    const rec = record();
    const sub = client.subscribe({ threadId: 't1' }, { ...rec.handlers, readinessTimeoutMs: 2000 });
    const ws = await socket(1);
    await vi.advanceTimersByTimeAsync(2000);
    expect(ws.closedWith).toBe(1000);
    expect(rec.states.at(-1)).toMatchObject(['reconnecting', { error: { code: 'timeout' } }]);
    sub.close();
  });

  describe('a socket that does not open', () => {
    it('asks /v1/ws over fetch why: a 401 or 403 closes the subscriptions with it', async () => {
      ff.next(() => errorResponse(401, 'unauthorized', 'unknown token'));
      const sub = client.subscribe({ threadId: 't1' }, {});
      const ws = await socket(1);
      ws.drop(1006);
      expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'unauthorized', status: 401 } });
      expect(ff.requests[0]!.url).toBe('http://tether.test/v1/ws');
    });

    it('a 429 waits out its Retry-After; a 426 (auth passed, no upgrade) is retried as a network failure', async () => {
      const rec = record();
      const r429 = errorResponse(429, 'rate_limited');
      r429.headers.set('Retry-After', '3');
      ff.next(() => r429, () => new Response('Upgrade Required', { status: 426 }));
      const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
      const ws = await socket(1);
      ws.drop(1006);
      await settle();
      expect(rec.states.at(-1)).toMatchObject(['reconnecting', { delayMs: 3000, error: { code: 'rate_limited', status: 429 } }]);
      await vi.advanceTimersByTimeAsync(2999);
      expect(FakeWS.made).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      const ws2 = await socket(2);
      ws2.drop(1006);
      await settle();
      expect(rec.states.at(-1)).toMatchObject(['reconnecting', { attempt: 2, error: { code: 'network' } }]);
      sub.close();
    });

    it('after two upgrades refused in a row (426: a proxy drops them), subscriptions go over SSE', async () => {
      const rec = record();
      const upgradeRequired = () => new Response('Upgrade Required', { status: 426 });
      ff.next(upgradeRequired, upgradeRequired);
      const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
      (await socket(1)).drop(1006);
      await settle();
      await vi.advanceTimersByTimeAsync(500);
      (await socket(2)).drop(1006);
      await settle();
      expect(ff.requests.map((r) => new URL(r.url).pathname)).toEqual(['/v1/ws', '/v1/ws']);
      ff.next(() => new Response(': ok\n\n', { status: 200, headers: { 'Content-Type': 'text/event-stream' } }));
      await vi.advanceTimersByTimeAsync(1000);
      await settle();
      expect(FakeWS.made).toHaveLength(2);
      const sse = ff.requests[2]!;
      expect(new URL(sse.url).pathname).toBe('/v1/threads/t1/events');
      expect(sse.headers.get('accept')).toBe('text/event-stream');
      sub.close();
    });

    it('a token_expired answer is sent again with a new token, and the next socket has it', async () => {
      const asked: TokenRequest[] = [];
      client = newClient({ token: (r) => (asked.push(r), `tok-${asked.length}`) });
      ff.next(() => errorResponse(401, 'token_expired'), () => new Response('Upgrade Required', { status: 426 }));
      const sub = client.subscribe({ threadId: 't1' }, {});
      const ws = await socket(1);
      expect(new URL(ws.url).searchParams.get('access_token')).toBe('tok-1');
      ws.drop(1006);
      await settle();
      await vi.advanceTimersByTimeAsync(500);
      const ws2 = await socket(2);
      expect(asked.map((r) => r.reason)).toEqual(['initial', 'initial', 'expired', 'initial']);
      expect(ff.requests.map((r) => r.headers.get('authorization'))).toEqual(['Bearer tok-2', 'Bearer tok-3']);
      expect(new URL(ws2.url).searchParams.get('access_token')).toBe('tok-4');
      sub.close();
    });
  });

  it('token_expired ends: every subscription resumes at once on a new socket with a new token', async () => {
    const asked: TokenRequest[] = [];
    // A JWT with an exp is kept until near its exp: asked for again only when the server says.
    const jwt = (n: number) => `${btoa('{}')}.${btoa(JSON.stringify({ exp: Math.floor(Date.now() / 1000) + 3600, n }))}.sig`;
    client = newClient({ token: (r) => (asked.push(r), jwt(asked.length)) });
    const a = record();
    const sa = client.subscribe({ threadId: 't1' }, a.handlers);
    const sb = client.subscribe({ threadId: 't2' }, {});
    const ws = await socket(1);
    ws.open();
    const [ia, ib] = ws.subscribes().map((f) => f.id as string);
    ws.recv(subscribed(ia!));
    ws.recv(subscribed(ib!, { thread_id: 't2' }));
    ws.recv(event(ia!, ev[0]!));
    ws.recv({ op: 'end', id: ia, reason: 'token_expired', offset: ev[0]!.offset });
    ws.recv({ op: 'end', id: ib, reason: 'token_expired', offset: '-1' });
    ws.drop(4001, 'token_expired');
    await settle();
    const ws2 = await socket(2);
    expect(asked.map((r) => r.reason)).toEqual(['initial', 'expired']);
    expect(asked[1]!.previous).toBe(jwt(1));
    expect(new URL(ws2.url).searchParams.get('access_token')).toBe(jwt(2));
    ws2.open();
    expect(ws2.subscribes().map((f) => [f.thread_id, f.after])).toEqual([
      ['t1', ev[0]!.offset],
      ['t2', undefined],
    ]);
    expect(a.states.filter(([s]) => s === 'reconnecting').map(([, i]) => i.delayMs)).toEqual([0]);
    sa.close();
    sb.close();
  });

  it('close() before the socket opened closes it, and sends nothing', async () => {
    const sub = client.subscribe({ threadId: 't1' }, {});
    const ws = await socket(1);
    sub.close();
    expect(ws.closedWith).toBe(1000);
    ws.open(); // too late
    expect(ws.sent).toEqual([]);
    expect(await sub.closed).toEqual({ reason: 'closed' });
  });

  it('an aborted signal unsubscribes like close()', async () => {
    const ac = new AbortController();
    const other = client.subscribe({ threadId: 't2' }, {});
    const sub = client.subscribe({ threadId: 't1' }, { signal: ac.signal });
    const ws = await socket(1);
    ws.open();
    const id = ws.lastId();
    ws.recv(subscribed(id));
    ac.abort();
    expect(ws.sent.at(-1)).toEqual({ op: 'unsubscribe', id });
    expect(await sub.closed).toEqual({ reason: 'closed' });
    expect(ws.live).toBe(true);
    other.close();
  });

  it('a close() right after subscribe opens no socket', async () => {
    const sub = client.subscribe({ threadId: 't1' }, {});
    sub.close();
    await settle();
    expect(FakeWS.made).toHaveLength(0);
  });

  it('online after a silent spell drops the socket at once rather than wait for the stall timer', async () => {
    const sub = client.subscribe({ threadId: 't1' }, { heartbeatMs: 1000 });
    const ws = await socket(1);
    ws.open();
    ws.recv(subscribed(ws.lastId()));
    await vi.advanceTimersByTimeAsync(2500);
    lifecycle.fire('online');
    expect(ws.closedWith).toBe(1000);
    const ws2 = await socket(2);
    ws2.open();
    expect(ws2.subscribes()).toHaveLength(1);
    sub.close();
  });

  it('without a WebSocket class the subscription closes with a clear error', async () => {
    vi.stubGlobal('WebSocket', undefined);
    client = newClient({ transport: webSocket() });
    const sub = client.subscribe({ threadId: 't1' }, {});
    expect(await sub.closed).toMatchObject({ reason: 'error', error: { code: 'protocol', message: expect.stringContaining('no WebSocket') } });
    vi.unstubAllGlobals();
  });
});
