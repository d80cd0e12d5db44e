import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TetherClient } from '../src/client.js';
import type { ConnectionState, StatusInfo } from '../src/subscription.js';
import { backoffDelay, defaultTimers, type Lifecycle, type WakeReason } from '../src/timing.js';
import type { Snapshot, TetherEvent } from '../src/types.js';
import { FakeFetch, connected, errorResponse, eventFrame, frame, json, settle } from './helpers/fake.js';
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

beforeEach(() => {
  vi.useFakeTimers();
  ff = new FakeFetch();
  lifecycle = new FakeLifecycle();
  client = new TetherClient({
    baseUrl: 'http://tether.test/',
    fetch: ff.fetch,
    lifecycle,
    timers: { ...defaultTimers, random: () => 0 }, // no jitter: exact delays
  });
});

afterEach(() => {
  expect(vi.getTimerCount(), 'timers left').toBe(0);
  expect(ff.open, 'connections left').toBe(0);
  expect(lifecycle.wakes.size, 'listeners left').toBe(0);
  vi.useRealTimers();
});

describe('subscribe', () => {
  it('delivers snapshot then events in order, and closes after run.finished', async () => {
    const rec = record();
    const pipe = ff.expectSSE();
    const sub = client.subscribe({ runId: 'r1' }, rec.handlers);
    expect(sub.state).toBe('connecting');
    const p = await pipe;
    const text = ':ok\n\n' + connected({ run_id: 'r1' }) + frame('snapshot', emptySnapshot(v), '-1') + ev.map(eventFrame).join('');
    p.pushChunked(text, [3, 1, 17, 64, 5]); // uneven chunks, split inside frames
    const closed = await sub.closed;
    expect(closed).toEqual({ reason: 'done' });
    expect(rec.snapshots).toHaveLength(1);
    expect(rec.events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(rec.states.map(([s]) => s)).toEqual(['connecting', 'open', 'closed']);
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/runs/r1/events');
    expect(ff.requests[0]!.headers.get('accept')).toBe('text/event-stream');
    expect(sub.cursor).toBe(ev[ev.length - 1]!.offset);
  });

  it('resumes after a drop with Last-Event-ID and skips replayed events', async () => {
    const rec = record();
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
    (await p1).push(connected() + ev.slice(0, 4).map(eventFrame).join(''));
    await settle();
    const p2 = ff.expectSSE();
    (await p1).fail(); // the network drops
    await settle();
    expect(sub.state).toBe('reconnecting');
    await vi.advanceTimersByTimeAsync(backoffDelay(0, {}, () => 0));
    const second = await p2;
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[3]!.offset);
    // A server or proxy that replays an event already seen: skipped.
    second.push(connected() + ev.slice(3).map(eventFrame).join(''));
    await settle();
    expect(rec.events.map((e) => e.offset)).toEqual(ev.map((e) => e.offset));
    expect(sub.state).toBe('open');
    sub.close();
    expect(await sub.closed).toEqual({ reason: 'closed' });
  });

  it('backs off exponentially, reports attempts, and resets once connected', async () => {
    const rec = record();
    ff.fallback = () => new TypeError('connection refused');
    const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
    await settle();
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const last = rec.states[rec.states.length - 1]!;
      expect(last[0]).toBe('reconnecting');
      expect(last[1].attempt).toBe(i + 1);
      expect(last[1].error?.code).toBe('network');
      delays.push(last[1].delayMs!);
      await vi.advanceTimersByTimeAsync(last[1].delayMs! - 1);
      expect(ff.requests).toHaveLength(i + 1); // not before its time
      await vi.advanceTimersByTimeAsync(1);
    }
    expect(delays).toEqual([500, 1000, 2000, 4000, 8000]);
    ff.fallback = undefined;
    const p = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(16000);
    (await p).push(connected());
    await settle();
    expect(rec.states[rec.states.length - 1]).toEqual(['open', { attempt: 0 }]);
    sub.close();
  });

  it('maxAttempts counts failed attempts, not the drop of a connection that was open', async () => {
    const rec = record();
    const errors: string[] = [];
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, { ...rec.handlers, maxAttempts: 2, onError: (e) => errors.push(e.code) });
    (await p1).push(connected() + eventFrame(ev[0]!));
    await settle();
    (await p1).fail(); // a healthy stream drops: a reconnect is due, nothing has failed yet
    await settle();
    expect(sub.state).toBe('reconnecting');
    expect(rec.states[rec.states.length - 1]![1].attempt).toBe(1); // the first try after the drop
    ff.fallback = () => new TypeError('connection refused');
    await vi.advanceTimersByTimeAsync(backoffDelay(0, {}, () => 0));
    expect(ff.requests).toHaveLength(2);
    expect(sub.state).toBe('reconnecting'); // one failed attempt of two
    expect(rec.states[rec.states.length - 1]![1].attempt).toBe(2);
    await vi.advanceTimersByTimeAsync(backoffDelay(1, {}, () => 0));
    expect(ff.requests).toHaveLength(3);
    expect(await sub.closed).toMatchObject({ reason: 'error' });
    expect(errors).toEqual(['network']);
  });

  it('applies jitter within [base/2, base] and caps at maxMs', () => {
    expect(backoffDelay(0, {}, () => 0)).toBe(500);
    expect(backoffDelay(0, {}, () => 0.999)).toBe(250);
    expect(backoffDelay(20, {}, () => 0)).toBe(30_000);
    expect(backoffDelay(3, { initialMs: 100, factor: 3, maxMs: 1e6, jitter: 0 })).toBe(2700);
  });

  it('reconnects at once when the server sends a reconnect frame', async () => {
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, {});
    (await p1).push(connected() + eventFrame(ev[0]!) + frame('reconnect', { reason: 'max_lifetime' }));
    const p2 = ff.expectSSE();
    await settle();
    await p2; // no timer was needed
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[0]!.offset);
    sub.close();
  });

  it('times out a connection that never says connected', async () => {
    const rec = record();
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, { ...rec.handlers, readinessTimeoutMs: 2000 });
    (await p1).push(':ok\n\n');
    await vi.advanceTimersByTimeAsync(1999);
    expect(sub.state).toBe('connecting');
    await vi.advanceTimersByTimeAsync(1);
    expect(sub.state).toBe('reconnecting');
    expect(rec.states[rec.states.length - 1]![1].error?.code).toBe('timeout');
    expect((await p1).closed).toBe(true); // the reader was aborted
    sub.close();
  });

  it('reconnects a stream silent for 3 heartbeats; pings keep it alive', async () => {
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, {});
    const first = await p1;
    first.push(connected({ heartbeat_ms: 1000 }));
    for (let i = 0; i < 5; i++) {
      await vi.advanceTimersByTimeAsync(1000);
      first.push(frame('ping', { ts: 'x' }));
    }
    expect(sub.state).toBe('open');
    await vi.advanceTimersByTimeAsync(2999);
    expect(sub.state).toBe('open');
    const p2 = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(1);
    expect(sub.state).toBe('reconnecting');
    expect(first.closed).toBe(true);
    await vi.advanceTimersByTimeAsync(500);
    (await p2).push(connected());
    await settle();
    expect(sub.state).toBe('open');
    sub.close();
  });

  it('reconnects at once on online and on visibility', async () => {
    ff.next(() => new TypeError('offline'));
    const sub = client.subscribe({ threadId: 't1' }, {});
    await settle();
    expect(sub.state).toBe('reconnecting');
    const p = ff.expectSSE();
    lifecycle.fire('online');
    const second = await p;
    second.push(connected({ heartbeat_ms: 1000 }));
    await settle();
    expect(sub.state).toBe('open');
    // Back from sleep: silent for longer than a heartbeat, do not wait for the stall timer.
    vi.setSystemTime(Date.now() + 2500);
    const p3 = ff.expectSSE();
    lifecycle.fire('visible');
    await settle();
    expect(second.closed).toBe(true);
    await p3; // at once, no backoff
    sub.close();
  });

  it('closes with the error of an end frame that ends a stream before it started, and does not retry', async () => {
    const pipe = ff.expectSSE();
    const onError = vi.fn();
    const sub = client.subscribe({ threadId: 't9' }, { onError });
    (await pipe).push(':ok\n\n' + frame('end', { reason: 'error', error: { code: 'not_found', message: 'thread t9 not found' } }));
    (await pipe).end();
    const c = await sub.closed;
    expect(c.reason).toBe('error');
    expect(c.error).toMatchObject({ code: 'not_found', message: 'thread t9 not found' });
    expect(onError).toHaveBeenCalledOnce();
    expect(ff.requests).toHaveLength(1);
  });

  it('resumes after a reconnect frame that ends a stream before it started (the store did not answer)', async () => {
    const rec = record();
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
    const p2 = ff.expectSSE();
    (await p1).push(':ok\n\n' + frame('reconnect', { reason: 'unavailable', error: { code: 'unavailable', message: 'the store did not answer in time; retry' } }));
    await settle();
    const second = await p2;
    second.push(connected() + ev.slice(0, 2).map(eventFrame).join(''));
    await settle();
    expect(rec.events.map((e) => e.offset)).toEqual(ev.slice(0, 2).map((e) => e.offset));
    expect(ff.requests).toHaveLength(2);
    sub.close();
  });

  it('waits out the Retry-After of a 429 or 503 (up to the backoff\'s maxMs) before it connects again', async () => {
    const rec = record();
    ff.next(() => json({ error: { code: 'rate_limited', message: 'too many streams open at once' } }, 429, { 'Retry-After': '3' }));
    const p2 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, rec.handlers);
    await settle();
    const last = rec.states[rec.states.length - 1]!;
    expect(last[0]).toBe('reconnecting');
    expect(last[1]).toMatchObject({ delayMs: 3000, error: { code: 'rate_limited' } });
    await vi.advanceTimersByTimeAsync(2999);
    expect(ff.requests).toHaveLength(1); // not before its time
    await vi.advanceTimersByTimeAsync(1);
    (await p2).push(connected());
    await settle();
    expect(sub.state).toBe('open');
    sub.close();
  });

  it('closes with the error on a 4xx and does not retry', async () => {
    ff.next(() => errorResponse(404, 'not_found', 'thread t9 not found'));
    const onError = vi.fn();
    const sub = client.subscribe({ threadId: 't9' }, { onError });
    const c = await sub.closed;
    expect(c.reason).toBe('error');
    expect(c.error).toMatchObject({ code: 'not_found', status: 404, message: 'thread t9 not found' });
    expect(onError).toHaveBeenCalledOnce();
    expect(ff.requests).toHaveLength(1);
  });

  it('retries a 503 and a 200 that is cut before any byte', async () => {
    ff.next(() => errorResponse(503, 'unavailable'));
    const sub = client.subscribe({ threadId: 't1' }, {});
    await settle();
    expect(sub.state).toBe('reconnecting');
    const p = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(500);
    (await p).end();
    await settle();
    expect(sub.state).toBe('reconnecting');
    sub.close();
  });

  it('refuses an answer that is not an event stream', async () => {
    ff.next(() => json({ hello: 1 }));
    const sub = client.subscribe({ threadId: 't1' }, {});
    expect((await sub.closed).error?.code).toBe('protocol');
  });

  it('creates a run with POST /runs/stream and resumes it by GET with Last-Event-ID', async () => {
    const rec = record();
    const p1 = ff.expectSSE({ 'Content-Location': '/v1/runs/r1', Location: '/v1/runs/r1/events' });
    const sub = client.createRunStream('t1', { input: { messages: [{ role: 'user', content: 'Hi' }] } }, rec.handlers);
    const first = await p1;
    expect(ff.requests[0]).toMatchObject({ method: 'POST', url: 'http://tether.test/v1/threads/t1/runs/stream' });
    expect(JSON.parse(ff.requests[0]!.body!)).toEqual({ input: { messages: [{ role: 'user', content: 'Hi' }] } });
    const key = ff.requests[0]!.headers.get('idempotency-key');
    expect(key).toBeTruthy();
    await settle();
    expect(sub.runId).toBe('r1');
    first.push(connected({ run_id: 'r1' }) + ev.slice(0, 5).map(eventFrame).join(''));
    await settle();
    first.fail();
    const p2 = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(500);
    const second = await p2;
    expect(ff.requests[1]).toMatchObject({ method: 'GET', url: 'http://tether.test/v1/runs/r1/events' });
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[4]!.offset);
    second.push(connected({ run_id: 'r1' }) + ev.slice(5).map(eventFrame).join(''));
    expect(await sub.closed).toEqual({ reason: 'done' });
    expect(rec.events).toHaveLength(ev.length);
  });

  it('retries a POST that got no answer with the same Idempotency-Key, then resumes from the run start', async () => {
    ff.next(() => new TypeError('reset'));
    const sub = client.createRunStream('t1', {}, {});
    await settle();
    const p2 = ff.expectSSE({ 'Content-Location': '/v1/runs/r1' });
    await vi.advanceTimersByTimeAsync(500);
    const second = await p2;
    expect(ff.requests[1]!.method).toBe('POST');
    expect(ff.requests[1]!.headers.get('idempotency-key')).toBe(ff.requests[0]!.headers.get('idempotency-key'));
    second.push(connected({ run_id: 'r1' }));
    await settle();
    // Cut before the first event: the client asks whether the run ended,
    // and since it did not, follows it from its start.
    ff.next(() => json({ run: { ...v.snapshot.runs[0], status: 'running' }, messages: [] }));
    second.end();
    const p3 = ff.expectSSE();
    await settle();
    expect(ff.requests[2]!.url).toBe('http://tether.test/v1/runs/r1');
    await vi.advanceTimersByTimeAsync(500);
    await p3;
    expect(ff.requests[3]!.url).toBe('http://tether.test/v1/runs/r1/events?after=-1');
    sub.close();
  });

  it('keeps "now" from moving: a reconnect resumes from the tail seen at connect', async () => {
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, { after: 'now' });
    const first = await p1;
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/threads/t1/events?after=now');
    first.push(connected({ offset: ev[2]!.offset }));
    await settle();
    first.fail();
    const p2 = ff.expectSSE();
    await vi.advanceTimersByTimeAsync(500);
    await p2;
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[2]!.offset);
    sub.close();
  });

  it('lets a reset snapshot move the cursor back; another snapshot never does', async () => {
    const rec = record();
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, { ...rec.handlers, after: ev[5]!.offset });
    const first = await p1;
    expect(ff.requests[0]!.url).toContain('after=0000000001_0000000000000006');
    first.push(connected() + frame('snapshot', { ...emptySnapshot(v), offset: ev[1]!.offset, reset: true }, ev[1]!.offset));
    await settle();
    expect(sub.cursor).toBe(ev[1]!.offset);
    first.push(frame('snapshot', { ...emptySnapshot(v), offset: ev[0]!.offset }, ev[0]!.offset));
    await settle();
    expect(sub.cursor).toBe(ev[1]!.offset);
    expect(rec.snapshots.map((s) => s.reset ?? false)).toEqual([true, false]);
    sub.close();
  });

  it('ends a run subscription the server closes at once because the run had ended', async () => {
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ runId: 'r1' }, { after: ev[9]!.offset });
    const first = await p1;
    ff.next(() => json({ run: { ...v.snapshot.runs[0] }, messages: [] }));
    first.push(connected());
    first.end();
    expect(await sub.closed).toEqual({ reason: 'done' });
    expect(ff.requests[1]!.url).toBe('http://tether.test/v1/runs/r1');
  });

  it('close() aborts the reader and leaves no timer, connection or listener', async () => {
    const p1 = ff.expectSSE();
    const onEvent = vi.fn();
    const sub = client.subscribe({ threadId: 't1' }, { onEvent });
    const first = await p1;
    first.push(connected() + eventFrame(ev[0]!));
    await settle();
    expect(vi.getTimerCount()).toBeGreaterThan(0); // the stall timer
    expect(ff.open).toBe(1);
    sub.close();
    await settle();
    expect(first.closed).toBe(true);
    first.push(eventFrame(ev[1]!));
    await settle();
    expect(onEvent).toHaveBeenCalledTimes(1); // nothing after close
    expect(sub.state).toBe('closed');
    // also while waiting to reconnect
    ff.next(() => new TypeError('down'));
    const sub2 = client.subscribe({ threadId: 't1' }, {});
    await settle();
    expect(sub2.state).toBe('reconnecting');
    expect(vi.getTimerCount()).toBe(1);
    sub2.close();
  });

  it('closes when its signal aborts', async () => {
    const ac = new AbortController();
    const p1 = ff.expectSSE();
    const sub = client.subscribe({ threadId: 't1' }, { signal: ac.signal });
    (await p1).push(connected());
    ac.abort();
    expect(await sub.closed).toEqual({ reason: 'closed' });
  });

  it('sends the token and the message filter', async () => {
    const c = new TetherClient({ baseUrl: 'http://tether.test', fetch: ff.fetch, token: () => 'secret-token-123456', lifecycle: null });
    const p1 = ff.expectSSE();
    const sub = c.subscribe({ runId: 'r1', messageId: 'm1' }, { types: ['text.delta', 'message.finished'] });
    await p1;
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/runs/r1/events?message_id=m1&types=text.delta%2Cmessage.finished');
    expect(ff.requests[0]!.headers.get('authorization')).toBe('Bearer secret-token-123456');
    sub.close();
  });

  it('sends only headers a cross-origin page may send (safelisted or allowed by the server\'s CORS)', async () => {
    const allowed = new Set(['accept', 'authorization', 'content-type', 'last-event-id', 'idempotency-key']);
    const p1 = ff.expectSSE({ 'Content-Location': '/v1/runs/r1' });
    const sub = client.createRunStream('t1', {}, {});
    (await p1).push(connected() + eventFrame(ev[0]!));
    await settle();
    const p2 = ff.expectSSE();
    ff.pipes[0]!.fail();
    await vi.advanceTimersByTimeAsync(500);
    await p2;
    for (const r of ff.requests) for (const [name] of r.headers) expect(allowed).toContain(name);
    expect(ff.requests[1]!.headers.get('last-event-id')).toBe(ev[0]!.offset);
    sub.close();
  });

  it('ends a message subscription at its message.finished', async () => {
    const p1 = ff.expectSSE();
    const rec = record();
    const sub = client.subscribe({ threadId: 't1', messageId: 'm1' }, rec.handlers);
    (await p1).push(connected() + [ev[3], ev[4], ev[8]].map((e) => eventFrame(e!)).join('') + eventFrame(ev[9]!));
    expect(await sub.closed).toEqual({ reason: 'done' });
    expect(rec.events.map((e) => e.type)).toEqual(['message.started', 'text.delta', 'message.finished']);
  });
});
