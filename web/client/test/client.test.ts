import { describe, expect, it } from 'vitest';
import { TetherClient } from '../src/client.js';
import { TetherError } from '../src/errors.js';
import { FakeFetch, errorResponse, json } from './helpers/fake.js';

// Each call is sent once (restRetries: 0), so that its error is seen; the
// retries have tests of their own.
function setup(token?: string, restRetries = 0) {
  const ff = new FakeFetch();
  const client = new TetherClient({
    baseUrl: 'https://t.example/',
    fetch: ff.fetch,
    token,
    headers: { 'X-App': 'test' },
    lifecycle: null,
    restRetries,
    backoff: { initialMs: 1, maxMs: 2 },
  });
  return { ff, client };
}

describe('REST helpers', () => {
  it('send the documented requests', async () => {
    const { ff, client } = setup('a-token-of-16-chars');
    ff.fallback = () => json({});
    await client.createThread({ id: 't1', metadata: { a: 1 } });
    await client.getThread('t 1');
    await client.listThreads({ status: 'busy', limit: 5, cursor: 'c' });
    await client.finalAnswer('t1', { runId: 'r1' });
    await client.createRun('t1', { agent: 'demo', multitask: 'enqueue' }, { idempotencyKey: 'k1' });
    await client.getRun('r1');
    await client.cancelRun('r1');
    await client.submitInput('r1', 'q1', { ok: true });
    ff.fallback = () => new Response(null, { status: 204 });
    await client.deleteThread('t1');
    expect(ff.requests.map((r) => `${r.method} ${r.url} ${r.body ?? ''}`)).toEqual([
      'POST https://t.example/v1/threads {"id":"t1","metadata":{"a":1}}',
      'GET https://t.example/v1/threads/t%201 ',
      'GET https://t.example/v1/threads?status=busy&limit=5&cursor=c ',
      'GET https://t.example/v1/threads/t1/final-answer?run_id=r1 ',
      'POST https://t.example/v1/threads/t1/runs {"agent":"demo","multitask":"enqueue"}',
      'GET https://t.example/v1/runs/r1 ',
      'POST https://t.example/v1/runs/r1/cancel {}',
      'POST https://t.example/v1/runs/r1/input {"request_id":"q1","value":{"ok":true}}',
      'DELETE https://t.example/v1/threads/t1 ',
    ]);
    for (const r of ff.requests) {
      expect(r.headers.get('authorization')).toBe('Bearer a-token-of-16-chars');
      expect(r.headers.get('x-app')).toBe('test');
    }
    expect(ff.requests[0]!.headers.get('content-type')).toBe('application/json');
    expect(ff.requests[4]!.headers.get('idempotency-key')).toBe('k1');
  });

  it('turn the error body into a TetherError', async () => {
    const { ff, client } = setup();
    ff.next(() => {
      const r = errorResponse(409, 'run_active', 'thread t1 has an active run');
      r.headers.set('X-Request-Id', 'req-1');
      return r;
    });
    const err = (await client.createRun('t1').catch((e: unknown) => e)) as TetherError;
    expect(err).toBeInstanceOf(TetherError);
    expect(err).toMatchObject({ code: 'run_active', status: 409, message: 'thread t1 has an active run', requestId: 'req-1', retryable: false });
  });

  it('cope with a proxy error page, a network error and an abort', async () => {
    const { ff, client } = setup();
    ff.next(() => new Response('<html>Bad Gateway</html>', { status: 502 }));
    expect(await client.getThread('t1').catch((e: unknown) => e)).toMatchObject({ code: 'internal', status: 502, retryable: true });
    ff.next(() => new TypeError('fetch failed'));
    expect(await client.getThread('t1').catch((e: unknown) => e)).toMatchObject({ code: 'network', status: 0, retryable: true });
    const ac = new AbortController();
    ac.abort();
    expect(await client.getThread('t1', { signal: ac.signal }).catch((e: unknown) => e)).toMatchObject({ code: 'aborted', retryable: false });
    ff.next(() => new Response('not json', { status: 200 }));
    expect(await client.getThread('t1').catch((e: unknown) => e)).toMatchObject({ code: 'protocol' });
  });

  it('give an error answer without an error body the code its status means, protocol for a 4xx without one', async () => {
    // docs/protocol.md §1: the Go and Python clients read such answers the same way.
    const { ff, client } = setup();
    for (const [status, code] of [
      [405, 'protocol'],
      [418, 'protocol'],
      [422, 'protocol'],
      [404, 'not_found'],
      [413, 'too_large'],
      [400, 'bad_request'],
    ] as const) {
      ff.next(() => new Response('<html>db01.internal</html>', { status, headers: { 'content-type': 'text/html' } }));
      const err = (await client.getThread('t1').catch((e: unknown) => e)) as TetherError;
      expect(err, `${status}`).toMatchObject({ code, status, retryable: false });
      expect(err.message).not.toContain('db01');
    }
  });

  it("keep an error answer's Retry-After on the error", async () => {
    const { ff, client } = setup();
    for (const [status, code, header, want] of [
      [429, 'rate_limited', '12', 12_000],
      [503, 'unavailable', '3', 3_000],
      [429, 'rate_limited', 'Wed, 21 Oct 2015 07:28:00 GMT', undefined],
      [404, 'not_found', null, undefined],
    ] as const) {
      ff.next(() => {
        const r = errorResponse(status, code);
        if (header !== null) r.headers.set('retry-after', header);
        return r;
      });
      const err = (await client.createRun('t1').catch((e: unknown) => e)) as TetherError;
      expect(err, `${status} ${header}`).toMatchObject({ code, status, retryAfterMs: want });
    }
  });

  it('retry a write after a failure that may hide it, with the same request: a thread the client names, a run with one key', async () => {
    const { ff, client } = setup(undefined, 4);
    ff.next(() => errorResponse(503, 'unavailable'));
    ff.next(() => new TypeError('fetch failed'));
    ff.next(() => json({ id: 'x' }, 201));
    await client.createThread({ metadata: { a: 1 } });
    ff.next(() => errorResponse(502, 'internal'));
    ff.next(() => json({ id: 'r1' }, 201));
    await client.createRun('t1', {});
    const [t0, t1, t2, r0, r1] = ff.requests;
    expect(t0!.body).toMatch(/^\{"metadata":\{"a":1\},"id":"thr_[0-9a-z]{26}"\}$/);
    expect([t1!.body, t2!.body]).toEqual([t0!.body, t0!.body]);
    expect(r0!.headers.get('idempotency-key')).toBeTruthy();
    expect(r1!.headers.get('idempotency-key')).toBe(r0!.headers.get('idempotency-key'));
    // Five 503s: the first try and four retries, then the error.
    for (let i = 0; i < 5; i++) ff.next(() => errorResponse(503, 'unavailable'));
    expect(await client.cancelRun('r1').catch((e: unknown) => e)).toMatchObject({ code: 'unavailable' });
    expect(ff.requests).toHaveLength(10);
    // A read is sent once: its caller polls.
    ff.next(() => errorResponse(503, 'unavailable'));
    expect(await client.getRun('r1').catch((e: unknown) => e)).toMatchObject({ code: 'unavailable', retryable: true });
    expect(ff.requests).toHaveLength(11);
    // An answer a repeat cannot change: at once.
    ff.next(() => errorResponse(409, 'conflict'));
    expect(await client.submitInput('r1', 'q1', 1).catch((e: unknown) => e)).toMatchObject({ code: 'conflict' });
    expect(ff.requests).toHaveLength(12);
  });

  it('resolve a delete retried after a failure that may hide it, when the retry finds nothing', async () => {
    const { ff, client } = setup(undefined, 4);
    ff.next(() => errorResponse(503, 'unavailable'));
    ff.next(() => errorResponse(404, 'not_found'));
    await client.deleteThread('t1');
    ff.next(() => errorResponse(429, 'rate_limited'));
    expect(await client.deleteThread('t1').catch((e: unknown) => e)).toMatchObject({ code: 'rate_limited' }); // a 429 did nothing: for the caller
    ff.next(() => errorResponse(404, 'not_found'));
    expect(await client.deleteThread('t1').catch((e: unknown) => e)).toMatchObject({ code: 'not_found' });
  });

  it('refuse a subscription to nothing', () => {
    const { client } = setup();
    expect(() => client.subscribe({} as never)).toThrow(TypeError);
  });

  it('ask the token function at each request', async () => {
    const ff = new FakeFetch();
    let n = 0;
    const client = new TetherClient({ baseUrl: '', fetch: ff.fetch, token: async () => `token-${++n}`, lifecycle: null });
    ff.fallback = () => json({});
    await client.getRun('r1');
    await client.getRun('r1');
    expect(ff.requests.map((r) => [r.url, r.headers.get('authorization')])).toEqual([
      ['/v1/runs/r1', 'Bearer token-1'],
      ['/v1/runs/r1', 'Bearer token-2'],
    ]);
  });
});
