// A small front end built on TetherAgent (the page the AG-UI page test
// loads): it starts a demo run, or, when the URL's hash names a thread
// already, joins that thread's current run, and shows the last answer.
import type { Message } from '@ag-ui/client';
import { TetherAgent } from '../../../../client/src/ag-ui.js';

const $ = (id: string) => document.getElementById(id)!;
const params = new URLSearchParams(location.search);
const threadId = location.hash.slice(1) || `page-${Date.now().toString(36)}`;
const joining = location.hash.length > 1;
location.hash = threadId;

const agent = new TetherAgent({ url: `${location.origin}/v1/ag-ui/demo`, threadId });

function render(messages: readonly Message[]): void {
  const answers = messages.filter((m) => m.role === 'assistant');
  $('answer').textContent = (answers.at(-1) as { content?: string } | undefined)?.content ?? '';
  $('answer').dataset.count = String(answers.length);
}

agent.subscribe({
  onMessagesChanged: ({ messages }) => render(messages),
  onRunStartedEvent: () => void ($('status').textContent = 'running'),
  onRunFinishedEvent: ({ outcome }) => void ($('status').textContent = outcome === 'success' ? 'done' : outcome),
  onRunErrorEvent: ({ event }) => void ($('status').textContent = `error: ${event.message}`),
});

if (joining) {
  void agent.connectAgent();
} else {
  agent.addMessage({ id: `u-${threadId}`, role: 'user', content: 'What does a durable stream keep?' });
  void agent.runAgent({ forwardedProps: { demo: { tokens: Number(params.get('tokens') ?? 40), delay_ms: Number(params.get('delay_ms') ?? 20) } } });
}
