// The REST helpers and the reading of streams when the network breaks
// answers up, against a real `tether serve`.
import { describe, expect, it } from 'vitest';
import type { TetherError } from '../../src/errors.js';
import { setup, threadName } from './helpers.js';

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

});
