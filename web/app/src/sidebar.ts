// The thread list: GET /v1/threads polled every few seconds (paused while
// the tab is hidden), with a live status badge per thread. The open
// thread's row follows its live store, so its badge changes at once.

import type { TetherClient, Thread } from '@tether/client';
import { h, icon, reconcile, setData, setText } from './dom.js';
import { ago, threadStatusLabel } from './format.js';
import { isAuthError } from './chat.js';
import type { TetherError } from '@tether/client';

/** What the list tells the page. */
export interface ThreadListHost {
  /** Whether the server answered the last poll. */
  onReachable(ok: boolean): void;
  /** A 401 or 403. */
  onAuthError(err: TetherError): void;
  /** The user picked a thread, or "New chat" (undefined). */
  onPick(threadId: string | undefined): void;
}

const POLL_MS = 2000;

class Row {
  readonly el: HTMLAnchorElement;
  private readonly title = h('span', { class: 'thread-title' });
  private readonly badge = h('span', { class: 'badge', testid: 'thread-status' });
  private readonly time = h('span', { class: 'thread-time' });

  constructor(readonly id: string, onPick: (id: string) => void) {
    this.el = h(
      'a',
      { class: 'thread', testid: 'thread-item', attrs: { href: `#/t/${encodeURIComponent(id)}` }, on: { click: () => onPick(id) } },
      h('span', { class: 'thread-line' }, this.title, this.badge),
      this.time,
    );
    this.el.dataset.threadId = id;
  }

  update(t: Thread, active: boolean, now: number): void {
    const title = threadTitle(t);
    setText(this.title, title);
    this.el.title = title;
    setData(this.el, 'status', t.status);
    setText(this.badge, threadStatusLabel(t.status));
    setData(this.badge, 'status', t.status);
    setText(this.time, ago(t.updated_at, now));
    this.el.classList.toggle('active', active);
    if (active) this.el.setAttribute('aria-current', 'page');
    else this.el.removeAttribute('aria-current');
  }
}

/** A thread's title: `metadata.title`, else its id. */
export function threadTitle(t: Thread): string {
  const title = t.metadata?.title;
  return typeof title === 'string' && title.trim() ? title : t.id;
}

/** The sidebar's list of threads. */
export class ThreadList {
  readonly el: HTMLElement;
  private readonly list = h('nav', { class: 'threads', testid: 'thread-list', attrs: { 'aria-label': 'Conversations' } });
  private readonly empty = h('div', { class: 'threads-empty' }, 'No conversations yet.');
  private readonly notice = h('div', { class: 'threads-notice', testid: 'server-notice', attrs: { role: 'status' } });
  private readonly rows = new Map<string, Row>();
  private threads: Thread[] = [];
  private overlay: Thread | undefined;
  private active: string | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inflight = false;
  private stopped = false;

  constructor(
    private readonly client: TetherClient,
    private readonly host: ThreadListHost,
  ) {
    this.notice.hidden = true;
    this.el = h(
      'aside',
      { class: 'sidebar', testid: 'sidebar' },
      h(
        'div',
        { class: 'sidebar-head' },
        h('a', { class: 'brand', attrs: { href: '#/' }, on: { click: () => host.onPick(undefined) } }, h('span', { class: 'brand-mark' }, 'T'), 'Tether'),
        h('a', { class: 'btn ghost new-chat', testid: 'new-thread', attrs: { href: '#/' }, on: { click: () => host.onPick(undefined) } }, icon('plus'), 'New chat'),
      ),
      this.notice,
      this.list,
    );
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') void this.refresh();
    });
  }

  /** Starts polling. */
  start(): void {
    void this.refresh();
  }

  /** Stops polling (the token prompt is up). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Marks the open thread. */
  setActive(id: string | undefined): void {
    this.active = id;
    this.render();
  }

  /** The open thread's state from its live store: fresher than the last poll. */
  setLive(thread: Thread | undefined): void {
    const prev = this.overlay;
    this.overlay = thread;
    if (thread && !this.threads.some((t) => t.id === thread.id)) void this.refresh();
    else if (thread !== prev) this.render();
  }

  /** Polls now (after creating a thread or a run). */
  async refresh(): Promise<void> {
    if (this.stopped || this.inflight) return;
    clearTimeout(this.timer);
    this.inflight = true;
    try {
      const page = await this.client.listThreads({ limit: 100 });
      this.threads = page.threads;
      this.notice.hidden = true;
      this.host.onReachable(true);
      this.render();
    } catch (err) {
      if (isAuthError(err)) {
        this.host.onAuthError(err);
        return;
      }
      this.notice.hidden = false;
      const offline = navigator.onLine === false;
      this.notice.replaceChildren(icon('alert'), h('span', {}, offline ? 'You are offline — retrying…' : 'Server unreachable — retrying…'));
      this.host.onReachable(false);
    } finally {
      this.inflight = false;
      if (!this.stopped && document.visibilityState !== 'hidden') this.timer = setTimeout(() => void this.refresh(), POLL_MS);
    }
  }

  private render(): void {
    const now = Date.now();
    const ov = this.overlay;
    let threads = this.threads.map((t) => (ov && t.id === ov.id && ov.updated_at >= t.updated_at ? ov : t));
    if (ov && !threads.some((t) => t.id === ov.id)) threads = [ov, ...threads];
    const nodes: Node[] = [];
    for (const t of threads) {
      let row = this.rows.get(t.id);
      if (!row) {
        row = new Row(t.id, (id) => this.host.onPick(id));
        this.rows.set(t.id, row);
      }
      row.update(t, t.id === this.active, now);
      nodes.push(row.el);
    }
    if (nodes.length === 0) nodes.push(this.empty);
    reconcile(this.list, nodes);
  }
}
