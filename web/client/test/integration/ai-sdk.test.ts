// The AI SDK on the real binary: the unmodified DefaultChatTransport and
// TetherChatTransport, driven by the SDK's own chat engine (the Chat class
// useChat wraps), with a wire that cuts the streams.
import { Chat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, safeValidateUIMessages, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { TetherChatTransport } from '../../src/ai-sdk.js';
import { threadName, until, url } from './helpers.js';
import { Wire } from './wire.js';

const api = () => `${url()}/v1/ai-sdk/demo/chat`;
const demo = (tokens: number, delayMs: number, extra: Record<string, unknown> = {}) => ({ metadata: { demo: { tokens, delay_ms: delayMs, ...extra } } });

/** The answer's text in a message: its text parts, joined. */
const textOf = (m: UIMessage | undefined) =>
  (m?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');

async function finalAnswer(chatId: string): Promise<{ content: string; complete: boolean; status: string }> {
  const res = await fetch(`${url()}/v1/threads/${chatId}/final-answer`);
  return (await res.json()) as { content: string; complete: boolean; status: string };
}

async function serverMessages(chatId: string): Promise<UIMessage[]> {
  return (await (await fetch(`${api()}/${chatId}/messages`)).json()) as UIMessage[];
}

async function settle(chat: Chat<UIMessage>): Promise<void> {
  await until(() => chat.status === 'ready' || chat.status === 'error', 30_000, 'the chat to settle');
}

const assistants = (chat: Chat<UIMessage>) => chat.messages.filter((m) => m.role === 'assistant');

describe('DefaultChatTransport, unmodified', () => {
  it('sends a message to the demo agent and reads the whole answer, reasoning and tool call included', async () => {
    const id = threadName('aisdk-default');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: demo(40, 2) }) });
    await chat.sendMessage({ text: 'What is a durable stream?' });
    await settle(chat);
    expect(chat.error).toBeUndefined();
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(assistants(chat)).toHaveLength(1);
    const answer = assistants(chat)[0]!;
    expect(textOf(answer)).toBe(fa.content);
    const types = answer.parts.map((p) => p.type);
    expect(types).toContain('reasoning');
    expect(types).toContain('tool-search');
    const tool = answer.parts.find((p) => p.type === 'tool-search') as { state: string; input: unknown; output: unknown };
    expect(tool.state).toBe('output-available');
    expect(tool.input).toEqual({ query: 'What is a durable stream?' });
    // The thread's messages: the same answer, under the same id, valid for the SDK.
    const listed = await serverMessages(id);
    expect((await safeValidateUIMessages({ messages: listed })).success).toBe(true);
    expect(listed.map((m) => m.id)).toEqual(chat.messages.map((m) => m.id));
    expect(JSON.parse(JSON.stringify(listed[1]))).toEqual(JSON.parse(JSON.stringify(answer)));
  });

  it('cut mid-answer, reconnectToStream replays it from start: applied to the partial message, exactly the final answer', async () => {
    const id = threadName('aisdk-default-cut');
    const wire = new Wire();
    wire.on((m, u) => m === 'POST' && u.endsWith('/chat'), () => ({ kind: 'cut', after: 12000 }));
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: demo(200, 10), fetch: wire.fetch }) });
    await chat.sendMessage({ text: 'Tell me about resumes' });
    await settle(chat);
    expect(chat.status).toBe('error'); // the cut
    const partial = textOf(assistants(chat)[0]);
    expect(partial.length).toBeGreaterThan(0);
    expect((await finalAnswer(id)).complete).toBe(false); // cut mid-answer

    await chat.resumeStream(); // what useChat({resume: true}) does on mount: GET …/{id}/stream
    await settle(chat);
    expect(chat.status).toBe('ready');
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(assistants(chat)).toHaveLength(1);
    expect(textOf(assistants(chat)[0])).toBe(fa.content);
    expect(fa.content.startsWith(partial)).toBe(true);
  });

  it('an idle chat gets 204: reconnectToStream gives null', async () => {
    const t = new DefaultChatTransport({ api: api() });
    expect(await t.reconnectToStream({ chatId: threadName('aisdk-idle') })).toBeNull();
    const res = await fetch(`${api()}/${threadName('aisdk-idle')}/stream`);
    expect(res.status).toBe(204);
  });

  it('a cancelled run renders as an aborted answer; the stop endpoint cancels it', async () => {
    const id = threadName('aisdk-stop');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: demo(2000, 5) }) });
    const sent = chat.sendMessage({ text: 'long' });
    await until(() => textOf(assistants(chat)[0]).length > 20, 15_000, 'some text');
    const res = await fetch(`${api()}/${id}/stop`, { method: 'POST' });
    expect(res.status).toBe(202);
    await sent;
    await settle(chat);
    expect(chat.status).toBe('ready');
    expect((await finalAnswer(id)).status).toBe('cancelled');
    const text = textOf(assistants(chat)[0]);
    expect(text).toBe((await finalAnswer(id)).content);
    expect((await fetch(`${api()}/${id}/stop`, { method: 'POST' })).status).toBe(204);
  });

  it('a run that asks renders a dynamic tool part; addToolOutput answers it and the answer goes on', async () => {
    const id = threadName('aisdk-ask');
    const chat = new Chat<UIMessage>({
      id,
      transport: new DefaultChatTransport({ api: api(), body: demo(8, 2, { ask: true }) }),
      // The AI SDK's own helper: it sends once the request has its output,
      // and not again after the answer (a tool call ends its step).
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    });
    await chat.sendMessage({ text: 'ask me' });
    await settle(chat);
    const ask = assistants(chat)[0]!.parts.find((p) => p.type === 'dynamic-tool') as { toolCallId: string; toolName: string; state: string };
    expect(ask.state).toBe('input-available');
    await chat.addToolOutput({ tool: ask.toolName as never, toolCallId: ask.toolCallId, output: 'durability' as never });
    await until(() => textOf(assistants(chat)[0]).includes('durability') && chat.status === 'ready', 15_000, 'the answer');
    await new Promise((r) => setTimeout(r, 300)); // time for a wrong automatic resend
    expect(chat.status).toBe('ready');
    expect(chat.error).toBeUndefined();
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(assistants(chat)).toHaveLength(1);
    expect(textOf(assistants(chat)[0])).toBe(fa.content);
  });
});

describe('TetherChatTransport', () => {
  it('cut 5 times mid-answer: the final answer once, each reconnect from its offset', async () => {
    const id = threadName('aisdk-tether-cuts');
    const wire = new Wire();
    let cuts = 0;
    wire.on(
      (m, u) => (m === 'POST' && u.endsWith('/chat')) || (m === 'GET' && u.includes('/stream')),
      () => (cuts++ < 5 ? { kind: 'cut', after: 3000 } : { kind: 'pass' }),
    );
    const transport = new TetherChatTransport({ api: api(), body: demo(400, 3), fetch: wire.fetch, backoff: { initialMs: 20, maxMs: 100 } });
    const chat = new Chat<UIMessage>({ id, transport });
    await chat.sendMessage({ text: 'Survive five cuts' });
    await settle(chat);
    expect(chat.error).toBeUndefined();
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(assistants(chat)).toHaveLength(1);
    expect(textOf(assistants(chat)[0])).toBe(fa.content);
    expect(transport.stats.reconnects).toBe(5);
    // Every reconnect names the offset of the last event delivered, and
    // they only move forward.
    const afters = wire.log.filter((l) => l.startsWith('GET')).map((l) => /after=([0-9_]+)/.exec(l)?.[1]);
    expect(afters).toHaveLength(5);
    for (let i = 0; i < afters.length; i++) {
      expect(afters[i]).toBeTruthy();
      if (i > 0) expect(afters[i]! > afters[i - 1]!).toBe(true);
    }
    // Nothing is sent twice by the server; what the cuts cost is the
    // partial event at each cut (and pings): measured and bounded.
    expect(transport.stats.resentBytes).toBe(0);
    const lost = transport.stats.bytes - transport.stats.committedBytes;
    console.log(
      `TetherChatTransport, 5 cuts: ${transport.stats.bytes} bytes received, ${transport.stats.committedBytes} delivered, ${lost} received twice or dropped (${(lost / 5).toFixed(0)} per cut)`,
    );
    expect(lost).toBeLessThan(5 * 600);
    // The thread's messages agree.
    const listed = await serverMessages(id);
    expect(listed.map((m) => m.id)).toEqual(chat.messages.map((m) => m.id));
  });

  it('on a page load (no offset known) falls back to the rebuild of the active answer; 204 when idle', async () => {
    const id = threadName('aisdk-tether-load');
    const first = new Chat<UIMessage>({ id, transport: new TetherChatTransport({ api: api(), body: demo(150, 10) }) });
    void first.sendMessage({ text: 'load me' });
    await until(() => textOf(assistants(first)[0]).length > 30, 15_000, 'some text');
    first.stop(); // the page goes away; the run goes on
    // A new page: the messages from Tether, then resume.
    const reloaded = new Chat<UIMessage>({ id, messages: await serverMessages(id), transport: new TetherChatTransport({ api: api() }) });
    await reloaded.resumeStream();
    await settle(reloaded);
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(assistants(reloaded)).toHaveLength(1);
    expect(textOf(assistants(reloaded)[0])).toBe(fa.content);
    expect(await new TetherChatTransport({ api: api() }).reconnectToStream({ chatId: id })).toBeNull();
  });
});
