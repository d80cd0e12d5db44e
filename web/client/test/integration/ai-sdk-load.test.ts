// A page load racing the end of the answer, with the AI SDK's own chat
// engine (the Chat class useChat wraps) and DefaultChatTransport on the
// real binary: the page loads the chat's messages mid-answer, and the
// answer ends before useChat's resume asks for it.
import { Chat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { TetherChatTransport } from '../../src/ai-sdk.js';
import { threadName, until, url } from './helpers.js';

const api = () => `${url()}/v1/ai-sdk/demo/chat`;

const textOf = (m: UIMessage | undefined) => (m?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');

async function finalAnswer(chatId: string): Promise<{ content: string; complete: boolean }> {
  return (await (await fetch(`${url()}/v1/threads/${chatId}/final-answer`)).json()) as { content: string; complete: boolean };
}

/** Loads a chat as a page does: its messages, and the offset they are as of. */
async function load(chatId: string): Promise<{ messages: UIMessage[]; offset: string | null }> {
  const res = await fetch(`${api()}/${chatId}/messages`);
  return { messages: (await res.json()) as UIMessage[], offset: res.headers.get('Tether-Offset') };
}

/** A DefaultChatTransport whose resume says what the page loaded (docs/ai-sdk.md, quick start). */
const transportAsOf = (offset: string | null) =>
  new DefaultChatTransport({
    api: api(),
    prepareReconnectToStreamRequest: ({ id }) => ({ api: `${api()}/${id}/stream${offset ? `?after=${offset}` : ''}` }),
  });

describe('a page load that races the end of the answer', () => {
  it('messages loaded mid-answer, the answer ends before the resume: the resume from their offset brings the whole answer', async () => {
    const id = threadName('aisdk-load-race');
    const first = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: { metadata: { demo: { tokens: 60, delay_ms: 5 } } } }) });
    const sent = first.sendMessage({ text: 'race me' });
    await until(() => textOf(first.messages[1]).length > 10, 15_000, 'some text');
    const page = await load(id); // the server renders the page mid-answer
    expect(page.offset).toBeTruthy();
    await sent;
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true); // the answer ended before the page's resume
    expect(textOf(page.messages[1]).length).toBeLessThan(fa.content.length);

    const chat = new Chat<UIMessage>({ id, messages: page.messages, transport: transportAsOf(page.offset) });
    await chat.resumeStream(); // useChat({resume: true}) on mount
    await until(() => chat.status === 'ready' || chat.status === 'error', 15_000, 'the chat to settle');
    expect(chat.error).toBeUndefined();
    expect(chat.messages.filter((m) => m.role === 'assistant')).toHaveLength(1);
    expect(textOf(chat.messages[1])).toBe(fa.content);
  });

  it('nothing happened since the messages were loaded: 204, and the chat stays as loaded', async () => {
    const id = threadName('aisdk-load-idle');
    const first = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: { metadata: { demo: { tokens: 5, delay_ms: 0 } } } }) });
    await first.sendMessage({ text: 'done already' });
    const page = await load(id);
    const res = await fetch(`${api()}/${id}/stream?after=${page.offset}`);
    expect(res.status).toBe(204);
    const chat = new Chat<UIMessage>({ id, messages: page.messages, transport: transportAsOf(page.offset) });
    await chat.resumeStream();
    expect(chat.status).toBe('ready');
    expect(chat.messages).toEqual(page.messages);
  });

  it('an offset not of this chat is 410 gone', async () => {
    const id = threadName('aisdk-load-gone');
    const first = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: { metadata: { demo: { tokens: 5, delay_ms: 0 } } } }) });
    await first.sendMessage({ text: 'x' });
    const res = await fetch(`${api()}/${id}/stream?after=9999999999_0000000000000001`);
    expect(res.status).toBe(410);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('gone');
  });
});

describe('TetherChatTransport.loadMessages', () => {
  it('messages loaded mid-answer, the answer ends before the resume: the resume brings the whole answer', async () => {
    const id = threadName('aisdk-load-tether');
    const first = new Chat<UIMessage>({ id, transport: new TetherChatTransport({ api: api(), body: { metadata: { demo: { tokens: 60, delay_ms: 5 } } } }) });
    const sent = first.sendMessage({ text: 'race me' });
    await until(() => textOf(first.messages[1]).length > 10, 15_000, 'some text');
    const transport = new TetherChatTransport({ api: api() }); // the new page's
    const messages = await transport.loadMessages(id);
    await sent;
    const fa = await finalAnswer(id);
    expect(fa.complete).toBe(true);
    expect(textOf(messages[1]).length).toBeLessThan(fa.content.length);

    const chat = new Chat<UIMessage>({ id, messages, transport });
    await chat.resumeStream();
    await until(() => chat.status === 'ready' || chat.status === 'error', 15_000, 'the chat to settle');
    expect(chat.error).toBeUndefined();
    expect(chat.messages.filter((m) => m.role === 'assistant')).toHaveLength(1);
    expect(textOf(chat.messages[1])).toBe(fa.content);
    // Followed to its end: a later resume finds nothing active.
    expect(await transport.reconnectToStream({ chatId: id })).toBeNull();
  });
});
