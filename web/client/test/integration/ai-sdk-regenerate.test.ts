// Regenerate with the AI SDK's own chat engine (the Chat class useChat
// wraps) and the unmodified DefaultChatTransport on the real binary: the
// AI SDK's error pattern (a Retry button that calls regenerate()), and
// regenerate({messageId}) of a question or of an earlier answer.
import { Chat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { threadName, until, url } from './helpers.js';

const api = () => `${url()}/v1/ai-sdk/demo/chat`;
const ok = { metadata: { demo: { tokens: 6, delay_ms: 0 } } };
// The demo agent refuses these options: the run ends error before it says
// anything, as a run whose model provider is down does.
const failing = { metadata: { demo: { tokens: -1 } } };

async function serverMessages(chatId: string): Promise<UIMessage[]> {
  return (await (await fetch(`${api()}/${chatId}/messages`)).json()) as UIMessage[];
}

async function settle(chat: Chat<UIMessage>): Promise<void> {
  await until(() => chat.status === 'ready' || chat.status === 'error', 30_000, 'the chat to settle');
}

const summary = (ms: UIMessage[]) => ms.map((m) => `${m.role}:${m.id}`);

describe('regenerate, DefaultChatTransport unmodified', () => {
  it('a question whose run failed before answering is asked again with regenerate(); the earlier answer stays', async () => {
    const id = threadName('aisdk-retry');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: ok }) });
    await chat.sendMessage({ text: 'one' });
    await settle(chat);
    expect(chat.status).toBe('ready');
    await chat.sendMessage({ text: 'two' }, { body: failing });
    await settle(chat);
    expect(chat.status).toBe('error');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);

    await chat.regenerate(); // the Retry button
    await settle(chat);
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(summary(await serverMessages(id))).toEqual(summary(chat.messages));
  });

  it('the first question of a chat failed: regenerate() answers it', async () => {
    const id = threadName('aisdk-retry-first');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: failing }) });
    await chat.sendMessage({ text: 'one' });
    await settle(chat);
    expect(chat.status).toBe('error');
    await chat.regenerate({ body: ok });
    await settle(chat);
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(summary(await serverMessages(id))).toEqual(summary(chat.messages));
  });

  it("regenerate({messageId}) of the user's question replaces its answer", async () => {
    const id = threadName('aisdk-regen-question');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: ok }) });
    await chat.sendMessage({ text: 'one' });
    await settle(chat);
    const [question, first] = chat.messages;
    await chat.regenerate({ messageId: question!.id });
    await settle(chat);
    expect(chat.error).toBeUndefined();
    expect(chat.messages).toHaveLength(2);
    expect(chat.messages[1]!.id).not.toBe(first!.id);
    expect(summary(await serverMessages(id))).toEqual(summary(chat.messages));
  });

  it('regenerating an answer before the last question is refused with a clear error, and the chat is as it was', async () => {
    const id = threadName('aisdk-regen-earlier');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: api(), body: ok }) });
    await chat.sendMessage({ text: 'one' });
    await settle(chat);
    await chat.sendMessage({ text: 'two' });
    await settle(chat);
    const before = await serverMessages(id);
    await chat.regenerate({ messageId: chat.messages[1]!.id });
    await settle(chat);
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toMatch(/conflict/);
    expect(await serverMessages(id)).toEqual(before);
    const threads = (await (await fetch(`${url()}/v1/threads/${id}`)).json()) as { runs: unknown[] };
    expect(threads.runs).toHaveLength(2);
  });
});
