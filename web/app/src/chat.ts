// The chat pane: the transcript of the selected thread, kept in sync by a
// LiveThread of @tether/client (snapshot first, then every event once,
// resumed after drops, recovered from the server when the stream fails).

import type { LiveThread, Message, Run, StoreView, TetherClient, Thread } from '@tether/client';
import { TetherError } from '@tether/client';
import { h, reconcile, setText } from './dom.js';
import { RunView, type RunHost } from './run.js';

/** What the chat pane tells the rest of the page. */
export interface ChatHost extends RunHost {
  /** The followed thread changed (status, title) or another was opened. */
  onThread(thread: Thread | undefined, view: StoreView | undefined): void;
}

const SUGGESTIONS = ['What is a durable stream?', 'How do I resume an SSE stream after a drop?', 'Compare polling and server-sent events'];

/** The transcript of one thread, or the welcome screen when none is open. */
export class ChatView {
  readonly el: HTMLElement;
  private live: LiveThread | undefined;
  private unsubscribe: (() => void) | undefined;
  private runs = new Map<string, RunView>();
  private readonly list = h('div', { class: 'runs' });
  private readonly status = h('div', { class: 'pane-status', testid: 'pane-status' });
  private readonly welcome: HTMLElement;
  private readonly empty = h('div', { class: 'empty-thread' }, 'No messages yet. Say something below.');
  private readonly pendingText = h('div', { class: 'text' });
  /** The message on its way: shown from Send until its run shows (or the send fails). */
  private readonly pending = h(
    'article',
    { class: 'msg user pending', testid: 'pending-message', attrs: { 'aria-busy': 'true' } },
    h('div', { class: 'msg-body' }, h('div', { class: 'parts' }, this.pendingText), h('div', { class: 'pending-note' }, 'Sending…')),
  );
  private frame = 0;
  private firstPaint = true;
  /** A run this page started, to scroll to once it shows: a person who sends wants to see what they sent. */
  private reveal: string | undefined;

  constructor(
    private readonly host: ChatHost,
    private readonly client: TetherClient,
    onSuggestion: (text: string) => void,
  ) {
    this.welcome = h(
      'div',
      { class: 'welcome', testid: 'welcome' },
      h('div', { class: 'welcome-mark', attrs: { 'aria-hidden': 'true' } }, 'T'),
      h('h1', {}, 'What can I help with?'),
      h('p', {}, 'Answers stream from a durable log: reload the page, lose the network or restart the server — nothing is lost, nothing repeats.'),
      h(
        'div',
        { class: 'chips' },
        ...SUGGESTIONS.map((s) => h('button', { class: 'chip', attrs: { type: 'button' }, on: { click: () => onSuggestion(s) } }, s)),
      ),
    );
    this.el = h('div', { class: 'transcript', testid: 'transcript' }, h('div', { class: 'column' }, this.welcome, this.status, this.list, this.pending));
    this.status.hidden = true;
    this.pending.hidden = true;
  }

  /** The id of the thread shown, if any. */
  get threadId(): string | undefined {
    return this.live?.id;
  }

  /**
   * Whether the thread shown does not exist: never did, or was deleted
   * (while open, its stream ends with not_found).
   */
  get gone(): boolean {
    return this.live?.store.getState().error?.code === 'not_found';
  }

  /** The store view of the thread shown. */
  get view(): StoreView | undefined {
    return this.live?.store.getState();
  }

  /** Shows a thread (undefined: the welcome screen). Showing the same thread again does nothing. */
  show(threadId: string | undefined): void {
    if (threadId === this.live?.id && threadId !== undefined) return;
    this.unsubscribe?.();
    this.live?.close();
    this.live = undefined;
    this.runs = new Map();
    this.list.replaceChildren();
    this.firstPaint = true;
    this.reveal = undefined;
    this.welcome.hidden = threadId !== undefined;
    this.showStatus(threadId ? 'Loading…' : undefined);
    if (threadId === undefined) {
      this.host.onThread(undefined, undefined);
      return;
    }
    const live = this.client.followThread(threadId);
    this.live = live;
    this.unsubscribe = live.store.subscribe(() => this.schedule());
    this.schedule();
  }

  /**
   * Shows a message on its way below the transcript (undefined: hides it).
   * It goes once its run shows, after {@link startRun}.
   */
  sending(text: string | undefined): void {
    const was = this.pending.hidden;
    this.pending.hidden = text === undefined;
    if (this.pending.hidden !== was) this.schedule(); // Retry is not offered while a message is on its way
    setText(this.pendingText, text ?? '');
    if (text !== undefined) {
      this.welcome.hidden = true;
      this.el.scrollTop = this.el.scrollHeight;
    } else if (!this.live) this.welcome.hidden = false;
  }

  /** Starts a run on the thread shown; `key` is its Idempotency-Key. */
  async startRun(body: Parameters<LiveThread['startRun']>[0], key: string): Promise<Run> {
    const live = this.live;
    if (!live) throw new Error('no thread is open');
    const run = await live.startRun(body, { idempotencyKey: key });
    if (this.live === live) {
      this.reveal = run.id;
      this.schedule(); // its events may be here already
    } else this.sending(undefined);
    return run;
  }

  /** Asks to cancel the active run. */
  async stop(): Promise<void> {
    await this.live?.cancel();
  }

  /** The server is reachable again: skip the stream's backoff wait. */
  nudge(): void {
    const sub = this.live?.subscription;
    if (sub?.state === 'reconnecting') sub.reconnect();
  }

  /**
   * The browser says it lost the network: drop the stream now. Its
   * connection is most likely dead, and the stall detector would take three
   * heartbeats (45 s by default) to notice; the client retries, and resumes
   * from its last offset as soon as the browser is back `online`.
   */
  offline(): void {
    const sub = this.live?.subscription;
    if (sub?.state === 'open' || sub?.state === 'connecting') sub.reconnect();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private showStatus(text: string | undefined, tone: 'info' | 'bad' = 'info'): void {
    this.status.hidden = text === undefined;
    this.status.dataset.tone = tone;
    setText(this.status, text ?? '');
  }

  private render(): void {
    const live = this.live;
    if (!live) return;
    const v = live.store.getState();
    const err = v.error;
    if (err && (err.status === 401 || err.status === 403)) this.host.onAuthError(err);
    if (!v.loaded || this.gone) {
      if (this.gone) this.showStatus('This conversation does not exist, or it was deleted.', 'bad');
      else if (err) this.showStatus(`Could not load this conversation: ${err.message}`, 'bad');
      if (this.runs.size > 0) {
        // Deleted while open: what it showed is gone from the server too.
        this.runs = new Map();
        this.list.replaceChildren();
      }
      this.host.onThread(undefined, v);
      return;
    }
    this.showStatus(undefined);
    const scroller = this.el;
    // At the end already, or a run just sent from here: follow the end.
    // Someone reading further up is left where they are.
    const reveal = this.reveal !== undefined && v.runs.some((r) => r.id === this.reveal);
    if (reveal) {
      this.reveal = undefined;
      this.sending(undefined); // the message sent is in the transcript now
    }
    const stick = this.firstPaint || reveal || scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;

    const byRun = new Map<string, Message[]>();
    for (const m of v.messages) {
      const list = byRun.get(m.run_id);
      if (list) list.push(m);
      else byRun.set(m.run_id, [m]);
    }
    const nodes: Node[] = [];
    // Retry is offered on the last run only, once nothing runs and nothing is on its way.
    const lastRun = v.activeRun || !this.pending.hidden ? undefined : v.runs[v.runs.length - 1];
    for (const run of v.runs) {
      let rv = this.runs.get(run.id);
      if (!rv) {
        rv = new RunView(run.id, this.host);
        this.runs.set(run.id, rv);
      }
      rv.update(run, byRun.get(run.id) ?? [], v.recoveredRuns.has(run.id), v.recoveredMessages, run === lastRun);
      nodes.push(rv.el);
    }
    if (v.runs.length === 0) nodes.push(this.empty);
    reconcile(this.list, nodes);
    this.host.onThread(v.thread, v);
    if (stick) scroller.scrollTop = scroller.scrollHeight;
    this.firstPaint = false;
  }
}

/** A new Idempotency-Key. */
export function newKey(): string {
  return globalThis.crypto?.randomUUID?.() ?? `k${Date.now().toString(36)}${Math.random().toString(36).slice(2)}`;
}

/** Whether an error means the token is missing or not good enough. */
export function isAuthError(err: unknown): err is TetherError {
  return err instanceof TetherError && (err.status === 401 || err.status === 403);
}
