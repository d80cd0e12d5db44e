// The REST helpers and the reading of streams when the network breaks
// answers up, against a real `tether serve`.
import { describe, expect, it } from 'vitest';
import type { TetherError } from '../../src/errors.js';
import type { TetherEvent } from '../../src/types.js';
import { demo, setup, threadName } from './helpers.js';

const isGet = (path: string) => (method: string, url: string) => method === 'GET' && new URL(url).pathname === path;

describe('REST answers and streams on a broken network (real server)', () => {
  it('a 2xx answer cut short is a network error that can be retried, not a protocol error', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('cut-rest');
    await direct.createThread({ id: tid, metadata: { title: 'a title long enough to be cut' } });
    wire.on(isGet(`/v1/threads/${tid}`), (n) => (n === 0 ? { kind: 'cut', after: 20 } : { kind: 'pass' }));
    const err = (await client.getThread(tid).catch((e: unknown) => e)) as TetherError;
    expect(err).toMatchObject({ name: 'TetherError', code: 'network', retryable: true });
    expect((await client.getThread(tid)).thread.id).toBe(tid); // the retry the error allows
  });

  it('a character cut across reads arrives whole', async () => {
    const { client, wire, direct } = setup();
    const tid = threadName('utf8');
    await direct.createThread({ id: tid });
    const answer = 'é 中文 😀👍🏽';
    const live = direct.startRun(tid, demo(3, 0, { ask: true }));
    await new Promise<void>((ok) => {
      const off = live.store.subscribe(() => {
        if (live.store.getState().runs.some((r) => r.status === 'waiting')) {
          off();
          ok();
        }
      });
    });
    await live.submitInput(answer);
    const run = await live.finished;
    live.close();
    expect(run?.status).toBe('done');

    // Read the run's log again with every byte in a read of its own.
    wire.on((m, u) => m === 'GET' && u.includes('/events'), () => ({ kind: 'rechunk', sizes: [1] }));
    const deltas: string[] = [];
    const sub = client.subscribe({ runId: run!.id }, { after: '-1', onEvent: (e: TetherEvent) => void (e.type === 'text.delta' && deltas.push(e.delta ?? '')) });
    expect((await sub.closed).reason).toBe('done');
    expect(deltas.join('')).toContain(`“${answer}”`);
    expect(deltas.join('')).not.toContain('\uFFFD');
  });
});
