import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Snapshot, TetherEvent } from '../../src/types.js';

/** The Go reducer's golden vectors, read in place from runs/testdata (never copied). */
export const testdata = join(import.meta.dirname, '../../../../runs/testdata');

export interface ReduceVector {
  name: string;
  thread: { id: string; metadata: Record<string, never>; created_at: string };
  events: TetherEvent[];
  snapshot: Snapshot;
}

export function reduceVector(prefix: string): ReduceVector {
  const dir = join(testdata, 'reduce');
  const f = readdirSync(dir).find((n) => n.startsWith(prefix));
  if (!f) throw new Error(`no vector ${prefix}`);
  return JSON.parse(readFileSync(join(dir, f), 'utf8')) as ReduceVector;
}

/** The snapshot of a vector's thread before any event. */
export function emptySnapshot(v: ReduceVector): Snapshot {
  return {
    thread: { ...v.thread, status: 'idle', updated_at: v.thread.created_at, last_offset: '-1', active_run_id: null },
    runs: [],
    messages: [],
    offset: '-1',
  };
}
