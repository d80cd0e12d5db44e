// The server's `end` frames (protocol §5) against a real `tether serve`: a
// subscription closes on them and never hands them on as events.
import { describe, expect, it } from 'vitest';
import type { TetherEvent } from '../../src/types.js';
import { demo, setup, threadName, until } from './helpers.js';

describe('end frames (real server)', () => {
  it('a run subscription resumed after its run.finished closes as done, with no event', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('end-run');
    await direct.createThread({ id: tid });
    const run = await direct.createRun(tid, demo(3, 1));
    await until(async () => (await direct.getRun(run.id)).run.status === 'done', 10_000, 'run');
    const last = (await direct.getThread(tid)).offset; // the run.finished of its only run
    const events: TetherEvent[] = [];
    let first!: (v: unknown) => void;
    const event = new Promise((r) => (first = r));
    const sub = client.subscribe({ runId: run.id }, { after: last, onEvent: (e) => (events.push(e), first('an event')) });
    const closed = await Promise.race([sub.closed, event]);
    sub.close();
    expect(closed).toEqual({ reason: 'done' });
    expect(events).toEqual([]);
    expect(wire.log.filter((l) => l.startsWith('GET') && l.includes('/events')).length).toBe(1);
  });

  it('a thread subscription whose thread is deleted closes with not_found, with no event', async () => {
    const { client, direct } = setup();
    const tid = threadName('end-deleted');
    await direct.createThread({ id: tid });
    const events: TetherEvent[] = [];
    let first!: (v: unknown) => void;
    const event = new Promise((r) => (first = r));
    let opened = false;
    const sub = client.subscribe(
      { threadId: tid },
      { after: 'now', onEvent: (e) => (events.push(e), first('an event')), onConnected: () => (opened = true) },
    );
    await until(() => opened, 5000, 'connected');
    await direct.deleteThread(tid);
    const closed = await Promise.race([sub.closed, event]);
    sub.close();
    expect(events).toEqual([]);
    expect(closed).toMatchObject({ reason: 'error', error: { code: 'not_found' } });
  });
});
