// Stale-event guards and reset snapshots, against a real `tether serve`.
import { describe, expect, it } from 'vitest';
import { TetherError } from '../../src/errors.js';
import { ThreadStore } from '../../src/store.js';
import type { Snapshot, TetherEvent } from '../../src/types.js';
import { demo, expectSameAsServer, setup, threadName, until } from './helpers.js';

/** All events of a run, read with the JSON catch-up of the protocol (§5). */
async function runEvents(base: string, runId: string): Promise<TetherEvent[]> {
  const res = await fetch(`${base}/v1/runs/${runId}/events?after=-1`, { headers: { Accept: 'application/json' } });
  const body = (await res.json()) as { events: TetherEvent[]; done?: boolean };
  expect(body.done).toBe(true); // not up_to_date: later runs' events follow in the thread's log

  return body.events;
}

describe('reset snapshots (real server)', () => {
  it('a cursor the server does not know gets a reset snapshot that replaces the local state', async () => {
    const { client, direct } = setup();
    const tid = threadName('reset');
    await direct.createThread({ id: tid });
    const r1 = await direct.createRun(tid, demo(20, 1));
    await until(async () => (await direct.getRun(r1.id)).run.status === 'done', 10_000, 'run 1');
    // A store holding what this page believed: the real state plus a message
    // the server never had, at an offset from another epoch (a restored backup).
    const real = await direct.getThread(tid);
    const bogusOffset = '0000000001_0000000000000001';
    const believed: Snapshot = {
      ...real,
      offset: bogusOffset,
      messages: [...real.messages, { ...real.messages[0]!, id: 'ghost', parts: [{ type: 'text', text: 'never was' }] }],
    };
    const store = new ThreadStore({ threadId: tid });
    store.applySnapshot(believed);
    expect(store.getState().messages.some((m) => m.id === 'ghost')).toBe(true);
    const live = client.followThread(tid, { store }); // resumes from the store's offset: unknown to the server
    await until(() => store.getState().resets === 1, 5000, 'reset snapshot');
    expect(store.getState().messages.some((m) => m.id === 'ghost')).toBe(false);
    await expectSameAsServer(store, direct);
    // Later events follow the reset snapshot.
    const r2 = await live.startRun(demo(10, 1));
    await until(() => store.run(r2.id)?.status === 'done', 10_000, 'run 2');
    await expectSameAsServer(store, direct);
    live.close();
  });

  it('a snapshot older than the state held is ignored (a slow REST answer)', async () => {
    const { client, direct } = setup();
    const tid = threadName('old-snap');
    await direct.createThread({ id: tid });
    const live = client.followThread(tid);
    const run = await live.startRun(demo(60, 5));
    await until(() => live.store.getState().messages.some((m) => m.role === 'assistant'), 5000, 'streaming');
    const early = await direct.getThread(tid); // taken mid-run
    await until(() => live.store.run(run.id)?.status === 'done', 10_000, 'done');
    const before = live.store.getState();
    expect(live.store.applySnapshot(early, { recovered: true })).toBe(false);
    expect(live.store.getState()).toBe(before);
    await expectSameAsServer(live.store, direct);
    live.close();
  });
});

describe('stale events (real server)', () => {
  it('drops events of a superseded run, events after a terminal event, and replays', async () => {
    const { client, direct } = setup();
    const tid = threadName('stale');
    await direct.createThread({ id: tid });
    // Run A runs slowly; run B interrupts it.
    const a = client.startRun(tid, demo(400, 5));
    await until(() => (a.store.getState().messages.find((m) => m.role === 'assistant')?.parts.length ?? 0) > 1, 5000, 'A streaming');
    const b = client.startRun(tid, { ...demo(20, 1), multitask: 'interrupt' });
    expect((await b.finished)?.status).toBe('done');
    expect((await a.finished)?.status).toBe('cancelled');
    const aEvents = await runEvents(direct.options.baseUrl, a.runId!);

    // The run store of B never takes A's events, even late ones.
    const bState = b.store.getState();
    expect(aEvents.map((e) => b.store.applyEvent(e))).toEqual(aEvents.map(() => 'superseded'));
    expect(b.store.getState()).toBe(bState);

    // A thread store that saw everything: A's events again are replays, and
    // an event of A after its run.finished (a stray from an old connection)
    // is stale.
    const t = client.followThread(tid);
    await until(() => t.store.getState().loaded && t.store.run(b.runId!)?.status === 'done', 5000, 'thread store');
    expect(new Set(aEvents.map((e) => t.store.applyEvent(e)))).toEqual(new Set(['duplicate']));
    const late: TetherEvent = { ...aEvents.find((e) => e.type.endsWith('.delta'))!, offset: '9999999999_9999999999999999' };
    expect(t.store.applyEvent(late)).toBe('stale');
    await expectSameAsServer(t.store, direct);
    await expectSameAsServer(a.store, direct);
    await expectSameAsServer(b.store, direct);
    t.close();
  });

  it('interrupting runs on one thread stream: every event once, in order, same state as the server', async () => {
    const { client, direct } = setup();
    const tid = threadName('interrupt');
    await direct.createThread({ id: tid });
    const seen: string[] = [];
    const live = client.followThread(tid, { onEvent: (e, r) => r === 'applied' && seen.push(e.offset) });
    await until(() => live.store.getState().loaded, 5000, 'snapshot');
    const r1 = await live.startRun(demo(300, 5));
    await until(() => live.store.run(r1.id)?.status === 'running', 5000, 'r1 running');
    const r2 = await live.startRun({ ...demo(10, 1), multitask: 'interrupt' });
    await until(() => live.store.run(r2.id)?.status === 'done', 15_000, 'r2 done');
    expect(live.store.run(r1.id)?.status).toBe('cancelled');
    expect([...seen].sort()).toEqual(seen);
    expect(new Set(seen).size).toBe(seen.length);
    await expectSameAsServer(live.store, direct);
    live.close();
  });
});

describe('REST errors (real server)', () => {
  it('maps the error body to TetherError', async () => {
    const { client } = setup();
    const err = await client.getThread('no-such-thread').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TetherError);
    expect(err).toMatchObject({ code: 'not_found', status: 404 });
    const tid = threadName('busy');
    await client.createThread({ id: tid });
    const run = await client.createRun(tid, demo(50, 5));
    const busy = await client.createRun(tid, demo(5, 1)).catch((e: unknown) => e);
    expect(busy).toMatchObject({ code: 'run_active', status: 409 });
    expect((busy as TetherError).requestId).toBeTruthy();
    const bad = await client.createRun(tid, { agent: 'nope' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'bad_request', status: 400 });
    await client.cancelRun(run.id);
    const page = await client.listThreads({ limit: 1 });
    expect(page.threads).toHaveLength(1);
    await client.deleteThread(tid);
    expect(await client.getThread(tid).catch((e: TetherError) => e.code)).toBe('not_found');
  });

  it('a subscription to a deleted thread closes with not_found', async () => {
    const { client, direct } = setup();
    const tid = threadName('deleted');
    await direct.createThread({ id: tid });
    const live = client.followThread(tid);
    await until(() => live.subscription.state === 'open', 5000, 'open');
    await direct.deleteThread(tid);
    const closed = await live.subscription.closed;
    expect(closed.reason).toBe('error');
    expect(closed.error?.code).toBe('not_found');
    expect(live.store.getState().error?.code).toBe('not_found');
    live.close();
  });
});
