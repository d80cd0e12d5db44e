import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Reducer, reduce } from '../src/reducer.js';
import type { Snapshot, TetherEvent } from '../src/types.js';
import { mergePatch } from '../src/mergepatch.js';

// The Go reducer's golden vectors, read from the repository (not copied), so
// that both reducers are held to the same files.
const testdata = join(import.meta.dirname, '../../../runs/testdata');

interface ReduceVector {
  name: string;
  thread: { id: string; metadata: Record<string, never>; created_at: string };
  events: TetherEvent[];
  snapshot: Snapshot;
}

interface MachineVector {
  name: string;
  thread: ReduceVector['thread'];
  events: TetherEvent[];
  error_index: number;
  code: 'bad_request' | 'conflict';
}

function vectors<T>(dir: string): [string, T][] {
  const files = readdirSync(join(testdata, dir)).filter((f) => f.endsWith('.json')).sort();
  return files.map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(join(testdata, dir, f), 'utf8')) as T]);
}

const plain = (v: unknown) => JSON.parse(JSON.stringify(v));

describe('reduce vectors (runs/testdata/reduce)', () => {
  const all = vectors<ReduceVector>('reduce');
  it('finds the vectors', () => expect(all.length).toBeGreaterThanOrEqual(8));
  it.each(all)('%s', (_name, v) => {
    expect(plain(reduce(v.thread, v.events))).toStrictEqual(v.snapshot);
  });
  it.each(all)('%s: resumed from every intermediate snapshot', (_name, v) => {
    // A client that joins late gets a snapshot, then the later events: it
    // must end in the same state as one that saw every event.
    for (let k = 0; k <= v.events.length; k++) {
      const head = Reducer.empty(v.thread);
      for (const e of v.events.slice(0, k)) expect(head.apply(e)).toBeUndefined();
      const tail = Reducer.fromSnapshot(plain(head.snapshot()));
      for (const e of v.events.slice(k)) expect(tail.apply(e)).toBeUndefined();
      expect(plain(tail.snapshot())).toStrictEqual(v.snapshot);
    }
  });
});

describe('machine vectors (runs/testdata/machine)', () => {
  const all = vectors<MachineVector>('machine');
  it('finds the vectors', () => expect(all.length).toBeGreaterThanOrEqual(10));
  it.each(all)('%s', (_name, v) => {
    const r = Reducer.empty(v.thread);
    v.events.slice(0, v.error_index).forEach((e, i) => expect(r.apply(e), `event ${i}`).toBeUndefined());
    const before = plain(r.snapshot());
    const rej = r.apply(v.events[v.error_index]!);
    expect(rej?.code).toBe(v.code);
    expect(plain(r.snapshot())).toStrictEqual(before); // a refused event changes nothing
  });
});

describe('Reducer', () => {
  it('refuses events at or before its offset', () => {
    const v = vectors<ReduceVector>('reduce')[0]![1];
    const r = Reducer.empty(v.thread);
    expect(r.apply(v.events[0]!)).toBeUndefined();
    expect(r.apply(v.events[0]!)?.code).toBe('conflict');
    expect(r.apply({ ...v.events[1]!, offset: '-1' })?.code).toBe('bad_request');
  });

  it('computes the final answer like the server', () => {
    const v = vectors<ReduceVector>('reduce').find(([n]) => n.startsWith('01'))![1];
    const r = Reducer.empty(v.thread);
    for (const e of v.events) r.apply(e);
    expect(r.finalAnswer()).toMatchObject({ content: 'Hello world', complete: true, status: 'done', message_id: 'm1' });
    expect(r.finalAnswer('nope')).toBeUndefined();
  });

  it('shares unchanged objects between snapshots', () => {
    const v = vectors<ReduceVector>('reduce').find(([n]) => n.startsWith('05'))![1];
    const r = Reducer.empty(v.thread);
    v.events.slice(0, 9).forEach((e) => r.apply(e));
    const a = r.snapshot();
    expect(r.snapshot()).toBe(a);
    r.apply(v.events[9]!); // message.finished m2
    const b = r.snapshot();
    expect(b.messages[0]).toBe(a.messages[0]);
    expect(b.messages[1]).not.toBe(a.messages[1]);
  });
});

describe('mergePatch', () => {
  it('follows RFC 7396', () => {
    expect(mergePatch({ a: 'b' }, { a: 'c' })).toEqual({ a: 'c' });
    expect(mergePatch({ a: 'b' }, { b: 'c' })).toEqual({ a: 'b', b: 'c' });
    expect(mergePatch({ a: 'b' }, { a: null })).toEqual({});
    expect(mergePatch({ a: ['b'] }, { a: 'c' })).toEqual({ a: 'c' });
    expect(mergePatch({ a: { b: 'c' } }, { a: { b: 'd', c: null } })).toEqual({ a: { b: 'd' } });
    expect(mergePatch(['a'], { a: 'b' })).toEqual({ a: 'b' });
    expect(mergePatch({ a: 'foo' }, null)).toEqual(null);
    expect(mergePatch({}, { a: { bb: { ccc: null } } })).toEqual({ a: { bb: {} } });
  });
});

describe('thread fields the reducer does not derive', () => {
  it('keeps the owner of a snapshot\'s thread (a thread made with a user\'s token) through later events', () => {
    const v = vectors<ReduceVector>('reduce').find(([n]) => n.startsWith('01'))![1];
    const start = reduce(v.thread, []);
    const r = Reducer.fromSnapshot({ ...start, thread: { ...start.thread, owner: 'alice' } });
    for (const e of v.events) expect(r.apply(e)).toBeUndefined();
    expect(r.snapshot().thread.owner).toBe('alice');
    expect(reduce(v.thread, v.events).thread).not.toHaveProperty('owner'); // none without one
  });
});
