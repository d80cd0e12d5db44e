// The AI SDK's own tool approval flow on the real binary: the demo agent
// asks the approval of its tool call (metadata.demo.approve), useChat (the
// SDK's Chat) shows it on the call's part, the app answers with
// addToolApprovalResponse, and lastAssistantMessageIsCompleteWithApprovalResponses
// sends the conversation back. One call approved, one denied, with the
// unmodified DefaultChatTransport and with TetherChatTransport.
import { Chat } from '@ai-sdk/react';
import {
  type ChatTransport,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  safeValidateUIMessages,
  type UIMessage,
} from 'ai';
import { describe, expect, it } from 'vitest';
import { TetherChatTransport } from '../../src/ai-sdk.js';
import { threadName, until, url } from './helpers.js';
import { Wire } from './wire.js';

const api = () => `${url()}/v1/ai-sdk/demo/chat`;
const body = { metadata: { demo: { tokens: 8, delay_ms: 2, approve: true } } };

type ToolPart = {
  type: string;
  toolCallId: string;
  state: string;
  input?: unknown;
  output?: unknown;
  approval?: { id: string; approved?: boolean; reason?: string };
};

const assistants = (chat: Chat<UIMessage>) => chat.messages.filter((m) => m.role === 'assistant');
const textOf = (m: UIMessage | undefined) => (m?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
const callOf = (m: UIMessage | undefined) => (m?.parts ?? []).find((p) => p.type === 'tool-search') as ToolPart | undefined;
const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

async function serverMessages(chatId: string): Promise<UIMessage[]> {
  return (await (await fetch(`${api()}/${chatId}/messages`)).json()) as UIMessage[];
}

async function finalAnswer(chatId: string): Promise<string> {
  return ((await (await fetch(`${url()}/v1/threads/${chatId}/final-answer`)).json()) as { content: string }).content;
}

/** Asks a question, waits for the call's approval, answers it, and waits for the answer's end. */
async function turn(chat: Chat<UIMessage>, text: string, approved: boolean, reason?: string): Promise<UIMessage> {
  const before = assistants(chat).length;
  await chat.sendMessage({ text });
  await until(() => chat.status === 'ready' && callOf(assistants(chat)[before])?.state === 'approval-requested', 15_000, 'the approval asked');
  expect(chat.error).toBeUndefined();
  // Asked on the call's part, not as a part of its own.
  const asked = assistants(chat)[before]!;
  expect(asked.parts.some((p) => p.type === 'dynamic-tool')).toBe(false);
  const call = callOf(asked)!;
  expect(call.input).toEqual({ query: text });
  await chat.addToolApprovalResponse({ id: call.approval!.id, approved, reason });
  const done = approved ? 'output-available' : 'output-denied';
  await until(() => chat.status === 'ready' && callOf(assistants(chat)[before])?.state === done && textOf(assistants(chat)[before]).length > 0, 15_000, `the call ${done}`);
  await new Promise((r) => setTimeout(r, 300)); // time for a wrong automatic resend
  expect(chat.status).toBe('ready');
  expect(chat.error).toBeUndefined();
  expect(assistants(chat)).toHaveLength(before + 1);
  return assistants(chat)[before]!;
}

/** Approves one call and denies the next, and checks what useChat and the server hold. */
async function approveThenDeny(transport: ChatTransport<UIMessage>, name: string): Promise<void> {
  const id = threadName(name);
  const chat = new Chat<UIMessage>({ id, transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });

  const first = await turn(chat, 'search, please', true);
  const ran = callOf(first)!;
  expect(ran.output).toBeTruthy();
  expect(ran.approval).toMatchObject({ approved: true });
  expect(textOf(first)).not.toContain('did not allow');

  const second = await turn(chat, 'and search again', false, 'Not this time.');
  const denied = callOf(second)!;
  expect(denied.output).toBeUndefined();
  expect(denied.approval).toMatchObject({ id: expect.any(String), approved: false, reason: 'Not this time.' });
  expect(textOf(second).startsWith('You did not allow the search')).toBe(true);
  expect(textOf(second)).toBe(await finalAnswer(id));

  // The server's messages: the same conversation, valid for the SDK. The
  // approved call's part is a finished call there (the log's snapshot
  // keeps the call's result, not the answered request: docs/ai-sdk.md).
  const listed = await serverMessages(id);
  expect((await safeValidateUIMessages({ messages: listed })).success).toBe(true);
  const held = plain(chat.messages);
  const call = callOf(held[1])!;
  delete call.approval;
  expect(listed).toEqual(held);
}

describe('the AI SDK tool approval flow', () => {
  it('DefaultChatTransport, unmodified: one call approved, one denied; the final messages are /messages', async () => {
    await approveThenDeny(new DefaultChatTransport({ api: api(), body }), 'aisdk-approval-default');
  });

  it('TetherChatTransport: the same, its request carrying the answer with the approval', async () => {
    const sent: unknown[] = [];
    const wire = new Wire();
    const seen = async (input: RequestInfo | URL, init: RequestInit = {}) => {
      if ((init.method ?? 'GET') === 'POST' && typeof init.body === 'string') sent.push(JSON.parse(init.body));
      return wire.fetch(input, init);
    };
    await approveThenDeny(new TetherChatTransport({ api: api(), body, fetch: seen }), 'aisdk-approval-tether');
    // The answers' requests: the answer but no earlier one, its approval given.
    const answers = sent.filter((b) => (b as { messages: UIMessage[] }).messages.at(-1)?.role === 'assistant') as { messages: UIMessage[] }[];
    expect(answers).toHaveLength(2);
    expect(answers[1]!.messages.map((m) => m.role)).toEqual(['user', 'user', 'assistant']);
    expect(callOf(answers[1]!.messages.at(-1))).toMatchObject({ state: 'approval-responded', approval: { approved: false, reason: 'Not this time.' } });
  });

  it('a page that loads mid-approval shows it, and its answer goes on; a drop before it resumes from its offset', async () => {
    const id = threadName('aisdk-approval-load');
    const wire = new Wire();
    // Cut the first stream early: the transport resumes (?run_id=&after=) before the approval.
    wire.on((m, u) => m === 'POST' && u.endsWith('/chat'), (n) => (n === 0 ? { kind: 'cut', after: 400 } : { kind: 'pass' }));
    const transport = new TetherChatTransport({ api: api(), body, fetch: wire.fetch, backoff: { initialMs: 20, maxMs: 100 } });
    const first = new Chat<UIMessage>({ id, transport });
    await first.sendMessage({ text: 'search, later' });
    await until(() => first.status === 'ready' && callOf(assistants(first)[0])?.state === 'approval-requested', 15_000, 'the approval asked');
    expect(wire.log.some((l) => l.startsWith('GET') && /run_id=.*after=/.test(l))).toBe(true);
    expect(plain(first.messages)).toEqual(await serverMessages(id));

    // Another page: the messages from Tether, then its resume (a rebuild of the waiting answer).
    const page = new Chat<UIMessage>({
      id,
      messages: await serverMessages(id),
      transport: new TetherChatTransport({ api: api(), body }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await page.resumeStream();
    await until(() => page.status === 'ready', 15_000, 'the resume');
    const call = callOf(assistants(page)[0])!;
    expect(call.state).toBe('approval-requested');
    await page.addToolApprovalResponse({ id: call.approval!.id, approved: true });
    await until(() => page.status === 'ready' && callOf(assistants(page)[0])?.state === 'output-available' && textOf(assistants(page)[0]).length > 0, 15_000, 'the answer');
    expect(textOf(assistants(page)[0])).toBe(await finalAnswer(id));
  });
  it('TetherChatTransport: the answer\'s stream cut before its first frame goes on from the approval, nothing shown twice', async () => {
    const id = threadName('aisdk-approval-cut-answer');
    const wire = new Wire();
    // The second POST is the answer: its response is cut before a byte of its body.
    wire.on((m, u) => m === 'POST' && u.endsWith('/chat'), (n) => (n === 1 ? { kind: 'cut', after: 0 } : { kind: 'pass' }));
    const transport = new TetherChatTransport({ api: api(), body, fetch: wire.fetch, backoff: { initialMs: 20, maxMs: 100 } });
    const chat = new Chat<UIMessage>({ id, transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
    const answer = await turn(chat, 'search, then cut', true);
    expect(wire.log.filter((l) => l.startsWith('GET'))).toHaveLength(1);
    expect(textOf(answer)).toBe(await finalAnswer(id));
    const held = plain(chat.messages);
    delete callOf(held[1])!.approval;
    expect(await serverMessages(id)).toEqual(held);
  });
  it('an approval whose answer was lost (the server took it, the page saw a 503), sent again, goes on: the run took it once', async () => {
    const id = threadName('aisdk-approval-again');
    const wire = new Wire();
    // The second POST is the approval's answer: it lands, its answer is lost.
    wire.on((m, u) => m === 'POST' && u.endsWith('/chat'), (n) => (n === 1 ? { kind: 'landed' } : { kind: 'pass' }));
    const transport = new DefaultChatTransport({ api: api(), body, fetch: wire.fetch });
    const chat = new Chat<UIMessage>({ id, transport, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
    await chat.sendMessage({ text: 'search, once' });
    await until(() => chat.status === 'ready' && callOf(assistants(chat)[0])?.state === 'approval-requested', 15_000, 'the approval asked');
    await chat.addToolApprovalResponse({ id: callOf(assistants(chat)[0])!.approval!.id, approved: true });
    await until(() => chat.status === 'error', 15_000, 'the lost answer');
    await chat.sendMessage(); // the page sends it again
    await until(() => chat.status === 'ready' && callOf(assistants(chat)[0])?.state === 'output-available' && textOf(assistants(chat)[0]).length > 0, 15_000, 'the answer');
    expect(chat.error).toBeUndefined();
    expect(textOf(assistants(chat)[0])).toBe(await finalAnswer(id));
    const held = plain(chat.messages);
    delete callOf(held[1])!.approval;
    expect(await serverMessages(id)).toEqual(held);
  });
});
