// The thread list: GET /v1/threads polled every few seconds (paused while
// the tab is hidden), with a live status badge per thread. The open
// thread's row follows its live store, so its badge changes at once.
//
// A thread made through the API has no title in its metadata, and a
// thread's status does not say whether its last run was aborted or
// stopped: the list learns both from the server, once per thread and
// change (its first user message; its last run's status from the final
// answer), a few requests at a time.

import type { Message, TetherClient, Thread } from '@tether/client';
import { h, icon, reconcile, setData, setText } from './dom.js';
import { ago, firstUserText, plainTitle, threadBadge } from './format.js';
import { isAuthError } from './chat.js';
import { TetherError } from '@tether/client';

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

/** Threads listed at first, and added by each "Show more". */
const PAGE = 100;

/** The most threads one listing request may ask for (the server's limit). */
const MAX_LIMIT = 1000;

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

  update(t: Thread, info: Learned | undefined, active: boolean, now: number): void {
    const title = threadTitle(t, info?.title);
    setText(this.title, title);
    this.el.title = title;
    setData(this.el, 'status', t.status);
    const badge = threadBadge(t.status, info?.lastRun?.at === t.updated_at ? info.lastRun.status : undefined);
    setText(this.badge, badge.label);
    setData(this.badge, 'status', badge.status);
    setText(this.time, ago(t.updated_at, now));
    this.el.classList.toggle('active', active);
    if (active) this.el.setAttribute('aria-current', 'page');
    else this.el.removeAttribute('aria-current');
  }
}

/**
 * A thread's title, as plain text: `metadata.title`, else its first user
 * message (`firstUser`, when known), else its id.
 */
export function threadTitle(t: Thread, firstUser?: string): string {
  const title = t.metadata?.title;
  if (typeof title === 'string' && plainTitle(title)) return plainTitle(title);
  if (firstUser && plainTitle(firstUser)) return plainTitle(firstUser);
  return t.id;
}

/** What the list learned about a thread from the server. */
interface Learned {
  /** Its first user message, once it has one. */
  title?: string;
  /** The updated_at it was last looked up at without finding one. */
  titleAt?: string;
  /** Its last run's status, as of the thread's updated_at `at`. */
  lastRun?: { at: string; status: string };
}

/** Lookups in flight at most, so that a long list does not flood the server. */
const LOOKUPS = 4;

/** The sidebar's list of threads. */
export class ThreadList {
  readonly el: HTMLElement;
  private readonly list = h('nav', { class: 'threads', testid: 'thread-list', attrs: { 'aria-label': 'Conversations' } });
  private readonly empty = h('div', { class: 'threads-empty' }, 'No conversations yet.');
  private readonly notice = h('div', { class: 'threads-notice', testid: 'server-notice', attrs: { role: 'status' } });
  private readonly moreBtn = h('button', { class: 'btn ghost threads-more', testid: 'threads-more', attrs: { type: 'button' } }, 'Show more');
  private readonly rows = new Map<string, Row>();
  private threads: Thread[] = [];
  private overlay: Thread | undefined;
  private readonly learned = new Map<string, Learned>();
  /** Threads this page deleted: never listed again, even by a poll that was under way. */
  private readonly dropped = new Set<string>();
  private readonly looking = new Set<string>();
  private queue: Thread[] = [];
  private active: string | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inflight = false;
  private again = false;
  private stopped = false;
  /** How many threads to list: the first page, and a page more for each "Show more". */
  private want = PAGE;
  /** Whether the server has threads beyond those listed. */
  private more = false;

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
    this.moreBtn.addEventListener('click', () => {
      this.want += PAGE;
      this.moreBtn.disabled = true;
      if (this.inflight) this.again = true; // the poll on its way asked for fewer: poll again once it is back
      else void this.refresh();
    });
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

  /** The open thread's state from its live store: fresher than the last poll, and it knows its runs and messages. */
  setLive(thread: Thread | undefined, runs: readonly { status: string }[] = [], messages: readonly Message[] = []): void {
    const prev = this.overlay;
    this.overlay = thread;
    if (thread) {
      const info = this.learned.get(thread.id) ?? {};
      const first = firstUserText(messages);
      if (first) info.title = first;
      const last = runs[runs.length - 1];
      if (last) info.lastRun = { at: thread.updated_at, status: last.status };
      this.learned.set(thread.id, info);
    }
    // Listed at once (a thread just made is not in the last poll's list),
    // and a poll to list it from the server: a poll under way, slow on a
    // slow network, would show it only once it is back.
    if (thread !== prev) this.render();
    if (thread && !this.threads.some((t) => t.id === thread.id)) void this.refresh();
  }

  /** Drops a thread this page deleted from the list. */
  drop(id: string): void {
    this.dropped.add(id);
    this.learned.delete(id);
    this.rows.delete(id);
    this.threads = this.threads.filter((t) => t.id !== id);
    if (this.overlay?.id === id) this.overlay = undefined;
    this.render();
  }

  /** Polls now (after creating a thread or a run). */
  async refresh(): Promise<void> {
    if (this.stopped || this.inflight) return;
    clearTimeout(this.timer);
    this.inflight = true;
    try {
      // The newest `want` threads, a page at a time (a thread that moved
      // up between two pages may come twice: it is listed once).
      const threads: Thread[] = [];
      const seen = new Set<string>();
      let cursor: string | undefined;
      do {
        const page = await this.client.listThreads({ limit: Math.min(this.want - threads.length, MAX_LIMIT), ...(cursor ? { cursor } : {}) });
        for (const t of page.threads) {
          if (seen.has(t.id) || this.dropped.has(t.id)) continue;
          seen.add(t.id);
          threads.push(t);
        }
        cursor = page.next_cursor ?? undefined;
      } while (cursor && threads.length < this.want);
      this.threads = threads;
      this.more = cursor !== undefined;
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
      // An answer (a 503 when the store is down, a 500) is not an unreachable server: say what it said.
      const answered = err instanceof TetherError && err.status > 0;
      const text = offline ? 'You are offline — retrying…' : answered ? `Server unavailable: ${err.message} — retrying…` : 'Server unreachable — retrying…';
      this.notice.replaceChildren(icon('alert'), h('span', {}, text));
      this.host.onReachable(false);
    } finally {
      this.inflight = false;
      this.moreBtn.disabled = false;
      const wait = this.again ? 0 : POLL_MS;
      this.again = false;
      if (!this.stopped && document.visibilityState !== 'hidden') this.timer = setTimeout(() => void this.refresh(), wait);
    }
  }

  private render(): void {
    const now = Date.now();
    const ov = this.overlay;
    let threads = this.threads.map((t) => (ov && t.id === ov.id && ov.updated_at >= t.updated_at ? ov : t));
    if (ov && !threads.some((t) => t.id === ov.id)) threads = [ov, ...threads];
    const nodes: Node[] = [];
    const listed = new Set<string>();
    for (const t of threads) {
      listed.add(t.id);
      let row = this.rows.get(t.id);
      if (!row) {
        row = new Row(t.id, (id) => this.host.onPick(id));
        this.rows.set(t.id, row);
      }
      row.update(t, this.learned.get(t.id), t.id === this.active, now);
      nodes.push(row.el);
      if (this.needsLookup(t)) this.lookup(t);
    }
    // A thread that left the list (deleted elsewhere, or past the threads
    // listed) leaves its row and what was learned of it behind: a tab kept
    // open for days would otherwise hold every thread it ever listed. One
    // that comes back gets a new row, and is looked up again.
    for (const id of this.rows.keys()) if (!listed.has(id)) this.rows.delete(id);
    for (const id of this.learned.keys()) if (!listed.has(id) && !this.looking.has(id)) this.learned.delete(id);
    if (nodes.length === 0) nodes.push(this.empty);
    if (this.more) nodes.push(this.moreBtn);
    reconcile(this.list, nodes);
  }

  /** Whether the list should ask the server about a thread: a title to find, or a last run whose end to tell. */
  private needsLookup(t: Thread): boolean {
    if (t.last_offset === '-1' || this.looking.has(t.id)) return false;
    const info = this.learned.get(t.id);
    const titled = typeof t.metadata?.title === 'string' && !!plainTitle(t.metadata.title);
    const wantTitle = !titled && !info?.title && info?.titleAt !== t.updated_at;
    const wantRun = (t.status === 'error' || t.status === 'idle') && info?.lastRun?.at !== t.updated_at;
    return wantTitle || wantRun;
  }

  private lookup(t: Thread): void {
    this.looking.add(t.id);
    this.queue.push(t);
    this.pump();
  }

  private pump(): void {
    while (this.queue.length > 0 && this.looking.size - this.queue.length < LOOKUPS) {
      const t = this.queue.shift()!;
      void this.learn(t).finally(() => {
        this.looking.delete(t.id);
        this.pump();
        this.render();
      });
    }
  }

  private async learn(t: Thread): Promise<void> {
    const info = this.learned.get(t.id) ?? {};
    this.learned.set(t.id, info);
    try {
      const titled = typeof t.metadata?.title === 'string' && !!plainTitle(t.metadata.title);
      if (!titled && !info.title) {
        // The run's input messages come right after run.created: the first
        // page of the log's message.created events holds the first one.
        const path = `/v1/threads/${encodeURIComponent(t.id)}/events?after=-1&types=message.created`;
        const res = await this.client.request(path, { headers: { Accept: 'application/json' } });
        const page = (await res.json()) as { events?: { message?: Message }[] };
        const first = firstUserText((page.events ?? []).flatMap((e) => (e.message ? [e.message] : [])));
        if (first) info.title = first;
        else info.titleAt = t.updated_at;
      }
      if ((t.status === 'error' || t.status === 'idle') && info.lastRun?.at !== t.updated_at) {
        const fa = await this.client.finalAnswer(t.id);
        if (fa.status) info.lastRun = { at: t.updated_at, status: fa.status };
      }
    } catch {
      // The next poll tries again; the row shows what the thread says meanwhile.
    }
  }
}
