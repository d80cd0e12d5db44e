// Per-user tokens on a real `tether serve --jwt-secret-file`: each client
// follows a demo run of a few seconds with tokens that live two, so the
// server ends its streams at each token's exp (SSE: `reconnect`
// `token_expired`; AG-UI: a reset; AI SDK: the end of the stream); the
// client fetches the next token ahead of it and resumes from its offset.
// The answer must come out whole, once.
import { Chat } from '@ai-sdk/react';
import type { Message } from '@ag-ui/client';
import type { UIMessage } from 'ai';
import { describe, expect, inject, it } from 'vitest';
import { TetherAgent } from '../../src/ag-ui.js';
import { TetherChatTransport } from '../../src/ai-sdk.js';
import { TetherClient } from '../../src/client.js';
import type { Timers } from '../../src/timing.js';
import type { TokenRequest } from '../../src/token.js';
import { mintJWT } from '../helpers/jwt.js';
import { demo, expectSameAsServer, threadName, until } from './helpers.js';

const base = () => inject('tetherJwtUrl');
const token = (sub: string, lifeSeconds: number) => mintJWT({ sub, exp: Math.floor(Date.now() / 1000) + lifeSeconds }, inject('tetherJwtSecret'));

/** A token function for `sub` handing out 2-second tokens, with what it was asked. */
function minting(sub: string) {
  const reasons: string[] = [];
  return {
    reasons,
    fn: (r: TokenRequest) => {
      reasons.push(r.reason);
      return token(sub, 2);
    },
  };
}

async function finalAnswer(tid: string): Promise<{ content: string; complete: boolean }> {
  const res = await fetch(`${base()}/v1/threads/${encodeURIComponent(tid)}/final-answer`, { headers: { Authorization: `Bearer ${token('alice', 60)}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as { content: string; complete: boolean };
}

describe('expiring user tokens (real server)', () => {
  it('TetherClient: a run followed across several token lifetimes is the server\'s, exactly', async () => {
    const m = minting('alice');
    const client = new TetherClient({ baseUrl: base(), token: m.fn, lifecycle: null, backoff: { initialMs: 50, maxMs: 400 } });
    const direct = new TetherClient({ baseUrl: base(), token: () => token('alice', 60), lifecycle: null });
    const tid = threadName('jwt-client');
    await client.createThread({ id: tid });
    const live = client.startRun(tid, demo(50, 100));
    expect((await live.finished)?.status).toBe('done');
    await expectSameAsServer(live.store, direct);
    const fa = await finalAnswer(tid);
    expect(fa.complete).toBe(true);
    expect(m.reasons.filter((r) => r !== 'initial').length).toBeGreaterThanOrEqual(2);
    live.close();
    // Another user's token sees nothing of it.
    const bob = new TetherClient({ baseUrl: base(), token: token('bob', 60), lifecycle: null });
    expect(await bob.getThread(tid).catch((e: unknown) => e)).toMatchObject({ code: 'not_found' });
  });

  it('TetherAgent: the AG-UI run, reset at each exp, ends with the final answer once', async () => {
    const m = minting('alice');
    const tid = threadName('jwt-agui');
    const agent = new TetherAgent({ url: `${base()}/v1/ag-ui/demo`, threadId: tid, token: m.fn, backoff: { initialMs: 50, maxMs: 400 } });
    agent.addMessage({ id: `u-${tid}`, role: 'user', content: 'a long answer, please' });
    let finished = 0;
    await agent.runAgent({ forwardedProps: { demo: { tokens: 50, delay_ms: 100 } } }, { onRunFinishedEvent: () => void finished++ });
    const fa = await finalAnswer(tid);
    const assistants = agent.messages.filter((x: Message) => x.role === 'assistant');
    expect(assistants).toHaveLength(1);
    expect((assistants[0] as { content?: string }).content).toBe(fa.content);
    expect(finished).toBe(1);
    expect(m.reasons.filter((r) => r !== 'initial').length).toBeGreaterThanOrEqual(2);
  });

  it('TetherAgent.cancelRun() before the first run made the thread resolves false (docs/ag-ui.md), with a user\'s token too', async () => {
    const agent = new TetherAgent({ url: `${base()}/v1/ag-ui/demo`, threadId: threadName('jwt-stop'), token: () => token('alice', 60) });
    expect(await agent.cancelRun()).toBe(false);
  });

  it('TetherChatTransport: useChat\'s engine gets the whole answer once across the ends at each exp', async () => {
    const m = minting('alice');
    const id = threadName('jwt-aisdk');
    const transport = new TetherChatTransport({ api: `${base()}/v1/ai-sdk/demo/chat`, token: m.fn, body: { metadata: { demo: { tokens: 50, delay_ms: 100 } } }, backoff: { initialMs: 50, maxMs: 400 } });
    const chat = new Chat<UIMessage>({ id, transport });
    await chat.sendMessage({ text: 'a long answer, please' });
    await until(() => chat.status === 'ready' || chat.status === 'error', 30_000, 'the chat to settle');
    expect(chat.error).toBeUndefined();
    const fa = await finalAnswer(id);
    const assistants = chat.messages.filter((x) => x.role === 'assistant');
    expect(assistants).toHaveLength(1);
    expect(assistants[0]!.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')).toBe(fa.content);
    expect(transport.stats.reconnects).toBeGreaterThanOrEqual(2);
    expect(m.reasons.filter((r) => r !== 'initial').length).toBeGreaterThanOrEqual(2);
  });

  it('TetherClient: a token function that fails once ahead of the exp: the held token, still good, is sent, and the next request asks again', async () => {
    let skew = 0;
    const timers: Timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>), now: () => Date.now() + skew, random: () => Math.random() };
    const asked: string[] = [];
    let fail = 0;
    const client = new TetherClient({
      baseUrl: base(),
      lifecycle: null,
      timers,
      token: (r: TokenRequest) => {
        asked.push(r.reason);
        if (fail > 0) {
          fail--;
          throw new Error('the identity provider is down');
        }
        return token('alice', 60);
      },
    });
    const tid = threadName('jwt-ahead');
    await client.createThread({ id: tid });
    skew = 45_000; // within the 30 s before the token's exp: time to ask for the next one; it is still good
    fail = 1;
    const snap = await client.getThread(tid);
    expect(snap.thread.id).toBe(tid);
    expect(asked).toEqual(['initial', 'expiring']);
    // The next request asks again, and gets one.
    await client.getThread(tid);
    expect(asked).toEqual(['initial', 'expiring', 'expiring']);
  });
});
