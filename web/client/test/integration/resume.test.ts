// Drops and resume against a real `tether serve`: the client must end with
// exactly the server's state, nothing lost, nothing twice.
import { describe, expect, it } from 'vitest';
import { isEventsGet, isRunStreamPost } from './wire.js';
import { demo, expectSameAsServer, openStreams, setup, threadName, until } from './helpers.js';

describe('resume after drops (real server)', () => {
  it('POST /runs/stream cut mid-run resumes by GET with Last-Event-ID: same answer, no duplicate text', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('drop');
    await direct.createThread({ id: tid });
    wire.on(isRunStreamPost, () => ({ kind: 'cut', after: 1500 }));
    wire.on(isEventsGet, (n) => (n < 4 ? { kind: 'cut', after: 900 + 300 * n } : { kind: 'pass' }));
    const results = new Map<string, number>();
    const live = client.startRun(tid, demo(200, 5), {
      reconcileIntervalMs: 0,
      onEvent: (_e, result) => results.set(result, (results.get(result) ?? 0) + 1),
    });
    const run = await live.finished;
    expect(run?.status).toBe('done');
    // Four cuts of the GET plus the POST's: five resumes, all by Last-Event-ID.
    const gets = wire.log.filter((l) => l.startsWith('GET') && l.includes('/events'));
    expect(gets.length).toBeGreaterThanOrEqual(5);
    expect(gets.every((l) => l.includes(`/v1/runs/${live.runId}/events`) && l.includes('last-event-id='))).toBe(true);
    // Every event the client passed on was applied: the resume replayed nothing.
    expect([...results.keys()]).toEqual(['applied']);
    const fa = await direct.finalAnswer(tid);
    expect(fa.complete).toBe(true);
    expect(live.store.finalAnswer()?.content).toBe(fa.content);
    expect(fa.content.split(' ').length).toBeGreaterThanOrEqual(200); // the whole answer, not a prefix
    await expectSameAsServer(live.store, direct);
    expect(live.store.getState().recoveredRuns.size).toBe(0); // resumed by the stream, no fallback
    live.close();
  });

  it('a thread subscription survives repeated cuts across two runs', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('thread-drop');
    await direct.createThread({ id: tid, metadata: { title: 'drops' } });
    wire.on(isEventsGet, (n) => (n < 6 ? { kind: 'cut', after: 2500 } : { kind: 'pass' }));
    const live = client.followThread(tid, { reconcileIntervalMs: 0 });
    await until(() => live.store.getState().loaded, 5000, 'snapshot');
    const r1 = await live.startRun(demo(120, 3));
    await until(() => live.store.run(r1.id)?.status === 'done', 15000, 'run 1');
    const r2 = await live.startRun({ ...demo(60, 3), multitask: 'enqueue' });
    await until(() => live.store.run(r2.id)?.status === 'done', 15000, 'run 2');
    await expectSameAsServer(live.store, direct);
    expect(live.store.getState().thread?.metadata).toEqual({ title: 'drops' });
    expect(wire.log.filter((l) => l.includes('cut')).length).toBeGreaterThanOrEqual(3);
    live.close();
  });

  it('parses the real stream handed over in uneven chunks', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('chunks');
    await direct.createThread({ id: tid });
    wire.on(isRunStreamPost, () => ({ kind: 'rechunk', sizes: [1, 2, 3, 5, 8, 13, 21, 34, 700, 4] }));
    const live = client.startRun(tid, demo(80, 1, { ask: false }));
    expect((await live.finished)?.status).toBe('done');
    await expectSameAsServer(live.store, direct);
    const msg = live.store.getState().messages.find((m) => m.role === 'assistant')!;
    expect(msg.parts.map((p) => p.type)).toEqual(['reasoning', 'tool', 'text']);
    live.close();
  });

  it('follows a run that is already running from its snapshot, then closes', async () => {
    const { client, direct } = setup();
    const tid = threadName('late');
    await direct.createThread({ id: tid });
    const run = await direct.createRun(tid, demo(100, 5));
    await new Promise((r) => setTimeout(r, 150)); // join late, mid-run
    const live = client.followRun(run.id);
    expect((await live.finished)?.status).toBe('done');
    expect(await live.subscription.closed).toEqual({ reason: 'done' });
    await expectSameAsServer(live.store, direct);
  });

  it('close() leaves no connection open, on the client or the server', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('close');
    await direct.createThread({ id: tid });
    const before = await openStreams();
    const live = client.followThread(tid);
    const sub = client.subscribe({ threadId: tid }, {});
    await until(() => live.subscription.state === 'open' && sub.state === 'open', 5000, 'open');
    expect(wire.open).toBe(2);
    await until(async () => (await openStreams()) === before + 2, 5000, 'server sees the streams');
    live.close();
    sub.close();
    await until(() => wire.open === 0, 2000, 'client bodies closed');
    await until(async () => (await openStreams()) === before, 5000, 'server streams closed');
    expect(live.subscription.state).toBe('closed');
  });
});
