// One resumable subscription (protocol §5): resuming from the cursor,
// deduplication, backoff and timers. How a connection is made is its
// Connector's: fetch-based SSE (sse-stream.ts) or a shared WebSocket
// (websocket.ts).

import { TetherError, toTetherError } from './errors.js';
import { sseConnector } from './sse-stream.js';
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
  /** How connections are made; SSE when absent. */
  readonly connector?: Connector;
  /** The server ended the stream of `res` at its token's expiry. */
  tokenExpired?(res: Response): void;
  /** When the token should be refreshed, if it has an `exp`. */
  tokenRefreshTime?(): number | undefined;
  /** Refreshes the token ahead of its `exp`. */
  refreshToken?(): void;
}

/**
 * @internal How one connection of a subscription is made and read: SSE
 * (the default) or a WebSocket shared by the client's subscriptions. A
 * connector reports what arrives through the subscription's
 * {@link SubscriptionImpl.opened}, `snapshot`, `event` and `ended`, and
 * resolves when the connection is over; resuming, deduplication, backoff
 * and timers are the subscription's, the same for every connector.
 */
export interface Connector {
  connect(sub: SubscriptionImpl, a: Attempt): Promise<void>;
}

/** @internal One connection of a subscription. */
export interface Attempt {
  /** Aborted when the connection must end (close, reconnect, a timeout, a stall). */
  readonly signal: AbortSignal;
  /** Why it was aborted, once it was. */
  cause?: TetherError;
  /** It was aborted because the connection looks dead (silent too long), not just unwanted. */
  dead?: boolean;
  /** It was aborted by {@link Subscription.reconnect}: the subscription connects again at once. */
  again?: boolean;
  /** How the connection went; the connector fills in how it ended. */
  readonly o: Outcome;
  /** When data last arrived (the timers' clock); the stall detector reads it. */
  activity(): number;
}

/** @internal A POST /runs/stream to make before following the run. */
export interface CreateRun {
  threadId: string;
  body: unknown;
  idempotencyKey: string;
}

/** @internal How a connection went. */
export interface Outcome {
  error?: TetherError;
  fatal?: boolean;
  now?: boolean; // the server asked to reconnect
  tokenExpired?: boolean; // …because the token expired
  connected?: boolean;
  yielded: number;
}

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
  private attempting: Attempt | undefined; // the current connection
  private onOpen: (() => void) | undefined; // arms the current connection's timers once it opened
  /** @internal */ readonly timers: Timers;
  private readonly live = new Set<unknown>(); // timer handles
  private wakeSleep: (() => void) | undefined;
  private unlisten: (() => void) | undefined;
  private heartbeatMs: number;
  private msgRun: string | undefined;
  private immediate = false; // the current connection was dropped on purpose: reconnect without waiting
  private readonly offSignal: (() => void) | undefined;

  constructor(
    /** @internal */ readonly transport: Transport,
    /** @internal */ readonly target: SubscribeTarget | { threadId?: undefined; runId?: undefined; messageId?: undefined },
    /** @internal */ readonly opts: SubscribeOptions,
    /** @internal */ readonly create?: CreateRun,
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
    const a = this.attempting;
    if (this.state === 'open' && a && this.timers.now() - a.activity() > this.heartbeatMs + 1000) {
      this.immediate = true;
      this.abort(new TetherError('timeout', 'stream silent after the page woke up'), true);
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

  private abort(cause: TetherError, dead = false): void {
    const a = this.attempting;
    if (this.ac && !this.ac.signal.aborted) {
      if (a && a.signal === this.ac.signal) {
        a.cause = cause;
        a.dead = dead;
        a.again = this.immediate;
      }
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
      if (!o.error && o.connected && o.yielded === 0 && (await this.runEnded())) {
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
        this.emit('reconnecting', { delayMs: 0, ...(o.error ? { error: o.error } : {}) });
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
        Math.min(o.error?.retryAfterMs ?? 0, this.opts.backoff?.maxMs ?? DEFAULT_MAX_BACKOFF_MS),
      );
      this.emit('reconnecting', { delayMs, ...(o.error ? { error: o.error } : {}) });
      await this.sleep(delayMs);
    }
  }

  // runEnded asks the server whether the followed run has ended.
  private async runEnded(): Promise<boolean> {
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

  /**
   * @internal The cursor to send: an event's offset to resume after, `-1`
   * for the whole log (or a created run's stream from its start), the
   * caller's `after`, or undefined for a snapshot first.
   */
  resumeFrom(): Offset | undefined {
    if (isEventOffset(this.cursor) || this.cursor === '-1') return this.cursor;
    return this.create ? '-1' : this.opts.after;
  }

  // connect runs one connection until it ends.
  private async connect(): Promise<Outcome> {
    const o: Outcome = { yielded: 0 };
    const ac = new AbortController();
    this.ac = ac;
    const start = this.timers.now();
    const a: Attempt = { signal: ac.signal, o, activity: () => start };
    this.attempting = a;
    const readiness = this.setTimer(
      () => this.abort(new TetherError('timeout', 'no connected frame in time')),
      this.opts.readinessTimeoutMs ?? 10_000,
    );
    let stall: unknown;
    let refresh: unknown;
    const stallMs = () => (this.opts.stallHeartbeats ?? 3) * this.heartbeatMs;
    // The timer is not moved at each frame: when it fires, it looks at
    // when data last came and waits for the rest.
    const checkStall = () => {
      const idle = this.timers.now() - a.activity();
      if (idle >= stallMs()) this.abort(new TetherError('timeout', `no data for ${this.opts.stallHeartbeats ?? 3} heartbeats`), true);
      else stall = this.setTimer(checkStall, stallMs() - idle);
    };
    this.onOpen = () => {
      this.onOpen = undefined;
      this.clearTimer(readiness);
      stall = this.setTimer(checkStall, stallMs());
      // Fetch the next token ahead of this one's exp, so that the
      // reconnect at the exp does not wait for it.
      const at = this.transport.tokenRefreshTime?.();
      if (at !== undefined) refresh = this.setTimer(() => this.transport.refreshToken?.(), Math.max(0, at - this.timers.now()));
    };
    try {
      await (this.transport.connector ?? sseConnector).connect(this, a);
      // Ended because it was aborted (a timeout, a reconnect): say so.
      if (a.cause && !o.error) o.error = a.cause;
      return o;
    } catch (err) {
      if (this.isClosed) return o;
      const e = a.cause ?? toTetherError(err, ac.signal);
      return { ...o, error: e, fatal: !e.retryable && e.code !== 'aborted' && e.code !== 'timeout' };
    } finally {
      this.onOpen = undefined;
      this.clearTimer(readiness);
      this.clearTimer(stall);
      this.clearTimer(refresh);
      if (!ac.signal.aborted) ac.abort();
    }
  }

  /**
   * @internal The server accepted the subscription (SSE `connected`, a
   * WebSocket's `subscribed`), or sent a first frame without saying so.
   */
  opened(a: Attempt, info?: ConnectedInfo): void {
    if (this.isClosed || a.o.connected) return;
    a.o.connected = true;
    if (info?.heartbeat_ms && info.heartbeat_ms > 0) this.heartbeatMs = info.heartbeat_ms;
    this.onOpen?.();
    if (this.opts.after === 'now' && this.cursor === undefined && info?.offset && info.offset !== 'now') {
      this.cursor = info.offset; // "now" again on a reconnect would skip what came meanwhile
    }
    if (info?.run_id && !this.runId && (this.create || this.target.runId)) this.runId = info.run_id;
    this.attempt = 0;
    this.emit('open', {});
    if (info) call(() => this.opts.onConnected?.(info));
  }

  /**
   * @internal The server ended the stream. `resume`: it asks the client to
   * come back from its cursor (SSE `reconnect`; a WebSocket's `shutdown`,
   * `slow_consumer`, `token_expired`, `error`); else the subscription is
   * complete (the run or message ended, or the thread was deleted) or could
   * not start (`error` says why, and retrying would not change it).
   */
  ended(a: Attempt, resume: boolean, reason: unknown, error?: TetherError): void {
    const o = a.o;
    if (error) o.error = error;
    if (resume) {
      o.now = true;
      o.tokenExpired = reason === 'token_expired';
    } else if (error) o.fatal = true;
    else if (reason === 'thread_deleted') {
      o.error = new TetherError('not_found', 'the thread was deleted', 200);
      o.fatal = true;
    } else this.done = true;
  }

  /** @internal A snapshot; returns true when the connection should end. */
  snapshot(a: Attempt, snap: Snapshot): boolean {
    if (this.isClosed) return true;
    this.opened(a);
    // A reset replaces the consumer's state, so the cursor follows it,
    // also backwards; another snapshot never moves it back.
    if (snap.reset || !isEventOffset(this.cursor) || compareOffsets(snap.offset, this.cursor) > 0) this.cursor = snap.offset;
    this.noteSnapshot(snap);
    a.o.yielded++;
    call(() => this.opts.onSnapshot?.(snap));
    return this.done || this.isClosed;
  }

  /** @internal An event; returns true when the connection should end. Events at or before the cursor are skipped. */
  event(a: Attempt, ev: TetherEvent): boolean {
    if (this.isClosed) return true;
    this.opened(a);
    if (ev.offset && isEventOffset(this.cursor) && compareOffsets(ev.offset, this.cursor) <= 0) return false;
    if (ev.offset) this.cursor = ev.offset;
    this.noteEvent(ev);
    a.o.yielded++;
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
