import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TetherClient } from '../src/client.js';
import type { TetherError } from '../src/errors.js';
import type { ConnectionState, StatusInfo } from '../src/subscription.js';
import { backoffDelay, defaultTimers } from '../src/timing.js';
import { jwtExpiry, type TokenRequest } from '../src/token.js';
import type { TetherEvent } from '../src/types.js';
import { FakeFetch, connected, errorResponse, eventFrame, frame, json, settle } from './helpers/fake.js';
import { mintJWT, userToken } from './helpers/jwt.js';
import { reduceVector } from './helpers/vectors.js';

const ev = reduceVector('01').events;
const T0 = Date.parse('2026-01-01T00:00:00Z');

describe('jwtExpiry', () => {
  it('reads exp from the payload without verifying', () => {
    expect(jwtExpiry(mintJWT({ sub: 'a', exp: 1_900_000_000 }))).toBe(1_900_000_000_000);
    expect(jwtExpiry(mintJWT({ sub: 'ü→', exp: 1_900_000_001, pad: '??>>' }))).toBe(1_900_000_001_000); // base64url with - and _
    expect(jwtExpiry(mintJWT({ sub: 'a' }))).toBeUndefined();
    expect(jwtExpiry(mintJWT({ sub: 'a', exp: '1900000000' }))).toBeUndefined();
    expect(jwtExpiry('a-static-client-token-of-32-chars')).toBeUndefined();
    expect(jwtExpiry('a.b.c')).toBeUndefined();
    expect(jwtExpiry('x.!!!.y')).toBeUndefined();
  });
});

describe('token refresh (scripted fetch)', () => {
  let ff: FakeFetch;
  let calls: TokenRequest[];
  let tokens: string[];

  /** A client whose token function mints a JWT living `lifeMs` from each call. */
  function client(lifeMs = 600_000, opts: Partial<ConstructorParameters<typeof TetherClient>[0]> = {}) {
    return new TetherClient({
      baseUrl: 'http://tether.test',
      fetch: ff.fetch,
      lifecycle: null,
      timers: { ...defaultTimers, random: () => 0 },
      token: async (r) => {
        calls.push(r);
        const t = userToken('alice', Date.now() + lifeMs, { n: tokens.length });
        tokens.push(t);
        return t;
      },
      ...opts,
    });
  }
  const auth = (i: number) => ff.requests[i]!.headers.get('authorization');

  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(T0);
    ff = new FakeFetch();
    calls = [];
    tokens = [];
  });
  afterEach(() => {
    expect(vi.getTimerCount(), 'timers left').toBe(0);
    expect(ff.open, 'connections left').toBe(0);
    vi.useRealTimers();
  });

  it('keeps a JWT until shortly before its exp, then asks for the next one', async () => {
    const c = client(600_000);
    ff.fallback = () => json({ run: {} });
    await Promise.all([c.getRun('r1'), c.getRun('r2'), c.getRun('r3')]);
    expect(calls).toEqual([{ reason: 'initial' }]); // one call for three requests at once
    vi.setSystemTime(T0 + 570_000 - 1); // 30 s before exp, less 1 ms
    await c.getRun('r4');
    expect(calls).toHaveLength(1);
    vi.setSystemTime(T0 + 570_000);
    await c.getRun('r5');
    expect(calls).toEqual([{ reason: 'initial' }, { reason: 'expiring', previous: tokens[0] }]);
    expect([0, 1, 2, 3].map(auth)).toEqual(Array(4).fill(`Bearer ${tokens[0]}`));
    expect(auth(4)).toBe(`Bearer ${tokens[1]}`);
  });

  it('refreshes a short-lived token at half its life, not at once', async () => {
    const c = client(20_000); // less than twice the 30 s margin
    ff.fallback = () => json({ run: {} });
    await c.getRun('r1');
    vi.setSystemTime(T0 + 9_999);
    await c.getRun('r2');
    expect(calls).toHaveLength(1);
    vi.setSystemTime(T0 + 10_000);
    await c.getRun('r3');
    expect(calls).toHaveLength(2);
    await c.getRun('r4'); // the new token has its own 10 s
    expect(calls).toHaveLength(2);
  });

  it('asks a function for each request when its token is not a JWT with an exp', async () => {
    let n = 0;
    const c = new TetherClient({ baseUrl: '', fetch: ff.fetch, lifecycle: null, token: () => `opaque-token-number-${n++}` });
    ff.fallback = () => json({ run: {} });
    await c.getRun('r1');
    await c.getRun('r2');
    expect([0, 1].map(auth)).toEqual(['Bearer opaque-token-number-0', 'Bearer opaque-token-number-1']);
  });

  it('on a 401 token_expired, gets a new token and sends the request once more', async () => {
    const c = client();
    ff.next(() => errorResponse(401, 'token_expired', 'the token has expired'), () => json({ id: 't1' }));
    const thread = await c.createThread({ id: 't1' });
    expect(thread).toEqual({ id: 't1' });
    expect(calls).toEqual([{ reason: 'initial' }, { reason: 'expired', previous: tokens[0] }]);
    expect(ff.requests.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual(Array(2).fill('POST http://tether.test/v1/threads {"id":"t1"}'));
    expect([0, 1].map(auth)).toEqual([`Bearer ${tokens[0]}`, `Bearer ${tokens[1]}`]);
  });

  it('gives up after one refresh, and never refreshes a fixed token', async () => {
    const c = client();
    ff.fallback = () => errorResponse(401, 'token_expired', 'the token has expired');
    const err = (await c.getRun('r1').catch((e: unknown) => e)) as TetherError;
    expect(err).toMatchObject({ code: 'token_expired', status: 401, retryable: false });
    expect(calls).toHaveLength(2);
    expect(ff.requests).toHaveLength(2);

    const fixed = new TetherClient({ baseUrl: '', fetch: ff.fetch, lifecycle: null, token: userToken('alice', T0 - 1000) });
    expect(await fixed.getRun('r1').catch((e: unknown) => e)).toMatchObject({ code: 'token_expired' });
    expect(ff.requests).toHaveLength(3);
    // Other 401s are not a reason to refresh.
    ff.fallback = () => errorResponse(401, 'unauthorized', 'no such key');
    expect(await c.getRun('r1').catch((e: unknown) => e)).toMatchObject({ code: 'unauthorized' });
    expect(calls).toHaveLength(2);
  });

  it('refuses a token an HTTP header cannot carry with a TetherError, sending nothing', async () => {
    for (const token of ['client-token-…', async () => 'päss-wörd-token']) {
      const c = client(600_000, { token });
      const err = (await c.getThread('t1').catch((e: unknown) => e)) as TetherError;
      expect(err).toMatchObject({ name: 'TetherError', code: 'token_unavailable', status: 0 });
      expect(err.message).toMatch(/cannot be sent in an HTTP header/);
    }
    expect(ff.requests).toHaveLength(0);
  });

  it('reports a token function that throws, and a subscription backs off instead of looping', async () => {
    let fail = true;
    const c = client(600_000, {
      token: async (r) => {
        calls.push(r);
        if (fail) throw new Error('login service unreachable');
        return userToken('alice', Date.now() + 600_000);
      },
    });
    const err = (await c.getThread('t1').catch((e: unknown) => e)) as TetherError;
    expect(err).toMatchObject({ code: 'token_unavailable', status: 0, retryable: true });
    expect(err.message).toBe('the token function failed: login service unreachable');
    expect((err.cause as Error).message).toBe('login service unreachable');
    expect(ff.requests).toHaveLength(0); // nothing sent without a token

    calls = [];
    const states: [ConnectionState, StatusInfo][] = [];
    const sub = c.subscribe({ threadId: 't1' }, { onStatus: (s, i) => states.push([s, i]) });
    await settle();
    for (let i = 0; i < 4; i++) {
      expect(calls).toHaveLength(i + 1); // once per attempt, and only then
      const [state, info] = states[states.length - 1]!;
      expect(state).toBe('reconnecting');
      expect(info.error?.code).toBe('token_unavailable');
      expect(info.delayMs).toBe(backoffDelay(i, {}, () => 0));
      await vi.advanceTimersByTimeAsync(info.delayMs! - 1);
      expect(calls).toHaveLength(i + 1);
      await vi.advanceTimersByTimeAsync(1);
    }
    expect(ff.requests).toHaveLength(0);
    fail = false;
    const p = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(states[states.length - 1]![1].delayMs!);
    (await p).push(connected());
    await settle();
    expect(sub.state).toBe('open');
    sub.close();
  });

  it('fetches the next token ahead of exp while a stream is open, and resumes with it at the exp', async () => {
    const c = client(120_000); // refreshed at 90 s
    const events: TetherEvent[] = [];
    const p1 = ff.expectSSE();
    const sub = c.subscribe({ threadId: 't1' }, { onEvent: (e) => events.push(e), heartbeatMs: 1_000_000 });
    const s1 = await p1;
    s1.push(connected({ heartbeat_ms: 1_000_000 }) + ev.slice(0, 3).map(eventFrame).join(''));
    await settle();
    await vi.advanceTimersByTimeAsync(90_000 - 1);
    expect(calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toEqual([{ reason: 'initial' }, { reason: 'expiring', previous: tokens[0] }]);
    expect(ff.requests).toHaveLength(1); // the stream goes on with the old token
    s1.push(ev.slice(3, 5).map(eventFrame).join(''));
    await vi.advanceTimersByTimeAsync(30_000);
    // The server ends the stream at the old token's exp.
    const p2 = ff.expectSSE();
    s1.push(frame('reconnect', { reason: 'token_expired' }));
    s1.end();
    const s2 = await p2;
    expect(calls).toHaveLength(2); // the prefetched token is used: no wait for the function
    expect(auth(1)).toBe(`Bearer ${tokens[1]}`);
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[4]!.offset);
    s2.push(connected() + ev.slice(4).map(eventFrame).join('')); // one already seen: skipped
    await settle();
    expect(events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    sub.close();
  });

  it('on a reconnect for token_expired before the exp it knows, asks for a new token at once', async () => {
    const c = client(3_600_000);
    const events: TetherEvent[] = [];
    const states: ConnectionState[] = [];
    const p1 = ff.expectSSE();
    const sub = c.subscribe({ threadId: 't1' }, { onEvent: (e) => events.push(e), onStatus: (s) => states.push(s) });
    (await p1).push(connected() + ev.slice(0, 2).map(eventFrame).join('') + frame('reconnect', { reason: 'token_expired' }));
    const p2 = ff.expectSSE();
    (await p1).end();
    const s2 = await p2;
    expect(calls).toEqual([{ reason: 'initial' }, { reason: 'expired', previous: tokens[0] }]);
    expect(auth(1)).toBe(`Bearer ${tokens[1]}`);
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[1]!.offset);
    s2.push(connected() + ev.slice(2).map(eventFrame).join(''));
    await settle();
    expect(events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(states).toEqual(['connecting', 'open', 'reconnecting', 'open']); // at once, no backoff
    // Another reason does not drop the token.
    const p3 = ff.expectSSE();
    s2.push(frame('reconnect', { reason: 'max_lifetime' }));
    s2.end();
    (await p3).push(connected());
    await settle();
    expect(calls).toHaveLength(2);
    sub.close();
  });

  it('a stream refused with 401 token_expired is sent again with a new token', async () => {
    const c = client();
    ff.next(() => errorResponse(401, 'token_expired'));
    const p = ff.expectSSE();
    const sub = c.subscribe({ threadId: 't1' }, {});
    (await p).push(connected());
    await settle();
    expect(sub.state).toBe('open');
    expect(calls.map((r) => r.reason)).toEqual(['initial', 'expired']);
    sub.close();
  });
});

// A server that plays Tether's side of the contract over real HTTP: a log
// of events, streams that resume after Last-Event-ID, tokens that the test
// expires (their streams end with `reconnect` `token_expired`; requests with
// them are answered 401 `token_expired`).
class AuthServer {
  private server: Server | undefined;
  readonly log: TetherEvent[] = [];
  readonly expired = new Set<string>();
  readonly seen: string[] = []; // "token last-event-id" of each stream request
  private streams = new Set<{ token: string; res: ServerResponse; sent: number }>();
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.streams) s.res.destroy();
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    if (!token || this.expired.has(token)) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: token ? { code: 'token_expired', message: 'the token has expired' } : { code: 'unauthorized', message: 'no token' } }));
      return;
    }
    if (!req.url?.includes('/events')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true }));
      return;
    }
    const last = req.headers['last-event-id'];
    this.seen.push(`${token} ${last ?? '-'}`);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(frame('connected', { thread_id: 't1', offset: this.log.at(-1)?.offset ?? '-1', heartbeat_ms: 60_000, server_time: new Date().toISOString() }));
    const from = last ? this.log.findIndex((e) => e.offset === last) + 1 : 0;
    const s = { token, res, sent: from };
    this.streams.add(s);
    res.on('close', () => this.streams.delete(s));
    this.flush(s);
  }

  private flush(s: { res: ServerResponse; sent: number }): void {
    while (s.sent < this.log.length) s.res.write(eventFrame(this.log[s.sent++]!));
  }

  /** Appends events and sends them to every open stream. */
  append(...events: TetherEvent[]): void {
    this.log.push(...events);
    for (const s of this.streams) this.flush(s);
  }

  /** Expires a token: its streams end with the reason, its requests get 401. */
  expire(token: string): void {
    this.expired.add(token);
    for (const s of this.streams) {
      if (s.token !== token) continue;
      s.res.end(frame('reconnect', { reason: 'token_expired' }));
    }
  }

  get open(): number {
    return this.streams.size;
  }
}

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}

describe('token refresh (real HTTP server)', () => {
  let server: AuthServer;
  beforeEach(async () => {
    server = new AuthServer();
    await server.start();
  });
  afterEach(async () => {
    await server.stop();
  });

  it('loses nothing and doubles nothing across expiries mid-stream and refused requests', async () => {
    const issued: string[] = [];
    const reasons: string[] = [];
    const client = new TetherClient({
      baseUrl: server.url,
      lifecycle: null,
      backoff: { initialMs: 5, maxMs: 20 },
      token: async (r) => {
        reasons.push(r.reason);
        const t = userToken('alice', Date.now() + 3_600_000, { n: issued.length });
        issued.push(t);
        return t;
      },
    });
    const got: TetherEvent[] = [];
    const sub = client.subscribe({ threadId: 't1' }, { after: '-1', onEvent: (e) => got.push(e) });
    const n = ev.length;
    server.append(...ev.slice(0, 2));
    await until(() => got.length === 2);
    // 1: the server ends the stream at the token's expiry; the client
    // resumes with a new token from the last event it got.
    server.expire(issued[0]!);
    await until(() => server.seen.length === 2 && server.open === 1);
    server.append(...ev.slice(2, 4));
    await until(() => got.length === 4);
    // 2: a request with an expired token is refused, and sent again with a
    // new one; the stream, ended for the old token, resumes with it too.
    server.expired.add(issued[1]!);
    expect(await client.getThread('t1')).toEqual({ ok: true });
    server.expire(issued[1]!);
    await until(() => server.seen.length === 3 && server.open === 1);
    server.append(...ev.slice(4, n));
    await until(() => got.length === n);
    sub.close();
    expect(got.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(reasons).toEqual(['initial', 'expired', 'expired']);
    expect(server.seen).toEqual([`${issued[0]} -`, `${issued[1]} ${ev[1]!.offset}`, `${issued[2]} ${ev[3]!.offset}`]);
  });
});
