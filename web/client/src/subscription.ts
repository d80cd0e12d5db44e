// One resumable subscription over fetch-based SSE (protocol §5).

import { endReason, failure } from './control.js';
import { TetherError, errorFromResponse, retryAfterMs, toTetherError } from './errors.js';
import { SSEFrameTooLargeError, SSEParser, type SSEFrame } from './sse.js';
import { DEFAULT_MAX_BACKOFF_MS, backoffDelay, browserLifecycle, defaultTimers, type BackoffOptions, type Lifecycle, type Timers } from './timing.js';
import type { ConnectedInfo, Offset, Run, Snapshot, TetherEvent } from './types.js';
import { compareOffsets, isEventOffset, isTerminalMessageStatus, isTerminalRunStatus } from './types.js';

/** The connection state of a subscription, for a UI indicator. */
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/** Why a subscription closed. */
export type CloseReason =
  /** The followed run or message ended (its terminal event arrived, or the server showed it had ended). */
  | 'done'
  /** {@link Subscription.close} was called, or the signal aborted. */
  | 'closed'
  /** An error that retrying cannot fix (4xx, not an event stream, too many attempts). */
  | 'error';

/** Details given with each state change. */
export interface StatusInfo {
  /**
   * Which try this reconnect is since a connection was last open: 1 for the
   * first after a drop (of a healthy stream too) or a failed first connect,
   * then one more for each try that fails; 0 when first connecting and once
   * a connection opened. A UI can show it as "reconnecting (try 2)", and
   * the backoff grows with it. It is not the count of failed tries that
   * `maxAttempts` limits: after an open stream drops that count is one less.
   */
  attempt: number;
  /** Before a reconnect: how long the client waits first. */
  delayMs?: number;
  /** Why the last connection ended, if it ended by an error (a drop, a stall, a timeout). */
  error?: TetherError;
  /** When closed: why. */
  reason?: CloseReason;
}

/** Connection tuning, per client or per subscription. */
export interface ConnectionOptions {
  /** How long a connection may take to reach the `connected` frame. Defaults to 10 s. */
  readinessTimeoutMs?: number;
  /** A stream silent for this many heartbeats is dead and is reconnected. Defaults to 3. */
  stallHeartbeats?: number;
  /** The heartbeat assumed until the server's `connected` frame says. Defaults to 15 s. */
  heartbeatMs?: number;
  /** Reconnect backoff (see {@link BackoffOptions}). */
  backoff?: BackoffOptions;
  /** Give up (close with an error) after this many consecutive failed attempts. Defaults to Infinity. */
  maxAttempts?: number;
  /** Clock and timers. Defaults to the global ones. */
  timers?: Timers;
  /** `online` / `visibilitychange` signals. Defaults to the browser's; pass `null` for none. */
  lifecycle?: Lifecycle | null;
}

/** Callbacks of a subscription. They are never called after {@link Subscription.close}. */
export interface SubscriptionHandlers {
  /** Each event of the log, in order, once (events at or before the cursor are skipped). */
  onEvent?(event: TetherEvent): void;
  /**
   * A snapshot: the state before the events that follow. When
   * `snapshot.reset` is set the cursor could not be placed in the log and the
   * consumer must replace its state with it.
   */
  onSnapshot?(snapshot: Snapshot): void;
  /** The connection state changed (or a reconnect was scheduled). */
  onStatus?(state: ConnectionState, info: StatusInfo): void;
  /** The `connected` frame of each connection. */
  onConnected?(info: ConnectedInfo): void;
  /** The subscription closed on an error that retrying cannot fix. */
  onError?(error: TetherError): void;
}

/** Options of {@link TetherClient.subscribe}. */
export interface SubscribeOptions extends SubscriptionHandlers, ConnectionOptions {
  /**
   * Where to start: absent for a snapshot first and then every later event;
   * `"-1"` for the whole log from its first event; `"now"` for new events
   * only; an offset for every event after it.
   */
  after?: Offset;
  /** Keep only these event types (`?types=`); a run or message subscription still ends at its terminal event. */
  types?: string[];
  /** Closes the subscription when aborted. */
  signal?: AbortSignal;
}

/** What a subscription follows: a thread, a run, or one message of either. */
export type SubscribeTarget =
  | { threadId: string; runId?: undefined; messageId?: string }
  | { runId: string; threadId?: string; messageId?: string };

/** A live subscription. */
export interface Subscription {
  /** The connection state now. */
  readonly state: ConnectionState;
  /** The offset of the last event or snapshot received: the next Last-Event-ID. */
  readonly cursor: Offset | undefined;
  /** The run followed, once known (for {@link TetherClient.createRunStream}, from Content-Location). */
  readonly runId: string | undefined;
  /** Resolves once closed, with the reason (and the error, for `error`). */
  readonly closed: Promise<{ reason: CloseReason; error?: TetherError }>;
  /** Aborts the connection, cancels every timer and listener; no callback runs afterwards. */
  close(): void;
  /** Drops the current connection (or skips the backoff wait) and connects again at once. */
  reconnect(): void;
  /**
   * Moves the cursor forward to `offset` (never back, unless `force`), for a
   * consumer that got newer state elsewhere (a snapshot over REST): the next
   * connection resumes after it and events up to it are skipped.
   */
  setCursor(offset: Offset, force?: boolean): void;
}

/** @internal What a subscription needs from the client. */
export interface Transport {
  request(path: string, init: RequestInit): Promise<Response>;
  getRun(runId: string, signal?: AbortSignal): Promise<{ run: Run }>;
  /** The server ended the stream of `res` at its token's expiry. */
  tokenExpired?(res: Response): void;
  /** When the token should be refreshed, if it has an `exp`. */
  tokenRefreshTime?(): number | undefined;
  /** Refreshes the token ahead of its `exp`. */
  refreshToken?(): void;
}

/** @internal A POST /runs/stream to make before following the run. */
export interface CreateRun {
  threadId: string;
  body: unknown;
  idempotencyKey: string;
}

interface Outcome {
  error?: TetherError;
  fatal?: boolean;
  now?: boolean; // the server asked to reconnect
  tokenExpired?: boolean; // …because the token expired
  connected?: boolean;
  retryAfterMs?: number; // the answer's Retry-After: the least wait before the next try
  yielded: number;
}

const enc = encodeURIComponent;

// call runs a consumer's callback; what it throws is reported (as an
// uncaught error) instead of being taken for a broken connection.
function call(fn: () => void): void {
  try {
    fn();
  } catch (err) {
    queueMicrotask(() => {
      throw err;
    });
  }
}

/** @internal */
export class SubscriptionImpl implements Subscription {
  state: ConnectionState = 'connecting';
  cursor: Offset | undefined;
  runId: string | undefined;
  readonly closed: Promise<{ reason: CloseReason; error?: TetherError }>;

  private resolveClosed!: (v: { reason: CloseReason; error?: TetherError }) => void;
  private isClosed = false;
  private done = false;
  private attempt = 0;
  private failures = 0; // consecutive connections that failed before opening: for maxAttempts
  private ac: AbortController | undefined;
  private abortCause: TetherError | undefined;
  private readonly timers: Timers;
  private readonly live = new Set<unknown>(); // timer handles
  private wakeSleep: (() => void) | undefined;
  private unlisten: (() => void) | undefined;
  private heartbeatMs: number;
  private lastByteAt = 0;
  private msgRun: string | undefined;
  private immediate = false; // the current connection was dropped on purpose: reconnect without waiting
  private readonly offSignal: (() => void) | undefined;

  constructor(
    private readonly transport: Transport,
    private readonly target: SubscribeTarget | { threadId?: undefined; runId?: undefined; messageId?: undefined },
    private readonly opts: SubscribeOptions,
    private create?: CreateRun,
  ) {
    this.timers = opts.timers ?? defaultTimers;
    this.heartbeatMs = opts.heartbeatMs ?? 15_000;
    this.runId = target.runId;
    if (target.messageId && target.runId) this.msgRun = target.runId;
    this.closed = new Promise((r) => (this.resolveClosed = r));
    const lifecycle = opts.lifecycle === undefined ? browserLifecycle : opts.lifecycle;
    this.unlisten = lifecycle?.subscribe((reason) => this.wake(reason));
    const signal = opts.signal;
    if (signal) {
      const onAbort = () => this.close();
      signal.addEventListener('abort', onAbort, { once: true });
      this.offSignal = () => signal.removeEventListener('abort', onAbort);
      if (signal.aborted) queueMicrotask(onAbort);
    }
    // Start on the next microtask: the caller gets the subscription before
    // any callback runs, and a close() right away makes no request.
    queueMicrotask(() => {
      if (this.isClosed) return;
      call(() => this.opts.onStatus?.('connecting', { attempt: 0 }));
      void this.loop();
    });
  }

  close(): void {
    this.finish('closed');
  }

  reconnect(): void {
    if (this.isClosed) return;
    if (this.wakeSleep) this.wakeSleep();
    else {
      this.immediate = true;
      this.abort(new TetherError('aborted', 'reconnect requested'));
    }
  }

  setCursor(offset: Offset, force = false): void {
    if (force || compareOffsets(offset, this.cursor) > 0) this.cursor = offset;
  }

  private wake(_reason: string): void {
    if (this.isClosed) return;
    if (this.wakeSleep) {
      this.wakeSleep();
      return;
    }
    // An open stream that has been silent longer than a heartbeat is
    // probably dead (the laptop slept): do not wait for the stall timer.
    if (this.state === 'open' && this.timers.now() - this.lastByteAt > this.heartbeatMs + 1000) {
      this.immediate = true;
      this.abort(new TetherError('timeout', 'stream silent after the page woke up'));
    }
  }

  private emit(state: ConnectionState, info: Omit<StatusInfo, 'attempt'>): void {
    const changed = state !== this.state;
    this.state = state;
    if (changed || info.delayMs !== undefined) {
      call(() => this.opts.onStatus?.(state, { attempt: this.attempt, ...info }));
    }
  }

  private finish(reason: CloseReason, error?: TetherError): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.abort(new TetherError('aborted', 'subscription closed'));
    for (const h of this.live) this.timers.clearTimeout(h);
    this.live.clear();
    this.wakeSleep?.();
    this.unlisten?.();
    this.unlisten = undefined;
    this.offSignal?.();
    this.state = 'closed';
    if (error) call(() => this.opts.onError?.(error));
    call(() => this.opts.onStatus?.('closed', { attempt: this.attempt, reason, ...(error ? { error } : {}) }));
    this.resolveClosed(error ? { reason, error } : { reason });
  }

  private setTimer(fn: () => void, ms: number): unknown {
    const h = this.timers.setTimeout(() => {
      this.live.delete(h);
      fn();
    }, ms);
    this.live.add(h);
    return h;
  }

  private clearTimer(h: unknown): void {
    if (h === undefined) return;
    this.live.delete(h);
    this.timers.clearTimeout(h);
  }

  private abort(cause: TetherError): void {
    if (this.ac && !this.ac.signal.aborted) {
      this.abortCause = cause;
      // No reason: fetch implementations reject pending reads with it, and
      // a custom reason can surface as an unhandled rejection in some.
      this.ac.abort();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const h = this.setTimer(() => {
        this.wakeSleep = undefined;
        resolve();
      }, ms);
      this.wakeSleep = () => {
        this.wakeSleep = undefined;
        this.clearTimer(h);
        resolve();
      };
    });
  }

  private async loop(): Promise<void> {
    let asked = 0;
    while (!this.isClosed) {
      const o = await this.connect();
      if (this.isClosed) return;
      if (this.done) return this.finish('done');
      if (o.fatal) return this.finish('error', o.error);
      if (o.connected) this.attempt = 0;
      if (!o.error && o.connected && o.yielded === 0 && (await this.ended())) {
        // The server closes right after `connected` when the run or message
        // ended at or before the cursor.
        if (!this.isClosed) this.finish('done');
        return;
      }
      if (this.isClosed) return;
      if (this.immediate) {
        this.immediate = false;
        this.emit('reconnecting', { delayMs: 0, ...(o.error ? { error: o.error } : {}) });
        continue;
      }
      // Reconnect at once when the server asks, but not twice in a row
      // without an event between: a server that asks again and again gets
      // the backoff.
      if (o.now && (asked === 0 || o.yielded > 0)) {
        asked++;
        this.emit('reconnecting', { delayMs: 0 });
        continue;
      }
      asked = 0;
      this.attempt++;
      // A connection that opened and then dropped is not a failed attempt:
      // only the tries after it count towards maxAttempts.
      this.failures = o.connected ? 0 : this.failures + 1;
      const max = this.opts.maxAttempts ?? Infinity;
      if (this.failures >= max) {
        return this.finish('error', o.error ?? new TetherError('network', `gave up after ${this.failures} attempts`));
      }
      // Not before the server's Retry-After (a 429 or 503), up to the backoff's maxMs.
      const delayMs = Math.max(
        backoffDelay(this.attempt - 1, this.opts.backoff, () => this.timers.random()),
        Math.min(o.retryAfterMs ?? 0, this.opts.backoff?.maxMs ?? DEFAULT_MAX_BACKOFF_MS),
      );
      this.emit('reconnecting', { delayMs, ...(o.error ? { error: o.error } : {}) });
      await this.sleep(delayMs);
    }
  }

  // ended asks the server whether the followed run has ended.
  private async ended(): Promise<boolean> {
    const run = this.target.messageId ? this.msgRun : this.runId;
    if (!run) return false;
    // Aborted by close(), as a connection is.
    const ac = new AbortController();
    this.ac = ac;
    try {
      const { run: r } = await this.transport.getRun(run, ac.signal);
      return isTerminalRunStatus(r.status) && (this.done = true);
    } catch {
      return false;
    }
  }

  private buildRequest(): { path: string; init: RequestInit } {
    // Only CORS-safelisted headers and those the server allows in preflights
    // (Last-Event-ID, Idempotency-Key, Content-Type, Authorization): no Cache-Control.
    const headers: Record<string, string> = { Accept: 'text/event-stream' };
    if (this.create && !this.runId) {
      headers['Content-Type'] = 'application/json';
      headers['Idempotency-Key'] = this.create.idempotencyKey;
      return {
        path: `/v1/threads/${enc(this.create.threadId)}/runs/stream`,
        init: { method: 'POST', headers, body: JSON.stringify(this.create.body ?? {}) },
      };
    }
    const q = new URLSearchParams();
    if (this.target.messageId) q.set('message_id', this.target.messageId);
    if (this.opts.types?.length) q.set('types', this.opts.types.join(','));
    if (isEventOffset(this.cursor)) headers['Last-Event-ID'] = this.cursor;
    else if (this.cursor === '-1') q.set('after', '-1');
    else if (this.create) q.set('after', '-1'); // the POST's stream starts at the run's first event
    else if (this.opts.after) q.set('after', this.opts.after);
    const base = this.runId ? `/v1/runs/${enc(this.runId)}/events` : `/v1/threads/${enc(this.target.threadId!)}/events`;
    const qs = q.toString();
    return { path: qs ? `${base}?${qs}` : base, init: { method: 'GET', headers } };
  }

  // connect runs one connection until it ends.
  private async connect(): Promise<Outcome> {
    const o: Outcome = { yielded: 0 };
    const ac = new AbortController();
    this.ac = ac;
    this.abortCause = undefined;
    const readiness = this.setTimer(
      () => this.abort(new TetherError('timeout', 'no connected frame in time')),
      this.opts.readinessTimeoutMs ?? 10_000,
    );
    let stall: unknown;
    let refresh: unknown;
    const stallMs = () => (this.opts.stallHeartbeats ?? 3) * this.heartbeatMs;
    const checkStall = () => {
      const idle = this.timers.now() - this.lastByteAt;
      if (idle >= stallMs()) this.abort(new TetherError('timeout', `no data for ${this.opts.stallHeartbeats ?? 3} heartbeats`));
      else stall = this.setTimer(checkStall, stallMs() - idle);
    };
    let stop = false;
    try {
      const { path, init } = this.buildRequest();
      const res = await this.transport.request(path, { ...init, signal: ac.signal });
      if (this.isClosed) return o;
      if (!res.ok) {
        const err = await errorFromResponse(res);
        return { ...o, error: err, fatal: !err.retryable, retryAfterMs: retryAfterMs(res) };
      }
      if (this.create && !this.runId) {
        const loc = res.headers.get('content-location') ?? '';
        const m = /\/v1\/runs\/([^/?#]+)$/.exec(loc);
        if (m) this.runId = decodeURIComponent(m[1]!);
      }
      const ct = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
      if (ct !== 'text/event-stream' || !res.body) {
        res.body?.cancel().catch(() => {});
        return { ...o, fatal: true, error: new TetherError('protocol', `server answered ${ct || 'no content type'}, not an event stream`, res.status) };
      }
      const parser = new SSEParser((f) => {
        if (!stop) stop = this.frame(f, o, () => {
          this.clearTimer(readiness);
          this.lastByteAt = this.timers.now();
          this.clearTimer(stall);
          stall = this.setTimer(checkStall, stallMs());
          // Fetch the next token ahead of this one's exp, so that the
          // reconnect at the exp does not wait for it.
          const at = refresh === undefined ? this.transport.tokenRefreshTime?.() : undefined;
          if (at !== undefined) refresh = this.setTimer(() => this.transport.refreshToken?.(), Math.max(0, at - this.timers.now()));
        });
      });
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      try {
        while (!stop) {
          const { done, value } = await reader.read();
          if (this.isClosed) return o;
          if (done) break;
          this.lastByteAt = this.timers.now();
          parser.feed(decoder.decode(value, { stream: true }));
        }
      } finally {
        reader.cancel().catch(() => {});
      }
      if (o.tokenExpired) this.transport.tokenExpired?.(res);
      return o;
    } catch (err) {
      if (this.isClosed) return o;
      if (err instanceof SSEFrameTooLargeError) return { ...o, fatal: true, error: new TetherError('too_large', err.message) };
      const e = this.abortCause ?? toTetherError(err, ac.signal);
      return { ...o, error: e, fatal: !e.retryable && e.code !== 'aborted' && e.code !== 'timeout' };
    } finally {
      this.clearTimer(readiness);
      this.clearTimer(stall);
      this.clearTimer(refresh);
      if (!ac.signal.aborted) ac.abort();
    }
  }

  // frame handles one frame; it returns true to end the connection.
  private frame(f: SSEFrame, o: Outcome, opened: () => void): boolean {
    if (this.isClosed) return true;
    if (!o.connected && f.event !== 'ping' && f.event !== 'connected' && f.event !== 'reconnect' && f.event !== 'end') {
      o.connected = true; // a server that skips `connected` still counts as open
      opened();
      this.attempt = 0;
      this.emit('open', {});
    }
    switch (f.event) {
      case 'connected': {
        let info: ConnectedInfo | undefined;
        try {
          info = JSON.parse(f.data) as ConnectedInfo;
        } catch {
          /* keep the defaults */
        }
        if (info?.heartbeat_ms && info.heartbeat_ms > 0) this.heartbeatMs = info.heartbeat_ms;
        if (this.opts.after === 'now' && this.cursor === undefined && info?.offset && info.offset !== 'now') {
          this.cursor = info!.offset; // "now" again on a reconnect would skip what came meanwhile
        }
        if (info?.run_id && !this.runId && (this.create || this.target.runId)) this.runId = info.run_id;
        o.connected = true;
        opened();
        this.attempt = 0;
        this.emit('open', {});
        if (info) call(() => this.opts.onConnected?.(info));
        return false;
      }
      case 'ping':
        return false;
      case 'reconnect': {
        // A stream that could not start says why (the store did not
        // answer): resumed all the same.
        const e = failure(f.data);
        if (e) o.error = e;
        o.now = true;
        try {
          o.tokenExpired = (JSON.parse(f.data) as { reason?: unknown })?.reason === 'token_expired';
        } catch {
          // no reason given: reconnect all the same
        }
        return true;
      }
      case 'end': {
        // The server says the subscription is complete: the run or message
        // ended (at or before the cursor), or the thread was deleted; or
        // that it could not start (an unknown thread, run or message: the
        // error its status would have said).
        const e = failure(f.data);
        if (e) {
          o.error = e;
          o.fatal = true;
          return true;
        }
        if (endReason(f.data) === 'thread_deleted') {
          o.error = new TetherError('not_found', 'the thread was deleted', 200);
          o.fatal = true;
          return true;
        }
        this.done = true;
        return true;
      }
      case 'snapshot': {
        if (f.noData) return false;
        let snap: Snapshot;
        try {
          snap = JSON.parse(f.data) as Snapshot;
        } catch {
          o.error = new TetherError('protocol', 'the snapshot is not valid JSON');
          o.fatal = true;
          return true;
        }
        if (!snap.offset && f.id) snap.offset = f.id;
        // A reset replaces the consumer's state, so the cursor follows it,
        // also backwards; another snapshot never moves it back.
        if (snap.reset || !isEventOffset(this.cursor) || compareOffsets(snap.offset, this.cursor) > 0) this.cursor = snap.offset;
        this.noteSnapshot(snap);
        o.yielded++;
        call(() => this.opts.onSnapshot?.(snap));
        return this.done || this.isClosed;
      }
    }
    if (f.noData || f.id === undefined) return false; // a control frame this client does not know
    let ev: TetherEvent;
    try {
      ev = JSON.parse(f.data) as TetherEvent;
    } catch {
      o.error = new TetherError('protocol', `event ${f.id ?? ''} is not valid JSON`);
      o.fatal = true;
      return true;
    }
    if (!ev.offset && f.id) ev.offset = f.id;
    if (!ev.type) ev.type = f.event;
    if (ev.offset && isEventOffset(this.cursor) && compareOffsets(ev.offset, this.cursor) <= 0) return false;
    if (ev.offset) this.cursor = ev.offset;
    this.noteEvent(ev);
    o.yielded++;
    call(() => this.opts.onEvent?.(ev));
    return this.done || this.isClosed;
  }

  private noteEvent(ev: TetherEvent): void {
    const { messageId } = this.target;
    if (messageId) {
      if (ev.message_id === messageId && ev.run_id) this.msgRun = ev.run_id;
      if (ev.type === 'message.finished') this.done = ev.message_id === messageId;
      else if (ev.type === 'message.created') this.done = ev.message?.id === messageId && isTerminalMessageStatus(ev.message.status || 'done');
      else if (ev.type === 'run.finished') this.done = !this.msgRun || ev.run_id === this.msgRun;
      return;
    }
    if (this.create && !this.runId && ev.run_id) this.runId = ev.run_id;
    if (this.runId && ev.type === 'run.finished' && ev.run_id === this.runId) this.done = true;
  }

  private noteSnapshot(snap: Snapshot): void {
    const { messageId } = this.target;
    if (messageId) {
      const m = snap.messages.find((x) => x.id === messageId);
      if (m) {
        this.msgRun = m.run_id;
        this.done = isTerminalMessageStatus(m.status);
      }
      if (this.msgRun && snap.runs.some((r) => r.id === this.msgRun && isTerminalRunStatus(r.status))) this.done = true;
      return;
    }
    if (this.runId && snap.runs.some((r) => r.id === this.runId && isTerminalRunStatus(r.status))) this.done = true;
  }
}
