// A small useChat page for the browser tests: the real useChat with
// resume, over the unmodified DefaultChatTransport or TetherChatTransport
// (?transport=tether), the chat and the demo's pace from the query
// (?chat=&tokens=&delay_ms=, and &approve=1 for a tool call that waits for
// its approval: the AI SDK's approval flow, with Allow and Deny buttons).
// Served on the server's origin by the test.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type ChatTransport, type UIMessage } from 'ai';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { TetherChatTransport } from '../../src/ai-sdk.js';

const q = new URLSearchParams(location.search);
const chatId = q.get('chat') ?? 'page-chat';
const api = '/v1/ai-sdk/demo/chat';
const approve = q.get('approve') === '1';
const body = { metadata: { demo: { tokens: Number(q.get('tokens') ?? 80), delay_ms: Number(q.get('delay_ms') ?? 30), approve } } };

type Answer = (a: { id: string; approved: boolean; reason?: string }) => void;

declare global {
  interface Window {
    transport: ChatTransport<UIMessage>;
  }
}

function Part({ part, answer }: { part: UIMessage['parts'][number]; answer: Answer }) {
  if (part.type === 'text') return <p data-testid="text-part">{part.text}</p>;
  if (part.type === 'reasoning') return <details data-testid="reasoning-part"><summary>Thinking</summary>{part.text}</details>;
  if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
    const p = part as { type: string; state: string; input?: unknown; output?: unknown; approval?: { id: string; reason?: string } };
    return (
      <div data-testid="tool-part" data-type={p.type} data-state={p.state}>
        {p.type}: {JSON.stringify(p.input)} → {JSON.stringify(p.output ?? null)}
        {p.state === 'output-denied' && <span data-testid="denied"> denied: {p.approval?.reason}</span>}
        {p.state === 'approval-requested' && p.approval && (
          <>
            <button data-testid="allow" type="button" onClick={() => answer({ id: p.approval!.id, approved: true })}>
              Allow
            </button>
            <button data-testid="deny" type="button" onClick={() => answer({ id: p.approval!.id, approved: false, reason: 'Not from the page.' })}>
              Deny
            </button>
          </>
        )}
      </div>
    );
  }
  return null;
}

function App({ initial, transport }: { initial: UIMessage[]; transport: ChatTransport<UIMessage> }) {
  window.transport = transport;
  const { messages, sendMessage, status, error, addToolApprovalResponse } = useChat({
    id: chatId,
    messages: initial,
    transport,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [text, setText] = useState('');
  return (
    <main>
      <div data-testid="status">{status}</div>
      {error && <div data-testid="error">{error.message}</div>}
      {messages.map((m) => (
        <div key={m.id} data-testid="message" data-role={m.role} data-id={m.id}>
          {m.parts.map((p, i) => (
            <Part key={i} part={p} answer={(a) => void addToolApprovalResponse(a)} />
          ))}
        </div>
      ))}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void sendMessage({ text });
          setText('');
        }}
      >
        <input data-testid="input" value={text} onChange={(e) => setText(e.target.value)} />
        <button data-testid="send" type="submit">Send</button>
        <button data-testid="stop" type="button" onClick={() => void fetch(`${api}/${chatId}/stop`, { method: 'POST' })}>
          Stop
        </button>
      </form>
    </main>
  );
}

// As the quick starts of docs/ai-sdk.md load a chat: its messages, and the
// offset they are as of for the resume.
let initial: UIMessage[];
let transport: ChatTransport<UIMessage>;
if (q.get('transport') === 'tether') {
  const tether = new TetherChatTransport({ api, body });
  initial = await tether.loadMessages(chatId);
  transport = tether;
} else {
  const res = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`);
  const loadedAt = res.headers.get('Tether-Offset');
  initial = (await res.json()) as UIMessage[];
  transport = new DefaultChatTransport({
    api,
    body,
    prepareReconnectToStreamRequest: ({ id }) => ({ api: `${api}/${encodeURIComponent(id)}/stream${loadedAt ? `?after=${loadedAt}` : ''}` }),
  });
}
createRoot(document.getElementById('root')!).render(<App initial={initial} transport={transport} />);
