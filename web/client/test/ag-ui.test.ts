// TetherAgent with an injected fetch: the real @ag-ui/client pipeline
// (verifyEvents, the reducer) over streams the test writes, cut where it
// likes.
import { HttpAgent } from '@ag-ui/client';
import { describe, expect, it } from 'vitest';
import { TetherAgent } from '../src/ag-ui.js';
import type { Timers } from '../src/timing.js';
import type { TokenRequest } from '../src/token.js';
import { FakeFetch, errorResponse, type Pipe, settle } from './helpers/fake.js';
import { userToken } from './helpers/jwt.js';

/** Timers that fire at once (the backoff is not what these tests are about). */
const now: Timers = { setTimeout: (fn) => setTimeout(fn, 0), clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>), now: () => Date.now(), random: () => 0 };

let seq = 0;
/** An AG-UI frame as Tether writes it. */
function f(e: Record<string, unknown>, opts: { offset?: string; prelude?: boolean; last?: boolean } = {}): string {
  const offset = opts.offset ?? `0000000001_${String(++seq).padStart(16, '0')}`;
  const md = { ...(e.metadata as object), tether: { offset, run_id: 'run_1', ...(opts.prelude ? { prelude: true } : {}) } };
  return `${opts.last === false ? '' : `id: ${offset}\n`}data: ${JSON.stringify({ ...e, metadata: md })}\n\n`;
}

const started = (runId = 'r1') => f({ type: 'RUN_STARTED', threadId: 't1', runId });
const text = (delta: string) => f({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta });
const finished = () => f({ type: 'RUN_FINISHED', threadId: 't1', runId: 'r1', outcome: { type: 'success' } });

/** A join of run r1 at offset `at` while m1 holds "Hel": the prelude, the rest of the text ("lo"), the run's end. */
const joinHelLo = (at: string) =>
  f({ type: 'RUN_STARTED', threadId: 't1', runId: 'r1' }, { offset: at, prelude: true, last: false }) +
  f({ type: 'MESSAGES_SNAPSHOT', messages: [{ id: 'm1', role: 'assistant', content: 'Hel' }] }, { offset: at, prelude: true, last: false }) +
  f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { offset: at, prelude: true }) +
  text('lo') +
  f({ type: 'TEXT_MESSAGE_END', messageId: 'm1' }) +
  finished();

function agent(fetch: FakeFetch): TetherAgent {
  return new TetherAgent({ url: 'http://tether.test/v1/ag-ui/demo', threadId: 't1', fetch: fetch.fetch, timers: now });
}

async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 1));
  expect(cond()).toBe(true);
}

describe('TetherAgent', () => {
  it('is an HttpAgent that POSTs the run to its url and hands on the events without Tether metadata', async () => {
    const ff = new FakeFetch();
    const pipe = ff.expectSSE();
    const a = agent(ff);
    expect(a).toBeInstanceOf(HttpAgent);
    expect(a.baseUrl).toBe('http://tether.test/v1/ag-ui');
    const seen: unknown[] = [];
    const done = a.runAgent({ runId: 'r1' }, { onEvent: ({ event }) => void seen.push(event) });
    const p = await pipe;
    p.push(':ok\n\n' + started() + f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { last: false }) + text('Hel') + text('lo'));
    p.push(f({ type: 'TEXT_MESSAGE_END', messageId: 'm1' }) + finished());
    p.end();
    const res = await done;
    expect(ff.requests[0]!.method).toBe('POST');
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/ag-ui/demo');
    expect(JSON.parse(ff.requests[0]!.body!).runId).toBe('r1');
    expect(res.newMessages).toEqual([{ id: 'm1', role: 'assistant', content: 'Hello' }]);
    expect(seen.every((e) => !(e as { metadata?: unknown }).metadata)).toBe(true);
    expect(a.tetherRunId).toBe('run_1');
    expect(a.lastOffset).toMatch(/^0000000001_/);
  });

  it('joins the run again after a drop: the prelude reconciles, the text comes once', async () => {
    const ff = new FakeFetch();
    const post = ff.expectSSE();
    const a = agent(ff);
    const done = a.runAgent({ runId: 'r1' });
    const p = await post;
    p.push(started() + f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { last: false }) + text('Hel'));
    await settle();
    const join = ff.expectSSE();
    p.fail(new TypeError('terminated'));
    const j = await join;
    expect(ff.requests[1]!.method).toBe('GET');
    expect(ff.requests[1]!.url).toBe('http://tether.test/v1/ag-ui/threads/t1/runs/run_1/events');
    const at = '0000000001_0000000000000999';
    j.push(
      f({ type: 'RUN_STARTED', threadId: 't1', runId: 'r1' }, { offset: at, prelude: true, last: false }) +
        f({ type: 'MESSAGES_SNAPSHOT', messages: [{ id: 'u1', role: 'user', content: 'hi' }, { id: 'm1', role: 'assistant', content: 'Hello, w' }] }, { offset: at, prelude: true, last: false }) +
        f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { offset: at, prelude: true }) +
        text('orld') +
        f({ type: 'TEXT_MESSAGE_END', messageId: 'm1' }) +
        finished(),
    );
    j.end();
    await done;
    // The snapshot updates m1 in place and adds u1.
    expect(a.messages).toEqual([
      { id: 'm1', role: 'assistant', content: 'Hello, world' },
      { id: 'u1', role: 'user', content: 'hi' },
    ]);
  });

  it('ends what the prelude does not reopen (a tool call that ended during the drop)', async () => {
    const ff = new FakeFetch();
    const post = ff.expectSSE();
    const a = agent(ff);
    const types: string[] = [];
    const done = a.runAgent({ runId: 'r1' }, { onEvent: ({ event }) => void types.push(event.type) });
    const p = await post;
    p.push(started() + f({ type: 'TOOL_CALL_START', toolCallId: 'c1', toolCallName: 'search', parentMessageId: 'm1' }) + f({ type: 'TOOL_CALL_ARGS', toolCallId: 'c1', delta: '{"q":' }));
    await settle();
    const join = ff.expectSSE();
    p.fail(new TypeError('terminated'));
    const j = await join;
    const at = '0000000001_0000000000000998';
    j.push(
      f({ type: 'RUN_STARTED', threadId: 't1', runId: 'r1' }, { offset: at, prelude: true, last: false }) +
        f({ type: 'MESSAGES_SNAPSHOT', messages: [{ id: 'm1', role: 'assistant', content: 'Done', toolCalls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":1}' } }] }] }, { offset: at, prelude: true, last: false }) +
        f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { offset: at, prelude: true }) +
        text('!') +
        f({ type: 'TEXT_MESSAGE_END', messageId: 'm1' }) +
        finished(),
    );
    j.end();
    await done;
    expect(types.slice(3)).toEqual(['MESSAGES_SNAPSHOT', 'TEXT_MESSAGE_START', 'TOOL_CALL_END', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
    expect(a.messages.at(-1)).toMatchObject({ id: 'm1', content: 'Done!' });
  });

  it('sends a run again when it fails before any event (the runId makes it idempotent)', async () => {
    const ff = new FakeFetch();
    ff.next(() => new TypeError('fetch failed'));
    const post = ff.expectSSE();
    const a = agent(ff);
    const done = a.runAgent({ runId: 'r1' });
    const p = await post;
    p.push(started() + finished());
    p.end();
    await done;
    expect(ff.requests.map((r) => `${r.method} ${JSON.parse(r.body ?? '{}').runId}`)).toEqual(['POST r1', 'POST r1']);
  });

  it('does not retry a 4xx, and stops when aborted', async () => {
    const ff = new FakeFetch();
    ff.next(() => new Response('{"error":{"code":"run_active","message":"busy"}}', { status: 409, headers: { 'Content-Type': 'application/json' } }));
    await expect(agent(ff).runAgent({ runId: 'r1' })).rejects.toThrow(/409/);
    expect(ff.requests).toHaveLength(1);

    const ff2 = new FakeFetch();
    const post = ff2.expectSSE();
    const a = agent(ff2);
    const done = a.runAgent({ runId: 'r1' });
    (await post).push(started());
    await settle();
    a.abortRun();
    await done;
    await settle();
    expect(ff2.requests).toHaveLength(1);
  });

  it('connectAgent joins the thread\'s current run, and ends with it', async () => {
    const ff = new FakeFetch();
    const join = ff.expectSSE();
    const a = agent(ff);
    const done = a.connectAgent();
    const j = await join;
    expect(ff.requests[0]!.url).toBe('http://tether.test/v1/ag-ui/threads/t1/runs/current/events');
    const at = '0000000001_0000000000000500';
    j.push(joinHelLo(at));
    await done; // the stream is still open: the agent ends at RUN_FINISHED
    expect(a.messages).toEqual([{ id: 'm1', role: 'assistant', content: 'Hello' }]);
    await waitFor(() => (j as Pipe).cancelled || (j as Pipe).closed);
  });

  it('connectAgent on a thread without runs gives nothing', async () => {
    const ff = new FakeFetch();
    ff.next(() => new Response(null, { status: 204 }));
    const a = agent(ff);
    const res = await a.connectAgent();
    expect(res.newMessages).toEqual([]);
    expect(ff.requests).toHaveLength(1);
  });

  describe('tokens', () => {
    function minting(clock: () => number, lifeMs: number) {
      const calls: TokenRequest[] = [];
      const issued: string[] = [];
      const token = async (r: TokenRequest) => {
        calls.push(r);
        issued.push(userToken('alice', clock() + lifeMs, { n: issued.length }));
        return issued[issued.length - 1];
      };
      return { calls, issued, token };
    }

    it('sends a run refused with 401 token_expired once more with a new token', async () => {
      const tk = minting(Date.now, 3_600_000);
      const ff = new FakeFetch();
      ff.next(() => errorResponse(401, 'token_expired'));
      const post = ff.expectSSE();
      const a = new TetherAgent({ url: 'http://tether.test/v1/ag-ui/demo', threadId: 't1', fetch: ff.fetch, timers: now, token: tk.token });
      const done = a.runAgent({ runId: 'r1' });
      const p = await post;
      p.push(started() + finished());
      p.end();
      await done;
      expect(tk.calls).toEqual([{ reason: 'initial' }, { reason: 'expired', previous: tk.issued[0] }]);
      expect(ff.requests.map((r) => r.headers.get('authorization'))).toEqual([`Bearer ${tk.issued[0]}`, `Bearer ${tk.issued[1]}`]);
      expect(ff.requests[1]!.body).toBe(ff.requests[0]!.body);
    });

    it('joins again with a new token after a cut near the token\'s exp: the text once', async () => {
      let t = Date.parse('2026-01-01T00:00:00Z');
      const timers: Timers = { ...now, now: () => t };
      const tk = minting(() => t, 60_000);
      const ff = new FakeFetch();
      const post = ff.expectSSE();
      const a = new TetherAgent({ url: 'http://tether.test/v1/ag-ui/demo', threadId: 't1', fetch: ff.fetch, timers, token: tk.token });
      const done = a.runAgent({ runId: 'r1' });
      const p = await post;
      p.push(started() + f({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' }, { last: false }) + text('Hel'));
      await settle();
      t += 60_000; // the server resets the stream at the token's exp
      const join = ff.expectSSE();
      p.fail(new TypeError('terminated'));
      const j = await join;
      const at = '0000000001_0000000000000997';
      j.push(joinHelLo(at));
      j.end();
      await done;
      expect(tk.calls.map((c) => c.reason)).toEqual(['initial', 'expiring']);
      expect(ff.requests[1]!.headers.get('authorization')).toBe(`Bearer ${tk.issued[1]}`);
      expect(a.messages).toEqual([{ id: 'm1', role: 'assistant', content: 'Hello' }]);
    });

    it('a token function that throws is retried with the backoff, then fails the run with it', async () => {
      const ff = new FakeFetch();
      let calls = 0;
      const delays: number[] = [];
      const timers: Timers = { ...now, setTimeout: (fn, ms) => (delays.push(ms), setTimeout(fn, 0)) };
      const a = new TetherAgent({
        url: 'http://tether.test/v1/ag-ui/demo',
        threadId: 't1',
        fetch: ff.fetch,
        timers,
        maxAttempts: 3,
        token: () => {
          calls++;
          throw new Error('signed out');
        },
      });
      const err = await a.runAgent({ runId: 'r1' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'token_unavailable', message: 'the token function failed: signed out' });
      expect(calls).toBe(4); // the first try and maxAttempts retries
      expect(delays).toEqual([250, 500, 1000]);
      expect(ff.requests).toHaveLength(0);
    });
  });
});
