// One message of the transcript and its parts: text, a collapsible
// "Thinking" block for reasoning, tool cards, data. Views keep their nodes
// between updates and change only what changed, so a streaming message does
// not lose an opened "Thinking" block or a selection.

import type { DataPart, Message, Part, ReasoningPart, TextPart, ToolPart } from '@tether/client';
import { h, icon, reconcile, setData, setText } from './dom.js';
import { blocks, prettyJSON, spans } from './format.js';

interface PartView {
  readonly el: HTMLElement;
  readonly type: Part['type'];
  update(part: Part, streaming: boolean): void;
}

/** Renders message text: prose with `code` and **strong** spans, fenced code blocks. */
export function renderText(el: HTMLElement, text: string): void {
  const nodes: Node[] = [];
  for (const b of blocks(text)) {
    if (b.kind === 'code') {
      nodes.push(h('pre', { class: 'codeblock', attrs: { 'data-lang': b.lang || null } }, h('code', {}, b.text)));
      continue;
    }
    for (const s of spans(b.text)) {
      if (s.kind === 'text') nodes.push(document.createTextNode(s.text));
      else nodes.push(h(s.kind === 'code' ? 'code' : 'strong', {}, s.text));
    }
  }
  el.replaceChildren(...nodes);
}

class TextView implements PartView {
  readonly type = 'text';
  readonly el = h('div', { class: 'text', testid: 'text-part' });
  private text: string | undefined;

  update(part: Part, streaming: boolean): void {
    const p = part as TextPart;
    if (p.text !== this.text) {
      this.text = p.text;
      renderText(this.el, p.text);
    }
    this.el.classList.toggle('streaming', streaming);
  }
}

class ReasoningView implements PartView {
  readonly type = 'reasoning';
  private readonly label = h('span', { class: 'thinking-label' });
  private readonly preview = h('span', { class: 'thinking-preview' });
  private readonly body = h('div', { class: 'thinking-body' });
  readonly el = h(
    'details',
    { class: 'thinking', testid: 'thinking' },
    h('summary', {}, icon('spark'), this.label, this.preview, icon('chevron', 'icon chevron')),
    this.body,
  );

  update(part: Part, streaming: boolean): void {
    const p = part as ReasoningPart;
    setText(this.label, streaming ? 'Thinking…' : 'Thinking');
    this.el.classList.toggle('live', streaming);
    // While it streams, the closed block shows the latest words.
    setText(this.preview, streaming ? lastWords(p.text, 90) : '');
    setText(this.body, p.text);
  }
}

function lastWords(text: string, n: number): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length <= n ? t : `…${t.slice(t.length - n)}`;
}

class ToolView implements PartView {
  readonly type = 'tool';
  private readonly name = h('span', { class: 'tool-name', testid: 'tool-name' });
  private readonly preview = h('span', { class: 'tool-preview' });
  private readonly status = h('span', { class: 'pill', testid: 'tool-status' });
  private readonly input = h('pre', { class: 'json', testid: 'tool-input' });
  private readonly outLabel = h('div', { class: 'tool-label' });
  private readonly output = h('pre', { class: 'json', testid: 'tool-output' });
  private readonly outBox = h('div', { class: 'tool-section' }, this.outLabel, this.output);
  readonly el = h(
    'details',
    { class: 'tool', testid: 'tool-card' },
    h('summary', { class: 'tool-head' }, icon('tool'), this.name, this.preview, this.status, icon('chevron', 'icon chevron')),
    h('div', { class: 'tool-section' }, h('div', { class: 'tool-label' }, 'Input'), this.input),
    this.outBox,
  );

  update(part: Part): void {
    const p = part as ToolPart;
    setText(this.name, p.name);
    setData(this.el, 'status', p.status);
    setText(this.status, p.status === 'running' ? 'running' : p.status === 'error' ? 'failed' : 'done');
    setData(this.status, 'tone', p.status === 'running' ? 'busy' : p.status === 'error' ? 'bad' : 'good');
    // The input streams as text; once the call ends it is the parsed JSON.
    const streamingInput = p.input === null && p.status === 'running';
    const inputText = streamingInput || (p.input === null && p.input_text) ? (p.input_text ?? '') : prettyJSON(p.input);
    setText(this.input, inputText);
    this.input.classList.toggle('streaming', streamingInput);
    setText(this.preview, oneLine(streamingInput || p.input === null ? (p.input_text ?? '') : JSON.stringify(p.input)));
    const hasErr = p.error !== undefined && p.error !== null;
    const hasOut = 'output' in p && p.output !== undefined;
    this.outBox.hidden = !hasErr && !hasOut;
    setText(this.outLabel, hasErr ? 'Error' : 'Output');
    setText(this.output, hasErr ? prettyJSON(p.error) : hasOut ? prettyJSON(p.output) : '');
    this.output.classList.toggle('error', hasErr);
  }
}

function oneLine(s: string): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > 120 ? `${t.slice(0, 117)}…` : t;
}

class DataView implements PartView {
  readonly type = 'data';
  private readonly name = h('div', { class: 'tool-label' });
  private readonly body = h('pre', { class: 'json' });
  readonly el = h('div', { class: 'data', testid: 'data-part' }, this.name, this.body);

  update(part: Part): void {
    const p = part as DataPart;
    setText(this.name, p.name);
    setText(this.body, prettyJSON(p.data));
  }
}

function newPartView(type: Part['type']): PartView {
  switch (type) {
    case 'text':
      return new TextView();
    case 'reasoning':
      return new ReasoningView();
    case 'tool':
      return new ToolView();
    default:
      return new DataView();
  }
}

/** The view of one message; {@link update} is cheap when nothing changed. */
export class MessageView {
  readonly el: HTMLElement;
  private readonly parts: HTMLElement;
  private readonly note = h(
    'div',
    { class: 'recovered-note', testid: 'recovered-note', attrs: { title: 'The live stream dropped; this content was fetched from the server and is complete.' } },
    icon('refresh'),
    'Stream dropped — recovered',
  );
  private views: PartView[] = [];
  private typing: HTMLElement | undefined;
  private last: Message | undefined;
  private lastRecovered = false;

  constructor(readonly id: string, role: Message['role']) {
    this.parts = h('div', { class: 'parts' });
    this.note.hidden = true;
    const body = h('div', { class: 'msg-body' }, this.note, this.parts);
    this.el =
      role === 'assistant'
        ? h('article', { class: 'msg assistant', testid: 'message', attrs: { 'data-role': role } }, h('div', { class: 'avatar', attrs: { 'aria-hidden': 'true' } }, 'T'), body)
        : h('article', { class: `msg ${role}`, testid: 'message', attrs: { 'data-role': role } }, body);
    this.el.dataset.messageId = id;
  }

  update(m: Message, recovered: boolean): void {
    if (m === this.last && recovered === this.lastRecovered) return;
    this.last = m;
    this.lastRecovered = recovered;
    setData(this.el, 'status', m.status);
    this.note.hidden = !recovered;
    const running = m.status === 'running' || m.status === 'pending';
    const next: PartView[] = [];
    m.parts.forEach((part, i) => {
      let v = this.views[i];
      if (!v || v.type !== part.type) v = newPartView(part.type);
      v.update(part, running && i === m.parts.length - 1);
      next.push(v);
    });
    this.views = next;
    if (running && m.parts.length === 0 && m.role === 'assistant') {
      this.typing ??= h('div', { class: 'typing', attrs: { 'aria-label': 'The agent is starting' } }, h('span'), h('span'), h('span'));
      reconcile(this.parts, [this.typing]);
      return;
    }
    reconcile(
      this.parts,
      next.map((v) => v.el),
    );
  }
}
