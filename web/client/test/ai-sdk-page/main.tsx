// A small useChat page for the browser tests: the real useChat with
// resume, over the unmodified DefaultChatTransport or TetherChatTransport
// (?transport=tether), the chat and the demo's pace from the query
// (?chat=&tokens=&delay_ms=). Served on the server's origin by the test.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, type ChatTransport, type UIMessage } from 'ai';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { TetherChatTransport } from '../../src/ai-sdk.js';

const q = new URLSearchParams(location.search);
const chatId = q.get('chat') ?? 'page-chat';
const api = '/v1/ai-sdk/demo/chat';
const body = { metadata: { demo: { tokens: Number(q.get('tokens') ?? 80), delay_ms: Number(q.get('delay_ms') ?? 30) } } };

declare global {
  interface Window {
    transport: ChatTransport<UIMessage>;
  }
}

function Part({ part }: { part: UIMessage['parts'][number] }) {
  if (part.type === 'text') return <p data-testid="text-part">{part.text}</p>;
  if (part.type === 'reasoning') return <details data-testid="reasoning-part"><summary>Thinking</summary>{part.text}</details>;
  if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
    const p = part as { type: string; state: string; input?: unknown; output?: unknown };
    return (
      <div data-testid="tool-part" data-type={p.type} data-state={p.state}>
        {p.type}: {JSON.stringify(p.input)} → {JSON.stringify(p.output ?? null)}
      </div>
    );
  }
  return null;
}

function App({ initial, transport }: { initial: UIMessage[]; transport: ChatTransport<UIMessage> }) {
  window.transport = transport;
  const { messages, sendMessage, status, error } = useChat({ id: chatId, messages: initial, transport, resume: true });
  const [text, setText] = useState('');
  return (
    <main>
      <div data-testid="status">{status}</div>
      {error && <div data-testid="error">{error.message}</div>}
      {messages.map((m) => (
        <div key={m.id} data-testid="message" data-role={m.role} data-id={m.id}>
          {m.parts.map((p, i) => (
            <Part key={i} part={p} />
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
