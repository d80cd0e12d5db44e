// @tether/client/websocket: a transport that carries all of a client's
// subscriptions on one WebSocket (GET /v1/ws, protocol §5 "WebSocket"), so
// that a page following many threads and runs needs one connection, not
// one each (browsers allow about 6 HTTP/1.1 connections per origin).
//
// Each connection of a subscription is a channel on the client's socket: a
// subscribe frame with the subscription's cursor, answered by subscribed,
// the snapshot when due, events and an end. Resuming, deduplication by
// offset, backoff, readiness and stall timers are the subscription's
// (subscription.ts), as over SSE; what is here is the socket: opening it
// (the token in ?access_token=, since a page cannot set a WebSocket's
// headers), routing its frames by id, and closing it once no subscription
// uses it.

import type { RunRequest, SubscriptionTransport, TetherClient } from './client.js';
import { TetherError, errorFromResponse, toTetherError } from './errors.js';
import { sseConnector } from './sse-stream.js';
import type { Attempt, Connector, SubscriptionImpl } from './subscription.js';
import { defaultTimers, type Timers } from './timing.js';
import type { ConnectedInfo, Snapshot, TetherEvent } from './types.js';
import { isEventOffset } from './types.js';

/**
 * The part of the standard `WebSocket` that the transport uses. The event
 * handlers take `any`: a page's WebSocket and the `ws` package type their
 * events differently, and the transport reads only `data`, `code` and
 * `reason`.
 */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: any) => unknown) | null;
  onmessage: ((ev: any) => unknown) | null;
  onclose: ((ev: any) => unknown) | null;
  onerror: ((ev: any) => unknown) | null;
}

/** A `WebSocket` class: the page's, or e.g. the `ws` package's in Node. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Options of {@link webSocket}. */
export interface WebSocketOptions {
  /**
   * The WebSocket class. Defaults to the global `WebSocket`, looked up when
   * a socket opens (Node 20 has none without a flag: pass the `ws`
   * package's there).
   */
  WebSocket?: WebSocketConstructor;
}

/**
 * A transport for {@link TetherClientOptions.transport} that carries all
 * of the client's subscriptions on one WebSocket to `{baseUrl}/v1/ws`,
 * opened with the first subscription and closed after the last. Each
 * subscription keeps what it has over SSE: it resumes from its last offset
 * after any drop, gets each event once, the same snapshots, ends and
 * errors, backoff and token refresh.
 *
 * ```ts
 * import { TetherClient } from '@tether/client';
 * import { webSocket } from '@tether/client/websocket';
 * const client = new TetherClient({ baseUrl: '', transport: webSocket() });
 * ```
 */
export function webSocket(options: WebSocketOptions = {}): SubscriptionTransport {
  return { connector: (client) => new Sockets(client, options) };
}

const CONNECTING = 0;
const OPEN = 1;
const CLOSED = 2;

// Refused upgrades in a row after which subscriptions go over SSE.
const NO_UPGRADE = 2;

// The close code of a socket whose token expired (protocol §5).
const CLOSE_TOKEN_EXPIRED = 4001;

// The status the same refusal has over HTTP, so that `status` and
// `retryable` of a refused subscribe mean what they mean elsewhere.
const STATUS: Record<string, number> = { bad_request: 400, unauthorized: 401, forbidden: 403, not_found: 404, conflict: 409, too_large: 413, unavailable: 503 };

interface Frame {
  op?: unknown;
  id?: unknown;
  reason?: unknown;
  offset?: unknown;
  event?: TetherEvent;
  error?: { code?: unknown; message?: unknown };
}

/** The connector of one client: its sockets, and the channels on them. */
class Sockets implements Connector {
  readonly sockets = new Set<Socket>();
  private n = 0;
  // Sockets in a row that the server answered as a plain request (426:
  // something between, a proxy, drops the upgrade). After NO_UPGRADE of
  // them the client's subscriptions go over SSE, which such a proxy
  // passes, rather than try the socket for ever.
  private noUpgrade = 0;

  constructor(
    readonly client: TetherClient,
    readonly opts: WebSocketOptions,
  ) {}

  // The client's clock and timers: a socket's frames are every subscription's.
  get timers(): Timers {
    return this.client.options.timers ?? defaultTimers;
  }

  now(): number {
    return this.timers.now();
  }

  /** A socket opened (upgraded), or was refused its upgrade (426). */
  upgraded(ok: boolean): void {
    this.noUpgrade = ok ? 0 : this.noUpgrade + 1;
  }

  async connect(sub: SubscriptionImpl, a: Attempt): Promise<void> {
    if (this.noUpgrade >= NO_UPGRADE) return sseConnector.connect(sub, a);
    const c = sub.create;
    if (c && !sub.runId) {
      // The run is created first (with its Idempotency-Key: a POST that got
      // no answer is sent again without a second run), then followed from
      // its first event, as the SSE transport's POST /runs/stream is.
      const run = await this.client.createRun(c.threadId, c.body as RunRequest, { idempotencyKey: c.idempotencyKey, signal: a.signal });
      sub.runId = run.id;
    }
    if (a.signal.aborted) return;
    let sock: Socket | undefined;
    for (const s of this.sockets) if (!s.retired && !s.full) sock ??= s;
    if (!sock) this.sockets.add((sock = new Socket(this)));
    const s = sock;
    return new Promise((resolve) => new Channel(s, sub, a, `s${++this.n}`, resolve));
  }

  url(token: string | undefined): string {
    const u = new URL(`${this.client.baseUrl}/v1/ws`, (globalThis as { location?: { href: string } }).location?.href);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    if (token) u.searchParams.set('access_token', token);
    return u.href;
  }
}

/** One WebSocket and the channels it carries. */
class Socket {
  state = CONNECTING;
  /** The server is ending it (shutdown, the token's exp): new subscriptions go to a new socket. */
  retired = false;
  /** The server refused a subscription as one too many: new ones go to another socket. */
  full = false;
  /** When a frame last came (or the socket opened): every channel's stall detector reads it. */
  last: number;
  token: string | undefined;
  readonly chans = new Map<string, Channel>();
  private ws: WebSocketLike | undefined;
  private idle: unknown; // the timer that closes it if no channel comes back

  constructor(readonly m: Sockets) {
    this.last = m.now();
    void this.start();
  }

  private async start(): Promise<void> {
    let ws: WebSocketLike;
    try {
      const token = await this.m.client.token();
      if (this.state === CLOSED) return;
      this.token = token;
      const WS = this.m.opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
      if (!WS) throw new TetherError('protocol', 'there is no WebSocket here: pass one as webSocket({ WebSocket })');
      ws = this.ws = new WS(this.m.url(token));
    } catch (err) {
      const e = err instanceof TetherError ? err : new TetherError('protocol', `cannot open a WebSocket: ${err instanceof Error ? err.message : String(err)}`);
      return this.fail(e, !e.retryable);
    }
    ws.onopen = () => {
      if (this.state !== CONNECTING) return;
      this.state = OPEN;
      this.last = this.m.now();
      this.m.upgraded(true);
      for (const c of this.chans.values()) c.send();
    };
    ws.onmessage = (ev: { data: unknown }) => this.message(ev.data);
    ws.onclose = (ev: { code: number; reason: string }) => void this.closed(ev.code, ev.reason);
    // A close always follows; the ws package throws an error event that has no listener.
    ws.onerror = () => {};
  }

  send(frame: object): void {
    try {
      this.ws?.send(JSON.stringify(frame));
    } catch {
      // Closing: its close event ends the channels.
    }
  }

  private message(data: unknown): void {
    if (this.state === CLOSED) return;
    this.last = this.m.now();
    let f: Frame | undefined;
    try {
      f = typeof data === 'string' ? (JSON.parse(data) as Frame) : undefined;
    } catch {
      // below
    }
    if (!f || typeof f !== 'object') return this.fail(new TetherError('protocol', 'a WebSocket message is not a JSON object'), true);
    // Pings, pongs, the answers about channels that ended and what this
    // client does not know are skipped.
    if (typeof f.id === 'string') this.chans.get(f.id)?.frame(f);
  }

  private async closed(code: number, reason: string): Promise<void> {
    if (this.state === CLOSED) return;
    const opened = this.state === OPEN;
    this.forget();
    if (code === CLOSE_TOKEN_EXPIRED) this.m.client.expireToken(this.token);
    // The WebSocket API hides why an upgrade was refused (401, 403, 429 and
    // a 503 look like a network failure): the same request over fetch says
    // it. Auth and limits are checked before the upgrade, so its 426
    // (Upgrade Required) means they passed; a 401 token_expired is sent
    // again with a new token (request), so the next socket has it.
    let err = new TetherError('network', opened ? `the WebSocket closed (${code}${reason ? ` ${reason}` : ''})` : 'the WebSocket did not open');
    if (!opened) {
      try {
        const res = await this.m.client.request('/v1/ws', { headers: { Accept: 'application/json' } });
        if (!res.ok && res.status !== 426) err = await errorFromResponse(res);
        else res.body?.cancel().catch(() => {});
        if (res.status === 426) this.m.upgraded(false);
      } catch (e) {
        err = toTetherError(e);
      }
    }
    for (const c of [...this.chans.values()]) c.drop(err, !err.retryable, code === CLOSE_TOKEN_EXPIRED);
  }

  /** Ends the socket and every channel on it with `err`. */
  fail(err: TetherError, fatal = false): void {
    const chans = [...this.chans.values()];
    this.shut();
    for (const c of chans) c.drop(err, fatal, false);
  }

  /** A channel joins: the socket is not closed for carrying none. */
  join(id: string, c: Channel): void {
    this.chans.set(id, c);
    this.m.timers.clearTimeout(this.idle);
    this.idle = undefined;
  }

  /**
   * Closes the socket once it carries no channel. `again`: the channel
   * that left comes back at once (the server asked it to resume, or its
   * subscription reconnects), so the socket is kept until the end of the
   * turn for it: a lone subscription would otherwise close the socket and
   * open another to subscribe again.
   */
  release(again = false): void {
    if (this.chans.size > 0) return;
    if (!again || this.retired || this.full || this.state === CLOSED) return this.shut();
    this.idle ??= this.m.timers.setTimeout(() => {
      this.idle = undefined;
      if (this.chans.size === 0) this.shut();
    }, 0);
  }

  private forget(): void {
    this.state = CLOSED;
    this.m.sockets.delete(this);
    this.m.timers.clearTimeout(this.idle);
    this.idle = undefined;
  }

  private shut(): void {
    if (this.state === CLOSED) return;
    this.forget();
    try {
      this.ws?.close(1000);
    } catch {
      // already closing
    }
  }
}

/** One connection of a subscription, on a socket. */
class Channel {
  private sent = false; // the subscribe frame went out
  private over = false;

  constructor(
    private readonly sock: Socket,
    private readonly sub: SubscriptionImpl,
    private readonly a: Attempt,
    private readonly id: string,
    private readonly resolve: () => void,
  ) {
    sock.join(id, this);
    a.activity = () => sock.last;
    a.signal.addEventListener('abort', this.aborted);
    if (sock.state === OPEN) this.send();
  }

  send(): void {
    if (this.sent) return;
    this.sent = true;
    const { sub } = this;
    const after = sub.resumeFrom();
    this.sock.send({
      op: 'subscribe',
      id: this.id,
      // As over SSE, a run's subscription names the run alone.
      ...(sub.runId ? { run_id: sub.runId } : { thread_id: sub.target.threadId }),
      ...(sub.target.messageId ? { message_id: sub.target.messageId } : {}),
      ...(after ? { after } : {}),
      ...(sub.opts.types?.length ? { types: sub.opts.types } : {}),
    });
  }

  frame(f: Frame): void {
    const { sub, a } = this;
    switch (f.op) {
      case 'subscribed': {
        const { op: _op, id: _id, ...info } = f;
        sub.opened(a, info as unknown as ConnectedInfo);
        return;
      }
      case 'snapshot': {
        const { op: _op, id: _id, ...snap } = f;
        if (sub.snapshot(a, snap as unknown as Snapshot)) this.leave();
        return;
      }
      case 'event':
        if (f.event && sub.event(a, f.event)) this.leave();
        return;
      case 'end':
        return this.end(f);
      case 'error': {
        const code = typeof f.error?.code === 'string' ? f.error.code : 'internal';
        const e = new TetherError(code, typeof f.error?.message === 'string' ? f.error.message : code, STATUS[code] ?? 500);
        if (code === 'too_large') {
          // The socket holds as many subscriptions as the server takes:
          // this one goes at once to another socket.
          Object.assign(a.o, { error: e, now: true });
          return this.leave(true);
        }
        Object.assign(a.o, { error: e, fatal: !e.retryable });
        return this.leave();
      }
    }
  }

  private end(f: Frame): void {
    const { sub, a, sock } = this;
    const reason = f.reason;
    // The cursor to resume from: past the last event delivered, what the
    // filters skipped.
    if (isEventOffset(f.offset as string)) sub.setCursor(f.offset as string);
    if (reason === 'run_finished' || reason === 'message_finished' || reason === 'thread_deleted') sub.ended(a, false, reason);
    else if (reason !== 'unsubscribed') {
      // The server ends it and asks to come back from its offset
      // (shutdown, slow_consumer, token_expired, error, or a reason this
      // client does not know).
      if (reason === 'shutdown' || reason === 'token_expired') sock.retired = true;
      if (reason === 'token_expired') sock.m.client.expireToken(sock.token);
      sub.ended(a, true, reason, reason === 'error' ? new TetherError('unavailable', 'the server could not read the log', 503) : undefined);
    }
    this.leave();
  }

  // aborted: the subscription closed, reconnects, or timed out.
  private readonly aborted = (): void => {
    const { a, sock } = this;
    // A socket that is silent too long, or did not open in time, is dead
    // for every channel on it.
    if (a.dead || (a.cause?.code === 'timeout' && sock.state !== OPEN)) return sock.fail(a.cause!);
    if (this.sent && sock.state === OPEN) sock.send({ op: 'unsubscribe', id: this.id });
    this.leave();
  };

  /** The socket closed or failed. */
  drop(err: TetherError, fatal: boolean, tokenExpired: boolean): void {
    Object.assign(this.a.o, { error: err, fatal, ...(tokenExpired ? { now: true, tokenExpired } : {}) });
    this.leave();
  }

  private leave(full = false): void {
    if (this.over) return;
    this.over = true;
    this.a.signal.removeEventListener('abort', this.aborted);
    this.sock.chans.delete(this.id);
    this.sock.full = full;
    this.sock.release(!!(this.a.o.now || this.a.again));
    this.resolve();
  }
}
