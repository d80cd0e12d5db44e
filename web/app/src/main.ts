// Tether's chat page. The layout: a sidebar of threads, the chat pane of the
// open thread (URL hash #/t/<id>, so a reload reopens it) and a composer.
// Everything live comes from @tether/client.

import { TetherClient, TetherError, type ConnectionState, type Run, type RunRequest, type StoreView, type Thread } from '@tether/client';
import { askForToken, authReason, tokenSource } from './auth.js';
import { ChatView, isAuthError, newKey } from './chat.js';
import { BUSY, Composer } from './composer.js';
import { h, icon, setData, setText } from './dom.js';
import { firstUserText, optionsFromQuery, runMetadata, titleFrom, type RunOptions } from './format.js';
import { ThreadList, threadTitle } from './sidebar.js';

const CONNECTION_LABEL: Record<ConnectionState, string> = {
  connecting: 'Connecting…',
  open: 'Live',
  reconnecting: 'Reconnecting…',
  closed: 'Disconnected',
};

class App {
  private readonly client = new TetherClient({ baseUrl: '', token: tokenSource() });
  private readonly threads: ThreadList;
  private readonly chat: ChatView;
  private readonly composer: Composer;
  private readonly title = h('h2', { class: 'pane-title', testid: 'thread-title' });
  private readonly conn = h('span', { class: 'conn', testid: 'connection', attrs: { role: 'status', 'aria-live': 'polite' } }, h('span', { class: 'dot' }), h('span', { class: 'conn-label' }));
  private readonly root: HTMLElement;
  private reachable = true;
  private authAsked = false;
  /**
   * The last message whose send failed, with its Idempotency-Key: its run
   * may exist all the same (a 503 or a network error does not say), so
   * sending the same message to the same thread again reuses the key and
   * the server answers with that run instead of making a second.
   */
  private unsent: { threadId: string; body: string; key: string } | undefined;

  constructor(mount: HTMLElement) {
    const onAuthError = (err: TetherError) => this.authError(err);
    this.threads = new ThreadList(this.client, {
      onReachable: (ok) => this.setReachable(ok),
      onAuthError,
      onPick: () => this.root.classList.remove('nav-open'),
    });
    this.chat = new ChatView(
      { client: this.client, onAuthError, onThread: (t, v) => this.onThread(t, v), focusComposer: () => this.composer.focus(), retry: (run) => this.retry(run) },
      this.client,
      (s) => this.composer.sendText(s),
    );
    this.composer = new Composer({ send: (t, o) => this.send(t, o), stop: () => this.chat.stop() }, optionsFromQuery(location.search));

    const menu = h('button', { class: 'btn ghost icon-only menu', testid: 'menu', attrs: { type: 'button', 'aria-label': 'Conversations' }, on: { click: () => this.root.classList.toggle('nav-open') } }, icon('menu'));
    const scrim = h('div', { class: 'scrim', on: { click: () => this.root.classList.remove('nav-open') } });
    this.root = h(
      'div',
      { class: 'app' },
      this.threads.el,
      scrim,
      h(
        'main',
        { class: 'pane' },
        h('header', { class: 'pane-head' }, menu, this.title, this.conn),
        this.chat.el,
        h('div', { class: 'composer-wrap' }, this.composer.el),
      ),
    );
    mount.replaceChildren(this.root);
    addEventListener('hashchange', () => this.route());
    addEventListener('online', () => this.renderConnection());
    addEventListener('offline', () => {
      this.chat.offline();
      this.renderConnection();
    });
    this.route();
    this.threads.start();
  }

  private route(): void {
    const m = /^#\/t\/(.+)$/.exec(location.hash);
    let id: string | undefined;
    if (m) {
      try {
        id = decodeURIComponent(m[1]!);
      } catch {
        id = undefined;
      }
    }
    this.chat.show(id);
    this.threads.setActive(id);
    this.root.classList.remove('nav-open');
    if (!id) {
      setText(this.title, 'New chat');
      document.title = 'Tether';
      this.composer.setActive(false, false);
      this.composer.focus();
    }
    this.renderConnection();
  }

  private send(text: string, o: RunOptions): Promise<void> {
    const metadata = runMetadata(o);
    const body = {
      ...(o.agent ? { agent: o.agent } : {}),
      input: { messages: [{ role: 'user' as const, content: text }] },
      ...(metadata ? { metadata } : {}),
    };
    return this.submit(text, body);
  }

  /**
   * Sends a failed or aborted run's input again as a new run (its Retry):
   * the same messages, with the agent and settings of the composer as set
   * now, as Send would: after a failure a person changes the agent or a
   * setting and tries again, and the options panel shows what the next run
   * gets. With an Idempotency-Key of its own, as the run's key would only
   * hand back the run that failed (after a lost answer the page sends
   * again with the same key, and gets the run the server aborted when it
   * restarted).
   */
  private retry(run: Run): void {
    const messages = run.input.messages.map((m) => ({ role: m.role, content: m.content, ...(m.metadata ? { metadata: m.metadata } : {}) }));
    if (messages.length === 0) return;
    const text = messages.map((m) => m.content).join('\n\n');
    const o = this.composer.options();
    const metadata = runMetadata(o);
    const body = { ...(o.agent ? { agent: o.agent } : {}), input: { messages }, ...(metadata ? { metadata } : {}) };
    this.composer.resend(() => this.submit(text, body, newKey()));
  }

  /**
   * Starts a run of `body` on the open thread, or on a new one titled by
   * `text`, which is shown on its way. `fresh`: the Idempotency-Key of a
   * Retry, which never takes the key of a send whose answer was lost: the
   * same message with the same options would get that run back.
   */
  private async submit(text: string, body: RunRequest, fresh?: string): Promise<void> {
    let made: string | undefined; // the thread this send created, if it did
    this.chat.sending(text);
    try {
      // A thread that does not exist (deleted while open) gets no run: the message starts a new one.
      let tid = this.chat.gone ? undefined : this.chat.threadId;
      if (!tid) {
        const thread = await this.client.createThread({ metadata: { title: titleFrom(text) } });
        tid = made = thread.id;
        this.chat.show(tid); // before the hash changes, so route() finds it open
        location.hash = `#/t/${encodeURIComponent(tid)}`;
      }
      const json = JSON.stringify(body);
      const u = this.unsent;
      const key = fresh ?? (u && u.threadId === tid && u.body === json ? u.key : newKey());
      this.unsent = { threadId: tid, body: json, key };
      await this.chat.startRun(body, key);
      this.unsent = undefined;
      void this.threads.refresh();
    } catch (err) {
      this.chat.sending(undefined);
      if (made && refused(err)) await this.discard(made);
      if (isAuthError(err)) this.authError(err);
      // Another tab (or program) started a run this page has not heard of yet.
      if (err instanceof TetherError && err.code === 'run_active') throw new Error(BUSY);
      throw err;
    }
  }

  /**
   * Deletes a thread made for a first message that the server refused:
   * it holds nothing, and a chat app does not keep an empty conversation
   * for a message that was not sent. The page goes back to a new chat
   * (in place of the thread's entry in the history), the message stays in
   * the box with the error under it. If the delete fails the thread stays
   * listed, as it is.
   */
  private async discard(tid: string): Promise<void> {
    this.unsent = undefined;
    if (this.chat.threadId === tid) {
      history.replaceState(null, '', '#/');
      this.route();
    }
    try {
      await this.client.deleteThread(tid);
      this.threads.drop(tid);
    } catch {
      // Still there: the list shows it, and it can be opened and used.
    }
  }

  private onThread(thread: Thread | undefined, v: StoreView | undefined): void {
    this.threads.setLive(thread, v?.runs, v?.messages);
    if (thread) {
      const t = threadTitle(thread, v ? firstUserText(v.messages) : undefined);
      setText(this.title, t);
      document.title = `${t} — Tether`;
    } else if (v) {
      // Loading, or deleted (here, in another tab, through the API): the tab no longer names it.
      setText(this.title, v.threadId ?? '');
      document.title = 'Tether';
    }
    const active = thread ? v?.activeRun : undefined; // none in a thread that is not loaded, or deleted
    this.composer.setActive(!!active, !!active?.cancel_requested_at, active?.status === 'waiting' && !active.cancel_requested_at);
    this.renderConnection();
  }

  private setReachable(ok: boolean): void {
    const back = ok && !this.reachable;
    this.reachable = ok;
    if (back) this.chat.nudge(); // the server is back: resume the stream now, not after the backoff
    this.renderConnection();
  }

  private renderConnection(): void {
    const v = this.chat.view;
    const state: ConnectionState = v ? v.connection : this.reachable ? 'open' : 'reconnecting';
    const offline = typeof navigator !== 'undefined' && navigator.onLine === false;
    setData(this.conn, 'state', state);
    setData(this.conn, 'offline', offline ? 'true' : undefined);
    let label = v ? CONNECTION_LABEL[state] : this.reachable ? 'Connected' : 'Server unreachable';
    if (offline && state !== 'open') label = 'Offline — will resume';
    if (v?.recovery === 'recovering' && state !== 'open') label = 'Recovering from the server…';
    setText(this.conn.querySelector('.conn-label')!, label);
  }

  private authError(err: TetherError): void {
    if (this.authAsked) return;
    this.authAsked = true;
    this.threads.stop();
    askForToken(authReason(err), err);
  }
}

/**
 * Whether the server refused a request (4xx): nothing of it was done, so a
 * run it was to create does not exist. Not a 5xx or no answer, after which
 * the run may exist all the same.
 */
function refused(err: unknown): boolean {
  return err instanceof TetherError && err.status >= 400 && err.status < 500;
}

new App(document.getElementById('app')!);
