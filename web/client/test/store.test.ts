import { describe, expect, it, vi } from 'vitest';
import { ThreadStore } from '../src/store.js';
import type { TetherEvent } from '../src/types.js';
import { settle } from './helpers/fake.js';
import { emptySnapshot, reduceVector } from './helpers/vectors.js';

const v1 = reduceVector('01'); // one run r1, done
const v10 = reduceVector('10'); // runs r1, r2 (cancelled while pending), r3

const plain = (x: unknown) => JSON.parse(JSON.stringify(x));

describe('ThreadStore', () => {
  it('applies each event once, by offset', () => {
    const s = new ThreadStore({ threadId: 't1' });
    s.applySnapshot(emptySnapshot(v1));
    expect(v1.events.map((e) => s.applyEvent(e))).toEqual(v1.events.map(() => 'applied'));
    expect(v1.events.map((e) => s.applyEvent(e))).toEqual(v1.events.map(() => 'duplicate'));
    const st = s.getState();
    expect(plain({ thread: st.thread, runs: st.runs, messages: st.messages, offset: st.offset })).toStrictEqual(v1.snapshot);
  });

  it('starts from events alone when it knows the thread (POST /runs/stream has no snapshot)', () => {
    const s = new ThreadStore({ threadId: 't1' });
    for (const e of v1.events) expect(s.applyEvent(e)).toBe('applied');
    expect(s.getState().messages.map((m) => m.id)).toEqual(['m0', 'm1']);
    expect(new ThreadStore().applyEvent(v1.events[2]!)).toBe('rejected');
  });

  it('drops events after a terminal event of their run', () => {
    const s = new ThreadStore({ threadId: 't1' });
    v1.events.forEach((e) => s.applyEvent(e));
    const late: TetherEvent = { ...v1.events[4]!, offset: '0000000001_0000000000000099' };
    const before = s.getState();
    expect(s.applyEvent(late)).toBe('stale');
    expect(s.getState()).toBe(before);
  });

  it('a run store keeps only its run: events of a superseded run are dropped', () => {
    const s = new ThreadStore({ threadId: 't1', runId: 'r3' });
    s.applySnapshot(emptySnapshot(v10));
    const results = v10.events.map((e) => [e.run_id, s.applyEvent(e)]);
    expect(results.filter(([r]) => r !== 'r3').every(([, x]) => x === 'superseded')).toBe(true);
    expect(s.getState().runs.map((r) => r.id)).toEqual(['r3']);
    expect(s.getState().messages.map((m) => m.id)).toEqual(['m2']);
    expect(s.getState().messages[0]!.parts).toEqual([{ type: 'text', text: 'resumed' }]);
  });

  it('cuts a thread snapshot down to its run', () => {
    const s = new ThreadStore({ runId: 'r1' });
    expect(s.applySnapshot(v10.snapshot)).toBe(true);
    expect(s.getState().runs.map((r) => r.id)).toEqual(['r1']);
    expect(s.getState().messages.map((m) => m.id)).toEqual(['m1']);
    expect(s.getState().threadId).toBe('t1');
  });

  it('a reset snapshot replaces the state, also backwards; an older snapshot is ignored', () => {
    const s = new ThreadStore();
    s.applySnapshot(v1.snapshot);
    const old = { ...emptySnapshot(v1), offset: v1.events[2]!.offset };
    expect(s.applySnapshot(old)).toBe(false);
    expect(s.getState().messages).toHaveLength(2);
    expect(s.applySnapshot({ ...old, reset: true })).toBe(true);
    expect(s.getState()).toMatchObject({ messages: [], resets: 1, offset: v1.events[2]!.offset });
    expect(s.applySnapshot(old, { force: true })).toBe(true);
  });

  it('flags what a recovery snapshot changed, and only that', () => {
    const s = new ThreadStore({ threadId: 't1' });
    v1.events.slice(0, 6).forEach((e) => s.applyEvent(e)); // m1 says "Hello"
    expect(s.getState().messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello' }]);
    s.applySnapshot(v1.snapshot, { recovered: true });
    const st = s.getState();
    expect(st.messages[1]!.parts).toEqual([{ type: 'text', text: 'Hello world' }]); // replaced, not appended
    expect([...st.recoveredMessages]).toEqual(['m1']);
    expect([...st.recoveredRuns]).toEqual(['r1']);
  });

  it('skips event types it does not know, and asks for a resync on an impossible event', () => {
    const s = new ThreadStore({ threadId: 't1' });
    v1.events.slice(0, 4).forEach((e) => s.applyEvent(e));
    expect(s.applyEvent({ ...v1.events[4]!, type: 'message.reacted' })).toBe('skipped');
    expect(s.getState().needsResync).toBe(false);
    expect(s.applyEvent({ ...v1.events[4]!, message_id: 'unknown' })).toBe('rejected');
    expect(s.getState().needsResync).toBe(true);
    s.applySnapshot(v1.snapshot, { force: true });
    expect(s.getState().needsResync).toBe(false);
  });

  it('tells listeners once per batch, and keeps unchanged objects', async () => {
    const s = new ThreadStore({ threadId: 't1' });
    const listener = vi.fn();
    s.subscribe(listener);
    v1.events.slice(0, 5).forEach((e) => s.applyEvent(e));
    expect(listener).not.toHaveBeenCalled();
    await settle(1);
    expect(listener).toHaveBeenCalledTimes(1);
    const a = s.getState();
    expect(s.getState()).toBe(a);
    s.applyEvent(v1.events[5]!); // text.delta on m1
    const b = s.getState();
    expect(b).not.toBe(a);
    expect(b.messages[0]).toBe(a.messages[0]); // m0 untouched
    expect(b.messages[1]).not.toBe(a.messages[1]);
    s.flush();
    expect(listener).toHaveBeenCalledTimes(2);
  });

  it('passes every event offered to event listeners with its result', () => {
    const s = new ThreadStore({ threadId: 't1' });
    const seen: string[] = [];
    const off = s.onEvent((e, r) => seen.push(`${e.type}:${r}`));
    s.applyEvent(v1.events[0]!);
    s.applyEvent(v1.events[0]!);
    off();
    s.applyEvent(v1.events[1]!);
    expect(seen).toEqual(['run.created:applied', 'run.created:duplicate']);
  });

  it('computes the final answer locally', () => {
    const s = new ThreadStore({ threadId: 't1' });
    v1.events.forEach((e) => s.applyEvent(e));
    expect(s.finalAnswer()).toMatchObject({ content: 'Hello world', complete: true, run_id: 'r1' });
  });
});
