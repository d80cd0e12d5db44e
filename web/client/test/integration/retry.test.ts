// Writes whose outcome the client could not learn, against a real
// `tether serve`: the server does the request, but its answer is a 503
// unavailable (a store write that timed out and landed). The client's
// retry must neither act twice nor fail a write that was done.
import { describe, expect, it } from 'vitest';
import type { TetherError } from '../../src/errors.js';
import type { Run } from '../../src/types.js';
import { demo, setup, threadName, until } from './helpers.js';

const once = () => (n: number) => (n === 0 ? { kind: 'landed' as const } : { kind: 'pass' as const });
const is = (method: string, path: RegExp) => (m: string, u: string) => m === method && path.test(new URL(u).pathname);

async function logTypes(direct: ReturnType<typeof setup>['direct'], tid: string): Promise<string[]> {
  const res = await fetch(`${direct.options.baseUrl}/v1/threads/${encodeURIComponent(tid)}/events?after=-1`, { headers: { Accept: 'application/json' } });
  const body = (await res.json()) as { events: { type: string }[] };
  return body.events.map((e) => e.type);
}

describe('retries after a write whose answer was lost (real server)', () => {
  it('a thread without an id is made once', async () => {
    const { client, wire, direct } = setup();
    const tag = threadName('tag');
    wire.on(is('POST', /^\/v1\/threads$/), once());
    const th = await client.createThread({ metadata: { tag } });
    expect(th.id).toMatch(/^thr_[0-9a-z]{26}$/);
    const page = await direct.listThreads({ limit: 1000 });
    expect(page.threads.filter((t) => t.metadata.tag === tag).map((t) => t.id)).toEqual([th.id]);
  });

  it('a run created without a key is created once', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('run-once');
    await direct.createThread({ id: tid });
    wire.on(is('POST', /\/runs$/), once());
    const run = await client.createRun(tid, demo(3, 0, { ask: true }));
    expect((await direct.getThread(tid)).runs.map((r) => r.id)).toEqual([run.id]);
    wire.on(is('POST', /\/cancel$/), once());
    expect((await client.cancelRun(run.id)).id).toBe(run.id);
    expect((await logTypes(direct, tid)).filter((t) => t === 'run.cancel_requested').length).toBeLessThanOrEqual(1);
  });

  it('an answer that was taken is not a failure, and is taken once', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('input');
    await direct.createThread({ id: tid });
    const run = await direct.createRun(tid, demo(3, 0, { ask: true, tool: false, reasoning: false }));
    let waiting: Run | undefined;
    await until(async () => {
      const r = (await direct.getRun(run.id)).run;
      if (r.status === 'waiting') waiting = r;
      return waiting !== undefined;
    }, 15_000, 'the run waiting');
    wire.on(is('POST', /\/input$/), once());
    const got = await client.submitInput(run.id, waiting!.request!.id, 'streams');
    expect(got.id).toBe(run.id);
    expect((await logTypes(direct, tid)).filter((t) => t === 'run.input')).toHaveLength(1);
    const err = (await client.submitInput(run.id, waiting!.request!.id, 'other').catch((e: unknown) => e)) as TetherError;
    expect(err).toMatchObject({ name: 'TetherError', code: 'conflict' });
  });

  it('a delete that was done is not a failure', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('delete');
    await direct.createThread({ id: tid });
    wire.on(is('DELETE', /^\/v1\/threads\//), once());
    await client.deleteThread(tid);
    const gone = (await direct.getThread(tid).catch((e: unknown) => e)) as TetherError;
    expect(gone).toMatchObject({ code: 'not_found' });
    const again = (await client.deleteThread(tid).catch((e: unknown) => e)) as TetherError;
    expect(again).toMatchObject({ code: 'not_found' });
  });
});
