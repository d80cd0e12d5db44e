// Truncation fallback and reconciliation timing, with fake timers and a
// scripted fetch (the integration tests run the same paths on a real server).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TetherClient } from '../src/client.js';
import { Reducer } from '../src/reducer.js';
import { defaultTimers } from '../src/timing.js';
import type { Snapshot } from '../src/types.js';
import { FakeFetch, connected, eventFrame, json, settle } from './helpers/fake.js';
import { reduceVector } from './helpers/vectors.js';

const v = reduceVector('01');
const ev = v.events;

function snapshotAfter(k: number): Snapshot {
  const r = Reducer.empty(v.thread);
  ev.slice(0, k).forEach((e) => r.apply(e));
  return JSON.parse(JSON.stringify(r.snapshot()));
}

let ff: FakeFetch;
let client: TetherClient;
let snapshotTimes: number[];
let runPolls: number[];
let serverSnapshot: () => Snapshot;

beforeEach(() => {
  vi.useFakeTimers();
  ff = new FakeFetch();
  snapshotTimes = [];
  runPolls = [];
  serverSnapshot = () => snapshotAfter(7); // the run is still going
  ff.fallback = (req) => {
    const path = new URL(req.url).pathname;
    if (path === '/v1/threads/t1') {
      snapshotTimes.push(Date.now());
      return json(serverSnapshot());
    }
    if (path === '/v1/runs/r1') {
      runPolls.push(Date.now());
      const s = serverSnapshot();
      return json({ run: s.runs[0], messages: s.messages });
    }
    return new TypeError('the stream cannot be reached'); // every SSE reconnect fails
  };
  client = new TetherClient({ baseUrl: 'http://tether.test', fetch: ff.fetch, lifecycle: null, timers: { ...defaultTimers, random: () => 0 } });
});

afterEach(() => {
  expect(vi.getTimerCount(), 'timers left').toBe(0);
  expect(ff.open, 'connections left').toBe(0);
  vi.useRealTimers();
});

async function startCut(opts = {}) {
  const p = ff.expectSSE({ 'Content-Location': '/v1/runs/r1' });
  const live = client.startRun('t1', {}, { reconcileIntervalMs: 0, ...opts });
  const pipe = await p;
  pipe.push(connected({ run_id: 'r1' }) + ev.slice(0, 6).map(eventFrame).join(''));
  await settle();
  expect(live.store.getState().messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello' }]);
  pipe.fail(); // cut mid-run, before run.finished
  await settle();
  return live;
}

describe('truncation fallback', () => {
  it('after 3 failed resumes, polls the snapshot at 1, 2, 4, then every 5 s, and stops once the run ended', async () => {
    const live = await startCut();
    // Three resumes, after 500, 1000, 2000 ms of backoff (no jitter), fail.
    await vi.advanceTimersByTimeAsync(500 + 1000 + 2000 - 1);
    expect(live.store.getState().recovery).toBe('idle');
    expect(snapshotTimes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1); // the third failed resume: the fallback starts
    const t0 = Date.now();
    expect(live.store.getState().recovery).toBe('recovering');
    await vi.advanceTimersByTimeAsync(1000 + 2000 + 4000 + 5000 + 5000);
    expect(snapshotTimes.map((t) => t - t0)).toEqual([1000, 3000, 7000, 12000, 17000]);
    // Each poll replaced the content with the server's (not appended).
    expect(live.store.getState().messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello' }]);
    serverSnapshot = () => snapshotAfter(ev.length);
    await vi.advanceTimersByTimeAsync(5000);
    const st = live.store.getState();
    expect(st.recovery).toBe('recovered');
    expect(st.messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello world' }]);
    expect([...st.recoveredMessages]).toEqual(['m1']);
    expect(st.recoveredRuns.has('r1')).toBe(true);
    expect(await live.finished).toMatchObject({ id: 'r1', status: 'done' });
    expect(live.subscription.state).toBe('closed'); // settled: nothing more to follow
    const n = snapshotTimes.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(snapshotTimes).toHaveLength(n);
    live.close();
  });

  it('gives up after 240 s by default, keeps the latest state, and keeps trying the stream', async () => {
    const live = await startCut();
    await vi.advanceTimersByTimeAsync(3500);
    expect(live.store.getState().recovery).toBe('recovering');
    await vi.advanceTimersByTimeAsync(239_000);
    expect(live.store.getState().recovery).toBe('recovering');
    await vi.advanceTimersByTimeAsync(3_000);
    expect(live.store.getState().recovery).toBe('gave_up');
    const n = snapshotTimes.length;
    expect(n).toBe(3 + Math.floor((240_000 - 7000) / 5000) + 1);
    const requests = ff.requests.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(snapshotTimes).toHaveLength(n);
    expect(ff.requests.length).toBeGreaterThan(requests); // the stream is still retried (capped backoff)
    expect(live.subscription.state).toBe('reconnecting');
    live.close();
    expect(await live.finished).toBeUndefined();
  });

  it('stops the fallback when the stream comes back', async () => {
    const live = await startCut();
    await vi.advanceTimersByTimeAsync(3500 + 1000);
    expect(snapshotTimes).toHaveLength(1);
    // The stream comes back at the next resume (backoff 4 s; a snapshot fetch happens meanwhile).
    const { handler, pipe: p } = ff.sse();
    const fallback = ff.fallback!;
    ff.fallback = (req, signal) => (req.url.endsWith('/events') ? handler(req, signal) : fallback(req, signal));
    await vi.advanceTimersByTimeAsync(4000);
    const pipe = await p;
    expect(ff.requests[ff.requests.length - 1]!.headers.get('last-event-id')).toBe(ev[6]!.offset); // after the recovered snapshot
    pipe.push(connected({ run_id: 'r1', heartbeat_ms: 60_000 }));
    await settle();
    expect(live.store.getState().recovery).toBe('idle');
    const n = snapshotTimes.length;
    await vi.advanceTimersByTimeAsync(20_000);
    expect(snapshotTimes).toHaveLength(n);
    pipe.push(ev.slice(7).map(eventFrame).join(''));
    expect((await live.finished)?.status).toBe('done');
    live.close();
  });
});

describe('fatal errors', () => {
  it('a refused run stream (409 run_active) ends the live run: finished resolves, the error is in the store', async () => {
    ff.next(() => new Response(JSON.stringify({ error: { code: 'run_active', message: 'busy' } }), { status: 409 }));
    const live = client.startRun('t1', {});
    expect(await live.finished).toBeUndefined();
    expect(live.store.getState().error).toMatchObject({ code: 'run_active', status: 409 });
    expect(live.subscription.state).toBe('closed');
    live.close();
  });
});

describe('reconciliation', () => {
  it('polls the run every 15 s while it is active and settles when the server says it ended', async () => {
    const p = ff.expectSSE({ 'Content-Location': '/v1/runs/r1' });
    const live = client.startRun('t1', {});
    const pipe = await p;
    pipe.push(connected({ run_id: 'r1', heartbeat_ms: 60_000 }) + ev.slice(0, 6).map(eventFrame).join(''));
    await settle();
    // The stream stays open but nothing comes (a proxy holding the events).
    await vi.advanceTimersByTimeAsync(45_000);
    expect(runPolls.length).toBe(3);
    expect(snapshotTimes).toEqual([]); // the server agrees the run is active: nothing to settle
    serverSnapshot = () => snapshotAfter(ev.length);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(snapshotTimes).toHaveLength(1);
    const st = live.store.getState();
    expect(st.runs[0]!.status).toBe('done');
    expect(st.recoveredRuns.has('r1')).toBe(true);
    expect(st.messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello world' }]);
    // Late events from the held stream are replays now: dropped.
    const seen: string[] = [];
    live.store.onEvent((_e, r) => seen.push(r));
    pipe.push(ev.slice(6).map(eventFrame).join(''));
    await settle();
    expect(seen.every((r) => r === 'duplicate')).toBe(true);
    const n = runPolls.length;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(runPolls).toHaveLength(n); // no run active: no polling
    live.close();
  });

  it('a resync snapshot older than what the stream delivered meanwhile does not take the state back: it is fetched again', async () => {
    const p = ff.expectSSE();
    const live = client.followThread('t1', { reconcileIntervalMs: 0 });
    const pipe = await p;
    pipe.push(connected() + `id: ${ev[5]!.offset}\nevent: snapshot\ndata: ${JSON.stringify(snapshotAfter(6))}\n\n`);
    await settle();
    expect(live.store.getState().activeRun?.id).toBe('r1');
    // Every state the store shows from here: once r1 ended it must stay so.
    const shown: (string | undefined)[] = [];
    live.store.subscribe(() => shown.push(live.store.getState().runs[0]?.status));
    // The server's state when it answers the first GET: the custom event
    // (07), before the end of the run that the stream then delivers; later
    // answers have the whole run.
    let gets = 0;
    serverSnapshot = () => snapshotAfter(gets++ === 0 ? 7 : ev.length);
    // An event this store refuses (it diverged from the server), then the
    // rest of the run, in one read: the resync's GET is answered after.
    const bogus = { ...ev[6]!, type: 'text.delta', message_id: 'not-here', delta: 'x' };
    pipe.push(eventFrame(bogus) + ev.slice(7).map(eventFrame).join(''));
    await settle();
    const st = live.store.getState();
    expect(st.runs[0]!.status).toBe('done');
    expect(st.activeRun).toBeUndefined();
    expect(st.offset).toBe(ev[ev.length - 1]!.offset);
    expect(st.messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello world' }]);
    expect(st.needsResync).toBe(false);
    expect(snapshotTimes).toHaveLength(2);
    expect(shown.slice(shown.indexOf('done'))).toEqual(shown.slice(shown.indexOf('done')).map(() => 'done'));
    expect(live.subscription.state).toBe('open'); // nothing lost on the stream: not reconnected
    live.close();
  });

  it('a resync snapshot still older after it was fetched again is applied, and the stream resumes right after it', async () => {
    const p = ff.expectSSE();
    const live = client.followThread('t1', { reconcileIntervalMs: 0 });
    const pipe = await p;
    pipe.push(connected() + `id: ${ev[5]!.offset}\nevent: snapshot\ndata: ${JSON.stringify(snapshotAfter(6))}\n\n`);
    await settle();
    serverSnapshot = () => snapshotAfter(7); // a server that keeps answering from before the run's end
    const next = ff.sse();
    const rest = ff.fallback!;
    ff.fallback = (req, signal) => (new URL(req.url).pathname.endsWith('/events') ? next.handler(req, signal) : rest(req, signal));
    const bogus = { ...ev[6]!, type: 'text.delta', message_id: 'not-here', delta: 'x' };
    pipe.push(eventFrame(bogus) + ev.slice(7).map(eventFrame).join(''));
    await settle();
    expect(snapshotTimes).toHaveLength(3);
    // The stream is asked again from the snapshot's offset: what came after it comes again.
    const again = await next.pipe;
    expect(ff.requests.at(-1)!.headers.get('last-event-id')).toBe(ev[6]!.offset);
    again.push(connected() + ev.slice(7).map(eventFrame).join(''));
    await settle();
    const st = live.store.getState();
    expect(st.runs[0]!.status).toBe('done');
    expect(st.offset).toBe(ev[ev.length - 1]!.offset);
    expect(st.messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello world' }]);
    live.close();
  });

  it('a run followed to its end is not taken back to running by a resync snapshot still older (a server behind)', async () => {
    const p = ff.expectSSE({ 'Content-Location': '/v1/runs/r1' });
    const live = client.startRun('t1', {}, { reconcileIntervalMs: 0 });
    const pipe = await p;
    pipe.push(connected({ run_id: 'r1' }) + ev.slice(0, 6).map(eventFrame).join(''));
    await settle();
    const shown: (string | undefined)[] = [];
    live.store.subscribe(() => shown.push(live.store.getState().runs[0]?.status));
    serverSnapshot = () => snapshotAfter(7); // every GET answered from before the run's end
    // An event the store refuses, then the rest of the run, to its end:
    // the run's stream is over, so none can resume after the snapshot.
    const bogus = { ...ev[6]!, type: 'text.delta', message_id: 'not-here', delta: 'x' };
    pipe.push(eventFrame(bogus) + ev.slice(7).map(eventFrame).join(''));
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    const st = live.store.getState();
    expect(st.runs[0]!.status).toBe('done');
    expect(st.activeRun).toBeUndefined();
    expect(shown.slice(shown.indexOf('done'))).toEqual(shown.slice(shown.indexOf('done')).map(() => 'done'));
    expect(snapshotTimes).toHaveLength(3);
    expect(await live.finished).toMatchObject({ id: 'r1', status: 'done' });
    live.close();
  });

  it('close() stops polling and leaves no timer', async () => {
    const p = ff.expectSSE();
    const live = client.followThread('t1', { reconcileIntervalMs: 1000 });
    (await p).push(connected() + `id: ${ev[2]!.offset}\nevent: snapshot\ndata: ${JSON.stringify(snapshotAfter(3))}\n\n`);
    await settle();
    expect(live.store.getState().activeRun?.id).toBe('r1');
    await vi.advanceTimersByTimeAsync(1000);
    expect(runPolls).toHaveLength(1);
    live.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(runPolls).toHaveLength(1);
  });
});
