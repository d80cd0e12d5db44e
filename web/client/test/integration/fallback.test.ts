// When resuming is not enough: the truncation fallback (REST snapshot with
// backoff) and reconciliation polling, against a real `tether serve`.
import { describe, expect, it } from 'vitest';
import { isEventsGet, isRunStreamPost } from './wire.js';
import { demo, expectSameAsServer, setup, threadName, until } from './helpers.js';

describe('truncation fallback (real server)', () => {
  it('a run stream cut while every resume fails is recovered from the snapshot, replaced not appended, flagged', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('fallback');
    await direct.createThread({ id: tid });
    wire.on(isRunStreamPost, () => ({ kind: 'cut', after: 1200 }));
    wire.on(isEventsGet, () => ({ kind: 'fail' })); // SSE reconnects fail; REST works
    const live = client.startRun(tid, demo(150, 5), {
      resumeAttempts: 3,
      recoverySchedule: [100, 200, 400, 500], // the default is 1, 2, 4, then every 5 s
      reconcileIntervalMs: 0,
    });
    await until(() => live.store.getState().messages.some((m) => m.role === 'assistant' && m.parts.length > 0), 5000, 'partial content');
    const partial = live.store.getState().messages.find((m) => m.role === 'assistant')!;
    expect(partial.status).toBe('running');
    const run = await live.finished;
    expect(run?.status).toBe('done');
    const view = live.store.getState();
    expect(view.recovery).toBe('recovered');
    expect(view.recoveredRuns.has(live.runId!)).toBe(true);
    expect(view.recoveredMessages.has(partial.id)).toBe(true);
    const fa = await direct.finalAnswer(tid);
    expect(live.store.finalAnswer()?.content).toBe(fa.content); // the complete answer, once
    await expectSameAsServer(live.store, direct);
    expect(wire.log.filter((l) => l.startsWith('GET') && l.includes('/events') && l.includes(' fail')).length).toBeGreaterThanOrEqual(3);
    expect(wire.log.some((l) => l.startsWith(`GET`) && l.includes(`/v1/threads/${tid} `))).toBe(true);
    await until(() => live.subscription.state === 'closed', 2000, 'subscription closed once settled');
    live.close();
  });

  it('recovers a run whose stream never worked at all (resume and POST stream refused after creation)', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('never');
    await direct.createThread({ id: tid });
    // The POST creates the run, but its answer is cut after the headers.
    wire.on(isRunStreamPost, () => ({ kind: 'cut', after: 0 }));
    wire.on(isEventsGet, () => ({ kind: 'hang' }));
    const live = client.startRun(tid, demo(40, 5), {
      readinessTimeoutMs: 150,
      resumeAttempts: 2,
      recoverySchedule: [100, 200],
      reconcileIntervalMs: 0,
    });
    expect((await live.finished)?.status).toBe('done');
    expect(live.store.getState().recoveredRuns.has(live.runId!)).toBe(true);
    expect(live.store.finalAnswer()?.content).toBe((await direct.finalAnswer(tid)).content);
    live.close();
    await until(() => wire.open === 0, 2000, 'no connection left');
  });

  it('gives up after recoveryMaxMs, keeping the latest state, and stops polling', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('giveup');
    await direct.createThread({ id: tid });
    wire.on(isRunStreamPost, () => ({ kind: 'cut', after: 900 }));
    wire.on(isEventsGet, () => ({ kind: 'fail' }));
    const live = client.startRun(tid, { ...demo(10, 5), metadata: { demo: { tokens: 10, delay_ms: 5, ask: true } } }, {
      resumeAttempts: 1,
      recoverySchedule: [50],
      recoveryMaxMs: 400,
      reconcileIntervalMs: 0,
    });
    // ask: the run waits for input, so it cannot finish: the fallback gives up.
    await until(() => live.store.getState().recovery === 'gave_up', 5000, 'gave up');
    expect(live.store.run(live.runId!)?.status).toBe('waiting');
    const polls = wire.log.filter((l) => l.includes(`/v1/threads/${tid} `)).length;
    await new Promise((r) => setTimeout(r, 300));
    expect(wire.log.filter((l) => l.includes(`/v1/threads/${tid} `)).length).toBe(polls);
    await direct.cancelRun(live.runId!);
    live.close();
  });
});

describe('reconciliation (real server)', () => {
  it('settles a run that ended while its stream was stalled and reconnects hung', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('reconcile');
    await direct.createThread({ id: tid });
    wire.on(isRunStreamPost, () => ({ kind: 'stall', after: 1500 })); // open, but nothing more, not even pings
    wire.on(isEventsGet, () => ({ kind: 'hang' }));
    const live = client.startRun(tid, demo(60, 5), {
      readinessTimeoutMs: 60_000, // reconnects hang: the fallback never starts
      reconcileIntervalMs: 300,
    });
    const run = await live.finished;
    expect(run?.status).toBe('done');
    expect(live.store.getState().recoveredRuns.has(live.runId!)).toBe(true);
    expect(live.store.getState().recovery).toBe('idle');
    await expectSameAsServer(live.store, direct);
    expect(wire.log.some((l) => l.includes(`GET`) && l.endsWith(`/v1/runs/${live.runId} pass`))).toBe(true);
    live.close();
    await until(() => wire.open === 0, 2000, 'no connection left');
  });

  it('a thread store settles too, and stops polling once no run is active', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('reconcile-thread');
    await direct.createThread({ id: tid });
    const live = client.followThread(tid, { reconcileIntervalMs: 200, readinessTimeoutMs: 60_000 });
    await until(() => live.subscription.state === 'open', 5000, 'open');
    wire.on(isEventsGet, () => ({ kind: 'hang' }));
    live.subscription.reconnect(); // the stream goes away and cannot come back
    const run = await live.startRun(demo(30, 5));
    await until(() => live.store.run(run.id)?.status === 'done', 10_000, 'settled by polling');
    await expectSameAsServer(live.store, direct);
    const polls = () => wire.log.filter((l) => l.endsWith(`/v1/runs/${run.id} pass`)).length;
    const n = polls();
    await new Promise((r) => setTimeout(r, 500));
    expect(polls()).toBe(n);
    live.close();
  });

  it('close() (a hook unmounting) aborts the reconciliation\'s request in flight, and none is made after', async () => {
    const held: { url: string; signal: AbortSignal | undefined }[] = [];
    const after: string[] = [];
    let closed = false;
    const fetchFn: typeof fetch = (input, init = {}) => {
      const url = String(input);
      if (closed) after.push(url);
      if ((init.method ?? 'GET') === 'GET' && /\/v1\/runs\/[^/]+$/.test(url)) {
        held.push({ url, signal: init.signal ?? undefined });
        return new Promise((_, reject) => init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))));
      }
      return globalThis.fetch(input, init);
    };
    const { client } = setup({ fetch: fetchFn });
    const tid = threadName('reconcile-close');
    await client.createThread({ id: tid });
    const live = client.followThread(tid, { reconcileIntervalMs: 50 });
    await live.startRun(demo(100, 50));
    await until(() => held.length > 0, 10_000, 'a reconcile request');
    live.close();
    closed = true;
    expect(held[0]!.signal?.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(after).toEqual([]);
  });
});
