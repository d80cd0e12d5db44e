// TetherChatTransport with a scripted fetch: what it sends, how it commits
// chunks an event at a time, where it reconnects from, and when it gives up.
import { describe, expect, it } from 'vitest';
import { TetherChatTransport, parseUIStream } from '../src/ai-sdk.js';
import type { TokenRequest } from '../src/token.js';
import { userToken } from './helpers/jwt.js';

const enc = new TextEncoder();

/** A response body delivered in the given pieces, then closed or failed. */
function body(pieces: string[], end: 'close' | 'fail' = 'close'): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < pieces.length) return c.enqueue(enc.encode(pieces[i++]!));
      if (end === 'close') c.close();
      else c.error(new TypeError('network error'));
    },
  });
}

const frame = (chunk: object, id?: string) => `${id ? `id: ${id}\n` : ''}data: ${JSON.stringify(chunk)}\n\n`;
const streamRes = (pieces: string[], end: 'close' | 'fail' = 'close') =>
  new Response(body(pieces, end), { headers: { 'content-type': 'text/event-stream', 'content-location': '/v1/runs/run_1' } });

interface Call {
  url: string;
  method: string;
  body: string | undefined;
  headers: Headers;
}

/** A fetch that answers each request with the next responder. */
function scripted(...responders: ((c: Call) => Response)[]) {
  const calls: Call[] = [];
  const fetch = async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const c = { url: String(input), method: init.method ?? 'GET', body: init.body as string | undefined, headers: new Headers(init.headers) };
    calls.push(c);
    const r = responders.shift();
    if (!r) throw new TypeError('fetch failed: no more answers');
    return r(c);
  };
  return { fetch: fetch as typeof globalThis.fetch, calls };
}

async function collect(s: ReadableStream<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const c of s as unknown as AsyncIterable<unknown>) out.push(c);
  return out;
}

const send = (t: TetherChatTransport) =>
  t.sendMessages({
    chatId: 'c1',
    trigger: 'submit-message',
    messageId: undefined,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
    abortSignal: undefined,
  });

describe('TetherChatTransport', () => {
  it('posts the chat with the body option merged in, the token as a bearer', async () => {
    const { fetch, calls } = scripted(() => streamRes([frame({ type: 'start', messageId: 'm1' }), frame({ type: 'finish' }, '1_1')]));
    const t = new TetherChatTransport({ api: 'http://t/v1/ai-sdk/demo/chat', fetch, token: 'tok_1234567890abcdef', body: { metadata: { demo: { tokens: 3 } } } });
    expect(await collect(await send(t))).toEqual([{ type: 'start', messageId: 'm1' }, { type: 'finish' }]);
    expect(calls[0]!.method).toBe('POST');
    expect(calls[0]!.url).toBe('http://t/v1/ai-sdk/demo/chat');
    expect(calls[0]!.headers.get('authorization')).toBe('Bearer tok_1234567890abcdef');
    expect(JSON.parse(calls[0]!.body!)).toEqual({
      metadata: { demo: { tokens: 3 } },
      id: 'c1',
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      trigger: 'submit-message',
    });
    expect(t.position('c1')).toEqual({ runId: 'run_1', offset: '1_1', ended: true });
  });

  it('after a drop, reconnects from the last whole event: chunks of a cut event are not delivered twice', async () => {
    const { fetch, calls } = scripted(
      // The second event's first chunk arrives, then the cut.
      () => streamRes([frame({ type: 'start', messageId: 'm1' }), frame({ type: 'text-start', id: 't' }, '1_1'), frame({ type: 'text-delta', id: 't', delta: 'a' }, '1_2'), frame({ type: 'text-end', id: 't' })], 'fail'),
      () => streamRes([frame({ type: 'text-end', id: 't' }), frame({ type: 'finish' }, '1_3')]),
    );
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, backoff: { initialMs: 1, maxMs: 2 } });
    const chunks = await collect(await send(t));
    expect(chunks).toEqual([
      { type: 'start', messageId: 'm1' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'a' },
      { type: 'text-end', id: 't' },
      { type: 'finish' },
    ]);
    expect(calls[1]!.url).toBe('/v1/ai-sdk/demo/chat/c1/stream?run_id=run_1&after=1_2');
    expect(t.stats.reconnects).toBe(1);
  });

  it('a drop before the first whole event asks for the run rebuilt', async () => {
    const { fetch, calls } = scripted(
      () => streamRes([':ok\n\n'], 'fail'),
      () => streamRes([frame({ type: 'start', messageId: 'm1' }), frame({ type: 'finish' }, '1_9')]),
    );
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, backoff: { initialMs: 1, maxMs: 2 } });
    expect(await collect(await send(t))).toHaveLength(2);
    expect(calls[1]!.url).toBe('/v1/ai-sdk/demo/chat/c1/stream?run_id=run_1');
  });

  it('gives up after maxAttempts drops in a row with a network error, keeping the offset for reconnectToStream', async () => {
    const fails = Array.from({ length: 3 }, () => () => {
      throw new TypeError('fetch failed');
    });
    const { fetch, calls } = scripted(() => streamRes([frame({ type: 'start', messageId: 'm1' }, '1_1')], 'fail'), ...fails, () =>
      streamRes([frame({ type: 'finish' }, '1_2')]),
    );
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, maxAttempts: 3, backoff: { initialMs: 1, maxMs: 2 } });
    await expect(collect(await send(t))).rejects.toThrow(TypeError);
    expect(t.position('c1')).toEqual({ runId: 'run_1', offset: '1_1', ended: false });
    // useChat resumes later (resumeStreamIsReplay is false): the exact offset.
    const again = await t.reconnectToStream({ chatId: 'c1' });
    expect(await collect(again!)).toEqual([{ type: 'finish' }]);
    expect(calls[calls.length - 1]!.url).toBe('/v1/ai-sdk/demo/chat/c1/stream?run_id=run_1&after=1_1');
    expect(t.resumeStreamIsReplay).toBe(false);
  });

  it('on a page load, reconnects without a cursor (the server rebuilds the answer); 204 is null', async () => {
    const { fetch, calls } = scripted(() => new Response(null, { status: 204 }));
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch });
    expect(await t.reconnectToStream({ chatId: 'c 2' })).toBeNull();
    expect(calls[0]!.url).toBe('/v1/ai-sdk/demo/chat/c%202/stream');
  });

  it('an error answer is thrown with its code and message; a 410 on resume ends the stream with it', async () => {
    const err = (status: number, code: string) => () => new Response(JSON.stringify({ error: { code, message: 'nope' } }), { status });
    const t1 = new TetherChatTransport({ api: '/x/chat', fetch: scripted(err(409, 'run_active')).fetch });
    await expect(send(t1)).rejects.toThrow('run_active: nope');
    // …as a TetherError, so that an app can branch on its code and status.
    const t3 = new TetherChatTransport({ api: '/x/chat', fetch: scripted(err(409, 'run_active')).fetch });
    await expect(send(t3)).rejects.toMatchObject({ name: 'TetherError', code: 'run_active', status: 409 });
    const page = () => new Response('<html>bad gateway</html>', { status: 502, headers: { 'content-type': 'text/html' } });
    await expect(send(new TetherChatTransport({ api: '/x/chat', fetch: scripted(page).fetch }))).rejects.toMatchObject({
      name: 'TetherError',
      status: 502,
      message: expect.stringMatching(/^[a-z_]+: HTTP 502$/),
    });
    const { fetch } = scripted(() => streamRes([frame({ type: 'start' }, '1_1')], 'fail'), err(410, 'gone'));
    const t2 = new TetherChatTransport({ api: '/x/chat', fetch, backoff: { initialMs: 1, maxMs: 2 } });
    await expect(collect(await send(t2))).rejects.toThrow('gone: nope');
  });
});

describe('TetherChatTransport tokens', () => {
  function minting(lifeMs: number) {
    const calls: TokenRequest[] = [];
    const issued: string[] = [];
    const token = async (r: TokenRequest) => {
      calls.push(r);
      issued.push(userToken('alice', Date.now() + lifeMs, { n: issued.length }));
      return issued[issued.length - 1];
    };
    return { calls, issued, token };
  }
  const expired = () => new Response(JSON.stringify({ error: { code: 'token_expired', message: 'the token has expired' } }), { status: 401 });

  it('on a stream ended for token_expired, resumes from its offset with a new token: nothing twice, nothing lost', async () => {
    const tk = minting(3_600_000);
    const { fetch, calls } = scripted(
      () => streamRes([frame({ type: 'start', messageId: 'm1' }), frame({ type: 'text-start', id: 't' }, '1_1'), frame({ type: 'text-delta', id: 't', delta: 'a' }, '1_2'), 'event: reconnect\ndata: {"reason":"token_expired"}\n\n']),
      () => streamRes([frame({ type: 'text-delta', id: 't', delta: 'b' }, '1_3'), frame({ type: 'text-end', id: 't' }), frame({ type: 'finish' }, '1_4')]),
    );
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, token: tk.token, backoff: { initialMs: 1, maxMs: 2 } });
    const chunks = await collect(await send(t));
    expect(chunks).toEqual([
      { type: 'start', messageId: 'm1' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'a' },
      { type: 'text-delta', id: 't', delta: 'b' },
      { type: 'text-end', id: 't' },
      { type: 'finish' },
    ]);
    expect(tk.calls).toEqual([{ reason: 'initial' }, { reason: 'expired', previous: tk.issued[0] }]);
    expect(calls.map((c) => c.headers.get('authorization'))).toEqual([`Bearer ${tk.issued[0]}`, `Bearer ${tk.issued[1]}`]);
    expect(calls[1]!.url).toBe('/v1/ai-sdk/demo/chat/c1/stream?run_id=run_1&after=1_2');
  });

  it('sends a request refused with 401 token_expired once more with a new token; a string token stays as it is', async () => {
    const tk = minting(3_600_000);
    const { fetch, calls } = scripted(expired, () => streamRes([frame({ type: 'start', messageId: 'm1' }), frame({ type: 'finish' }, '1_1')]));
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, token: tk.token });
    expect(await collect(await send(t))).toHaveLength(2);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.body).toBe(calls[1]!.body);
    expect(calls[1]!.headers.get('authorization')).toBe(`Bearer ${tk.issued[1]}`);

    const s = scripted(expired, expired);
    const fixed = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch: s.fetch, token: 'a-fixed-client-key-0123456789' });
    await expect(send(fixed)).rejects.toThrow('token_expired: the token has expired');
    expect(s.calls).toHaveLength(1);
  });

  it('asks for a new token ahead of exp before a reconnect', async () => {
    const tk = minting(60_000);
    const { fetch, calls } = scripted(
      () => streamRes([frame({ type: 'start', messageId: 'm1' }, '1_1')], 'fail'),
      () => streamRes([frame({ type: 'finish' }, '1_2')]),
    );
    const realNow = Date.now;
    let now = realNow();
    Date.now = () => now;
    try {
      const clock: typeof globalThis.fetch = (u, i) => {
        if (calls.length === 0) now += 31_000; // the first stream lasts past exp − 30 s
        return fetch(u, i);
      };
      const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch: clock, token: tk.token, backoff: { initialMs: 1, maxMs: 2 } });
      expect(await collect(await send(t))).toHaveLength(2);
    } finally {
      Date.now = realNow;
    }
    expect(tk.calls).toEqual([{ reason: 'initial' }, { reason: 'expiring', previous: tk.issued[0] }]);
    expect(calls[1]!.headers.get('authorization')).toBe(`Bearer ${tk.issued[1]}`);
  });

  it('a token function that throws fails the request with a clear error', async () => {
    const { fetch, calls } = scripted();
    const t = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat', fetch, token: () => Promise.reject(new Error('signed out')) });
    await expect(send(t)).rejects.toThrow('token_unavailable: the token function failed: signed out');
    expect(calls).toHaveLength(0);
  });
});

describe('parseUIStream', () => {
  it('reads frames split anywhere, skipping comments and [DONE]', async () => {
    const big = 'x'.repeat(70_000);
    const text = `:ok\n\n${frame({ type: 'start' })}\nid: 4_4\rdata: {"type":"text-delta","delta":"${big}"}\r\rid: 5_5\r\ndata: {"type":"finish"}\r\n\r\ndata: [DONE]\n\n`;
    for (const size of [1, 2, 3, 7, 100, 16_384, text.length]) {
      const pieces: string[] = [];
      for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
      const frames = [];
      for await (const f of parseUIStream(body(pieces))) frames.push({ id: f.id, chunk: f.chunk });
      expect(frames).toEqual([
        { id: undefined, chunk: { type: 'start' } },
        { id: '4_4', chunk: { type: 'text-delta', delta: big } },
        { id: '5_5', chunk: { type: 'finish' } },
      ]);
    }
  });
});
