import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { applyPatch, parsePatch, PatchConflict } from '../src/jsonpatch.js';
import { Reducer } from '../src/reducer.js';
import type { JSONValue, TetherEvent } from '../src/types.js';

// The server's vectors of state.delta (runs/testdata/jsonpatch), read from
// the repository so that both reducers are held to the same file.
const file = join(import.meta.dirname, '../../../runs/testdata/jsonpatch/cases.json');
interface Case {
  name: string;
  doc?: JSONValue;
  patch: JSONValue;
  result?: JSONValue;
  error?: 'bad_request' | 'conflict';
}
const cases = (JSON.parse(readFileSync(file, 'utf8')) as { cases: Case[] }).cases;

const thread = { id: 't1', metadata: {}, created_at: '2025-01-01T00:00:00.000Z' };
let n = 0;
const ev = (e: Partial<TetherEvent> & { type: string }): TetherEvent =>
  ({ offset: `0000000001_${String(++n).padStart(16, '0')}`, ts: '2025-01-01T00:00:01.000Z', run_id: 'r1', ...e }) as TetherEvent;

function reducerWith(doc: JSONValue | undefined): Reducer {
  const r = Reducer.empty(thread);
  const run = {
    id: 'r1', thread_id: 't1', agent: 'demo', input: { messages: [] }, status: 'pending', metadata: {},
    created_at: '', started_at: null, last_update_at: '', completed_at: null, attempt: 0, cancel_requested_at: null,
  };
  const evs = [ev({ type: 'run.created', run: run as never }), ev({ type: 'run.started', worker_id: 'w1' })];
  if (doc !== undefined) evs.push(ev({ type: 'state.snapshot', state: doc }));
  for (const e of evs) expect(r.apply(e)).toBeUndefined();
  return r;
}

describe('JSON Patch vectors (runs/testdata/jsonpatch)', () => {
  it('finds the vectors', () => expect(cases.length).toBeGreaterThanOrEqual(40));
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const r = reducerWith(c.doc);
    const before = JSON.stringify(r.snapshot());
    const rej = r.apply(ev({ type: 'state.delta', patch: c.patch }));
    if (c.error) {
      expect(rej?.code).toBe(c.error);
      expect(JSON.stringify(r.snapshot())).toBe(before);
      return;
    }
    expect(rej).toBeUndefined();
    expect(r.state).toStrictEqual(c.result ?? null);
    expect(r.snapshot().state).toStrictEqual(c.result ?? undefined);
  });
});

describe('applyPatch', () => {
  it('does not modify the document it is given', () => {
    const doc = { a: [1, { b: 2 }] };
    const keep = JSON.stringify(doc);
    const ops = parsePatch([{ op: 'add', path: '/a/1/c', value: 3 }, { op: 'remove', path: '/a/0' }]);
    expect(typeof ops).not.toBe('string');
    expect(applyPatch(doc, ops as never)).toStrictEqual({ a: [{ b: 2, c: 3 }] });
    expect(JSON.stringify(doc)).toBe(keep);
  });
  it('treats __proto__ as a member like any other', () => {
    const ops = parsePatch([{ op: 'add', path: '/__proto__', value: { polluted: true } }]) as never;
    const out = applyPatch({}, ops) as Record<string, unknown>;
    expect(Object.prototype.hasOwnProperty.call(out, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });
  it('throws PatchConflict when a patch does not apply', () => {
    expect(() => applyPatch({}, parsePatch([{ op: 'remove', path: '/x' }]) as never)).toThrow(PatchConflict);
  });
});
