// useChat (the AI SDK's Chat, the unmodified DefaultChatTransport) on the
// real binary, for the events of a worker that does what the demo agent
// never does: talk while a tool call runs. What useChat builds from the
// stream must be the message the chat's /messages lists.
import { Chat } from '@ai-sdk/react';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { TetherChatTransport } from '../../src/ai-sdk.js';
import { threadName, until, url } from './helpers.js';

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url()}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** Claims the next run of agent, and returns a function that appends to it. */
async function claim(agent: string): Promise<(events: unknown[]) => Promise<void>> {
  const res = await post('/v1/workers/claim', { worker_id: 'w1', agents: [agent], wait_ms: 10_000 });
  expect(res.status).toBe(200);
  const c = (await res.json()) as { run: { id: string }; lease: { token: string } };
  return async (events) => {
    const r = await post(`/v1/runs/${c.run.id}/events`, events, { 'Tether-Lease': c.lease.token });
    expect(r.status, await r.clone().text()).toBe(200);
  };
}

const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('useChat and a worker that talks while its tool runs', () => {
  it('a tool call that finishes after text followed it is one part, with its output, as /messages lists it', async () => {
    const agent = 'talker';
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: [agent], wait_ms: 0 })).status).toBe(204); // the name is known
    const id = threadName('aisdk-talker');
    const chat = new Chat<UIMessage>({ id, transport: new DefaultChatTransport({ api: `${url()}/v1/ai-sdk/${agent}/chat` }) });
    const sent = chat.sendMessage({ text: 'find it' });
    const append = await claim(agent);
    const m = `m-${id}`;
    await append([
      { type: 'message.started', message_id: m, role: 'assistant' },
      { type: 'tool.started', message_id: m, call_id: 'c1', name: 'search' },
      { type: 'tool.delta', message_id: m, call_id: 'c1', delta: '{"q":"it"}' },
      { type: 'text.delta', message_id: m, delta: 'Searching while it runs. ' },
      { type: 'tool.started', message_id: m, call_id: 'c2', name: 'search' },
      { type: 'tool.delta', message_id: m, call_id: 'c2', delta: '{"q":"more"}' },
      { type: 'reasoning.delta', message_id: m, delta: 'c2 will not finish.' },
      { type: 'tool.finished', message_id: m, call_id: 'c1', output: { hits: 1 } },
      { type: 'text.delta', message_id: m, delta: 'Found it.' },
      { type: 'message.finished', message_id: m, status: 'aborted' },
      { type: 'run.finished', status: 'done' },
    ]);
    await sent;
    await until(() => chat.status === 'ready' || chat.status === 'error', 15_000, 'the chat to settle');
    expect(chat.error).toBeUndefined();
    const listed = (await (await fetch(`${url()}/v1/ai-sdk/${agent}/chat/${id}/messages`)).json()) as UIMessage[];
    const live = chat.messages[chat.messages.length - 1]!;
    const tools = live.parts.filter((p) => p.type === 'tool-search') as { toolCallId: string; state: string }[];
    expect(tools.map((t) => `${t.toolCallId}:${t.state}`)).toEqual(['c1:output-available', 'c2:output-error']);
    // useChat keeps the raw input of a call that failed in a later step
    // than its part's (its own rule for tool-output-error); a rebuild
    // makes the part whole, without it. The rest is the same message.
    const rawOfFailed = (m: UIMessage) =>
      plain({ ...m, parts: m.parts.map((p) => ('state' in p && p.state === 'output-error' ? { ...p, rawInput: undefined } : p)) });
    expect(rawOfFailed(live)).toEqual(rawOfFailed(listed[listed.length - 1]!));
  });
});

describe('a chat longer than the largest request body', () => {
  it('goes on: TetherChatTransport sends what the server reads, not every answer again', async () => {
    const agent = 'longtalker';
    expect((await post('/v1/workers/claim', { worker_id: 'w1', agents: [agent], wait_ms: 0 })).status).toBe(204);
    const api = `${url()}/v1/ai-sdk/${agent}/chat`;
    const id = threadName('aisdk-long');
    // A first answer of 4.5 MiB (a long session's tool outputs and text).
    const first = new Chat<UIMessage>({ id, transport: new TetherChatTransport({ api }) });
    const sent = first.sendMessage({ text: 'say a lot' });
    let append = await claim(agent);
    const piece = 'x'.repeat(256 << 10);
    await append([{ type: 'message.started', message_id: `a1-${id}`, role: 'assistant' }]);
    for (let i = 0; i < 6; i++) await append([0, 1, 2].map(() => ({ type: 'text.delta', message_id: `a1-${id}`, delta: piece })));
    await append([{ type: 'message.finished', message_id: `a1-${id}`, status: 'done' }, { type: 'run.finished', status: 'done' }]);
    await sent;
    expect(first.error).toBeUndefined();

    const answer = async (n: number) => {
      append = await claim(agent);
      await append([
        { type: 'message.started', message_id: `a${n}-${id}`, role: 'assistant' },
        { type: 'text.delta', message_id: `a${n}-${id}`, delta: `answer ${n}` },
        { type: 'message.finished', message_id: `a${n}-${id}`, status: 'done' },
        { type: 'run.finished', status: 'done' },
      ]);
    };
    const transport = new TetherChatTransport({ api });
    const chat = new Chat<UIMessage>({ id, messages: await transport.loadMessages(id), transport });
    const next = chat.sendMessage({ text: 'and now?' });
    await answer(2);
    await next;
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(JSON.stringify(chat.messages).length).toBeGreaterThan(4 << 20);

    // The unmodified DefaultChatTransport, told to send the same (docs/ai-sdk.md, "The request").
    const plainChat = new Chat<UIMessage>({
      id,
      messages: chat.messages,
      transport: new DefaultChatTransport({
        api,
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => {
          // The answers but the last: the thread holds them.
          const read = messages.filter((m, i) => m.role !== 'assistant' || i === messages.length - 1);
          return { body: { ...body, id, messages: read, trigger, messageId } };
        },
      }),
    });
    const third = plainChat.sendMessage({ text: 'once more' });
    await answer(3);
    await third;
    expect(plainChat.error).toBeUndefined();
    expect(plainChat.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
  });
});
