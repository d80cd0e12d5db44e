import { expect, inject } from 'vitest';
import { TetherClient, type TetherClientOptions } from '../../src/client.js';
import type { ThreadStore } from '../../src/store.js';
import type { Snapshot } from '../../src/types.js';
import { Wire } from './wire.js';

export const url = () => inject('tetherUrl');

let n = 0;
/** A fresh thread id per test, so tests never see each other's state. */
export const threadName = (what: string) => `it-${what}-${process.pid}-${Date.now().toString(36)}-${n++}`;

/** A client whose fetch goes through a Wire, with short timings for tests. */
export function setup(opts: Partial<TetherClientOptions> = {}): { client: TetherClient; wire: Wire; direct: TetherClient } {
  const wire = new Wire();
  const client = new TetherClient({
    baseUrl: url(),
    fetch: wire.fetch,
    backoff: { initialMs: 50, maxMs: 400 },
    lifecycle: null,
    ...opts,
  });
  const direct = new TetherClient({ baseUrl: url(), lifecycle: null });
  return { client, wire, direct };
}

/** The demo agent's pace: metadata for a run of `tokens` words, `delay` ms apart. */
export const demo = (tokens: number, delayMs: number, extra: Record<string, unknown> = {}) => ({
  metadata: { demo: { tokens, delay_ms: delayMs, ...extra } },
  input: { messages: [{ role: 'user' as const, content: `say ${tokens} words` }] },
});

const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Checks that a store holds exactly the server's state of the thread (or of its run, for a run store). */
export async function expectSameAsServer(store: ThreadStore, direct: TetherClient): Promise<Snapshot> {
  const view = store.getState();
  const server = await direct.getThread(view.threadId!);
  const runId = view.runId;
  const want = runId
    ? { runs: server.runs.filter((r) => r.id === runId), messages: server.messages.filter((m) => m.run_id === runId) }
    : { runs: server.runs, messages: server.messages, thread: server.thread, offset: server.offset };
  const got = runId
    ? { runs: view.runs, messages: view.messages }
    : { runs: view.runs, messages: view.messages, thread: view.thread, offset: view.offset };
  expect(plain(got)).toStrictEqual(plain(want));
  return server;
}

/** Polls `f` until it returns true or the time is up. */
export async function until(f: () => boolean | Promise<boolean>, ms = 15_000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The server's count of open SSE streams (Prometheus gauge). */
export async function openStreams(): Promise<number> {
  const text = await (await fetch(`${url()}/metrics`)).text();
  const m = /^tether_sse_streams (\d+)/m.exec(text);
  return m ? Number(m[1]) : NaN;
}
