import { TetherError, errorFromResponse, toTetherError } from './errors.js';
import { LiveRun, LiveThread, type FollowOptions } from './live.js';
import { backoffDelay, defaultTimers, DEFAULT_MAX_BACKOFF_MS, type Timers } from './timing.js';
import { TokenKeeper, errorCode, type TokenSource } from './token.js';
import {
  SubscriptionImpl,
  type ConnectionOptions,
  type Connector,
  type SubscribeOptions,
  type SubscribeTarget,
  type Subscription,
  type Transport,
} from './subscription.js';
import type { FinalAnswer, InputMessage, JSONObject, JSONValue, Message, Multitask, Run, Snapshot, Thread, ThreadStatus } from './types.js';

/** Options of {@link TetherClient}. Connection options are the defaults of every subscription. */
export interface TetherClientOptions extends ConnectionOptions {
  /** The server's base URL, e.g. `https://tether.example.com` or `""` for the page's origin. */
  baseUrl: string;
  /**
   * A bearer token, or a function returning one. A function is called for
   * each request, unless what it returns is a JWT with an `exp`: that is
   * kept and asked for again {@link refreshAheadMs} before it expires, and at
   * once when the server answers `token_expired` (a 401 code, or an SSE
   * `reconnect` reason): the request is sent again, the stream resumes from
   * its offset, nothing lost. A function that throws fails the request with
   * the code `token_unavailable` (subscriptions retry with their backoff),
   * but for a call ahead of the `exp`: the held token, still good, is sent,
   * and the next request asks again.
   */
  token?: TokenSource;
  /** How long before a JWT's `exp` a new one is asked for. Defaults to 30 s (at most half its lifetime). */
  refreshAheadMs?: number;
  /** The fetch to use. Defaults to the global fetch, looked up at each call. */
  fetch?: typeof fetch;
  /** Extra headers for every request. */
  headers?: Record<string, string>;
  /**
   * How many times a REST write (create, cancel, input, delete) is retried,
   * with {@link ConnectionOptions.backoff} (and no sooner than a
   * `Retry-After`), after a failure that may hide a write that landed: no
   * answer, 5xx, 408. Every write is safe to repeat: a
   * new thread is named by the client, a run is created with an
   * `Idempotency-Key`, the server takes the same answer to a run's request
   * for the answer it took, and a delete retried after such a failure that
   * finds nothing resolves. A 429, which did nothing, rejects at once with
   * its `retryAfterMs`, for a page to say how long to wait. Defaults to 4;
   * 0 sends each call once.
   */
  restRetries?: number;
  /**
   * How subscriptions reach the server. Defaults to SSE: one HTTP
   * connection per subscription. `webSocket()` from
   * `@tether/client/websocket` carries all of this client's subscriptions on
   * one WebSocket (`/v1/ws`), with the same resume, ends and errors.
   */
  transport?: SubscriptionTransport;
}

/** How a client's subscriptions reach the server: see {@link TetherClientOptions.transport}. */
export interface SubscriptionTransport {
  /** @internal Makes the connector of one client. */
  connector(client: TetherClient): Connector;
}

/** Per-request options. */
export interface RequestOptions {
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** The body of a run request (POST /v1/threads/{tid}/runs). */
export interface RunRequest {
  /** The agent; the server's default when absent. */
  agent?: string;
  /** Input messages, added to the thread with the run. */
  input?: { messages: InputMessage[] };
  /** Run metadata (the demo agent reads `metadata.demo`). */
  metadata?: JSONObject;
  /** What to do when the thread has an active run. Defaults to `reject` (409 run_active). */
  multitask?: Multitask;
}

/** Options of {@link TetherClient.createRun}. */
export interface CreateRunOptions extends RequestOptions {
  /** Makes retries safe: a repeated key returns the first run. */
  idempotencyKey?: string;
}

/** A page of {@link TetherClient.listThreads}. */
export interface ThreadPage {
  threads: Thread[];
  /** Pass as `cursor` for the next page; null on the last. */
  next_cursor: string | null;
}

/** The answer of {@link TetherClient.getRun}: the run and its messages. */
export interface RunWithMessages {
  run: Run;
  messages: Message[];
}

const enc = encodeURIComponent;


function newKey(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  return `k${Date.now().toString(36)}${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
}

const ID_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lowercase

/**
 * A new id as the server makes them: `prefix`, then the time in
 * milliseconds (10 base32 digits, so ids sort by time) and 80 random bits
 * (16 digits).
 */
function newId(prefix: string): string {
  let t = Date.now();
  let out = '';
  for (let i = 0; i < 10; i++, t = Math.floor(t / 32)) out = ID_ALPHABET[t % 32] + out;
  for (const b of globalThis.crypto.getRandomValues(new Uint8Array(16))) out += ID_ALPHABET[b & 31];
  return prefix + out;
}


/**
 * TetherClient talks to a Tether server: REST helpers for threads, runs and
 * final answers, resumable subscriptions, and live stores that keep a
 * thread's or a run's state in sync through drops, truncation and stalls.
 *
 * ```ts
 * const client = new TetherClient({ baseUrl: '' });
 * const live = client.startRun('t1', { input: { messages: [{ role: 'user', content: 'hi' }] } });
 * live.store.subscribe(() => render(live.store.getState()));
 * ```
 */
export class TetherClient implements Transport {
  /** @internal The base URL without a trailing slash. */
  readonly baseUrl: string;
  /** @internal How subscriptions connect; SSE when undefined. */
  readonly connector: Connector | undefined;
  private readonly fetchFn: typeof fetch;
  private readonly tokens: TokenKeeper;
  private readonly sentWith = new WeakMap<Response, string | undefined>();

  /** Makes a client; nothing is requested until a method is called. */
  constructor(readonly options: TetherClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.tokens = new TokenKeeper(options.token, { refreshAheadMs: options.refreshAheadMs }, options.timers);
    this.connector = options.transport?.connector(this);
  }

  /** @internal The token to send now (see {@link TokenKeeper.get}). */
  token(): Promise<string | undefined> {
    return this.tokens.get();
  }

  /** @internal The server refused `token` as expired: the next request asks for a new one. */
  expireToken(token: string | undefined): void {
    this.tokens.expired(token);
  }

  /**
   * @internal Sends a request with the client's auth and headers; fetch
   * errors become TetherErrors. A 401 `token_expired` for a token the
   * function gave is answered by asking it for a new one and sending the
   * request once more.
   */
  async request(path: string, init: RequestInit = {}): Promise<Response> {
    let token = await this.tokens.get();
    let res = await this.send(path, init, token);
    if (res.status === 401 && this.tokens.refreshable && (await errorCode(res)) === 'token_expired') {
      this.tokens.expired(token);
      token = await this.tokens.get();
      res.body?.cancel().catch(() => {});
      res = await this.send(path, init, token);
    }
    this.sentWith.set(res, token);
    return res;
  }

  private async send(path: string, init: RequestInit, token: string | undefined): Promise<Response> {
    const headers = new Headers(this.options.headers);
    new Headers(init.headers).forEach((v, k) => headers.set(k, v));
    if (token) headers.set('Authorization', `Bearer ${token}`);
    try {
      return await this.fetchFn(this.baseUrl + path, { ...init, headers });
    } catch (err) {
      throw toTetherError(err, init.signal ?? undefined);
    }
  }

  /** @internal The stream of `res` was ended for its token's expiry: the next request asks for a new one. */
  tokenExpired(res: Response): void {
    this.expireToken(this.sentWith.get(res));
  }

  /** @internal When the held token should be refreshed (a JWT's `exp` less the margin), if known. */
  tokenRefreshTime(): number | undefined {
    return this.tokens.refreshTime();
  }

  /** @internal Asks for a new token ahead of the old one's `exp`; failures wait for the next request. */
  refreshToken(): void {
    this.tokens.get().catch(() => {});
  }

  /**
   * A REST call, retried after failures a repeat may change (see
   * {@link TetherClientOptions.restRetries}). With `goneIsDone`, a
   * `not_found` answer to a retry after a try the server may have done is
   * the call's success: a delete done by that try finds nothing.
   */
  private async json<T>(
    method: string,
    path: string,
    body?: unknown,
    opts: RequestOptions & { headers?: Record<string, string>; goneIsDone?: boolean } = {},
  ): Promise<T> {
    // Reads are left to their callers, which poll and reconcile anyway.
    const retries = method === 'GET' ? 0 : (this.options.restRetries ?? 4);
    const timers: Timers = this.options.timers ?? defaultTimers;
    let acted = false;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, body, opts);
      } catch (err) {
        const e = toTetherError(err, opts.signal);
        if (acted && opts.goneIsDone && e.code === 'not_found') return undefined as T;
        // A token function that failed sent nothing, and a 429 did
        // nothing: their caller decides (a page says how long to wait).
        if (!e.retryable || e.code === 'token_unavailable' || e.status === 429 || attempt >= retries || opts.signal?.aborted) throw e;
        acted = true; // no answer, or a 5xx: the server may have done it
        const maxMs = this.options.backoff?.maxMs ?? DEFAULT_MAX_BACKOFF_MS;
        const ms = Math.max(backoffDelay(attempt, this.options.backoff, () => timers.random()), Math.min(e.retryAfterMs ?? 0, maxMs));
        await new Promise<void>((ok, fail) => {
          const signal = opts.signal;
          const onAbort = () => {
            timers.clearTimeout(h);
            fail(toTetherError(signal?.reason ?? new DOMException('aborted', 'AbortError'), signal));
          };
          const h = timers.setTimeout(() => {
            signal?.removeEventListener('abort', onAbort);
            ok();
          }, ms);
          signal?.addEventListener('abort', onAbort, { once: true });
        });
      }
    }
  }

  private async once<T>(method: string, path: string, body?: unknown, opts: RequestOptions & { headers?: Record<string, string> } = {}): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json', ...opts.headers };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await this.request(path, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    if (!res.ok) throw await errorFromResponse(res);
    if (res.status === 204) return undefined as T;
    // The body is read whole before it is parsed, so that a connection
    // dropped mid-answer (a network error: retryable) is told apart from
    // an answer that is not JSON (the same again on a retry).
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      const e = toTetherError(err, opts.signal);
      if (e.code !== 'network') throw e;
      throw new TetherError('network', 'the connection dropped before the whole answer came', 0, {
        cause: err,
        requestId: res.headers.get('x-request-id') ?? undefined,
      });
    }
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new TetherError('protocol', 'the answer is not valid JSON', res.status, { cause: err });
    }
  }

  /**
   * Creates a thread (POST /v1/threads); with an id that exists with the
   * same metadata, returns it. Without an id the client names it (`thr_…`,
   * {@link newId}), so that a retry is a create-if-absent, never a second
   * thread.
   */
  createThread(body: { id?: string; metadata?: JSONObject } = {}, opts?: RequestOptions): Promise<Thread> {
    return this.json('POST', '/v1/threads', { ...body, id: body.id || newId('thr_') }, opts);
  }

  /** The thread's snapshot: thread, runs, messages and offset (GET /v1/threads/{tid}). */
  getThread(threadId: string, opts?: RequestOptions): Promise<Snapshot> {
    return this.json('GET', `/v1/threads/${enc(threadId)}`, undefined, opts);
  }

  /** Threads, most recently updated first (GET /v1/threads). */
  listThreads(query: { status?: ThreadStatus; limit?: number; cursor?: string } = {}, opts?: RequestOptions): Promise<ThreadPage> {
    const q = new URLSearchParams();
    if (query.status) q.set('status', query.status);
    if (query.limit) q.set('limit', String(query.limit));
    if (query.cursor) q.set('cursor', query.cursor);
    const qs = q.toString();
    return this.json('GET', `/v1/threads${qs ? `?${qs}` : ''}`, undefined, opts);
  }

  /**
   * Deletes a thread, its log and runs (DELETE /v1/threads/{tid}). Rejects
   * `not_found` for no thread, but resolves when a retry after a try whose
   * outcome is unknown (a 5xx, no answer) finds none: that try deleted it.
   */
  async deleteThread(threadId: string, opts?: RequestOptions): Promise<void> {
    await this.json('DELETE', `/v1/threads/${enc(threadId)}`, undefined, { ...opts, goneIsDone: true });
  }

  /** The final answer of the latest run, or of `runId` (GET /v1/threads/{tid}/final-answer). */
  finalAnswer(threadId: string, opts: RequestOptions & { runId?: string } = {}): Promise<FinalAnswer> {
    const q = opts.runId ? `?run_id=${enc(opts.runId)}` : '';
    return this.json('GET', `/v1/threads/${enc(threadId)}/final-answer${q}`, undefined, opts);
  }

  /**
   * Creates a run (POST /v1/threads/{tid}/runs), with `idempotencyKey` or
   * one made for this call as its `Idempotency-Key`, so that a retry never
   * starts a second run.
   */
  createRun(threadId: string, body: RunRequest = {}, opts: CreateRunOptions = {}): Promise<Run> {
    const headers: Record<string, string> = { 'Idempotency-Key': opts.idempotencyKey ?? newKey() };
    return this.json('POST', `/v1/threads/${enc(threadId)}/runs`, body, { ...opts, headers });
  }

  /** A run and its messages (GET /v1/runs/{rid}). */
  getRun(runId: string, opts?: RequestOptions | AbortSignal): Promise<RunWithMessages> {
    const o = opts instanceof AbortSignal ? { signal: opts } : opts;
    return this.json('GET', `/v1/runs/${enc(runId)}`, undefined, o);
  }

  /** Asks to cancel a run (POST /v1/runs/{rid}/cancel); a finished run is returned unchanged. */
  cancelRun(runId: string, opts?: RequestOptions): Promise<Run> {
    return this.json('POST', `/v1/runs/${enc(runId)}/cancel`, {}, opts);
  }

  /**
   * Answers the open request of a waiting run (POST /v1/runs/{rid}/input).
   * The server takes the same answer to the same request again for the
   * answer it took (a retry after a lost answer resolves), and a run never
   * asks again under an answered request id; another answer to an answered
   * request rejects `conflict`.
   */
  submitInput(runId: string, requestId: string, value: JSONValue, opts?: RequestOptions): Promise<Run> {
    return this.json('POST', `/v1/runs/${enc(runId)}/input`, { request_id: requestId, value }, opts);
  }

  /**
   * Follows a thread, a run or a message over SSE (or the client's
   * {@link TetherClientOptions.transport}), resuming after every drop from
   * the last event received (Last-Event-ID), with backoff and
   * jitter, a readiness timeout, a stall detector driven by `ping`, and a
   * reconnect at once on `online` and when the tab becomes visible. A run or
   * message subscription closes after its terminal event. Throws a
   * TypeError if the target names neither a thread nor a run.
   */
  subscribe(target: SubscribeTarget, options: SubscribeOptions = {}): Subscription {
    if (!target.threadId && !target.runId) throw new TypeError('subscribe: a threadId or a runId is needed');
    return new SubscriptionImpl(this, target, this.withDefaults(options));
  }

  /**
   * Creates a run and follows it in one request (POST
   * /v1/threads/{tid}/runs/stream). The run id is read from Content-Location;
   * a dropped stream resumes with GET /v1/runs/{rid}/events and
   * Last-Event-ID. The POST carries an Idempotency-Key, so a POST that got
   * no answer is retried without making a second run. With the WebSocket
   * transport the run is made by POST /v1/threads/{tid}/runs (the same
   * key) and followed on the socket from its first event.
   */
  createRunStream(threadId: string, body: RunRequest = {}, options: SubscribeOptions & { idempotencyKey?: string } = {}): Subscription {
    const create = { threadId, body, idempotencyKey: options.idempotencyKey ?? newKey() };
    return new SubscriptionImpl(this, {}, this.withDefaults(options), create);
  }

  /**
   * Keeps a {@link ThreadStore} in sync with a thread: a thread
   * subscription, plus the truncation fallback, reconciliation polling and
   * resync described in {@link FollowOptions}.
   */
  followThread(threadId: string, options: FollowOptions = {}): LiveThread {
    return new LiveThread(this, threadId, options);
  }

  /** Keeps a run store in sync with one run (GET /v1/runs/{rid}/events), with the same safeguards. */
  followRun(runId: string, options: FollowOptions = {}): LiveRun {
    return new LiveRun(this, { runId }, options);
  }

  /** Creates a run with {@link createRunStream} and keeps a run store in sync with it. */
  startRun(threadId: string, body: RunRequest = {}, options: FollowOptions & { idempotencyKey?: string } = {}): LiveRun {
    return new LiveRun(this, { threadId, body, idempotencyKey: options.idempotencyKey ?? newKey() }, options);
  }

  /** @internal */
  withDefaults<T extends ConnectionOptions>(o: T): T {
    const d = this.options;
    return {
      readinessTimeoutMs: d.readinessTimeoutMs,
      stallHeartbeats: d.stallHeartbeats,
      heartbeatMs: d.heartbeatMs,
      backoff: d.backoff,
      maxAttempts: d.maxAttempts,
      timers: d.timers,
      lifecycle: d.lifecycle,
      ...Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)),
    } as T;
  }

  /** @internal */
  newSubscription(target: SubscribeTarget | Record<string, never>, options: SubscribeOptions, create?: { threadId: string; body: unknown; idempotencyKey: string }): Subscription {
    return new SubscriptionImpl(this, target, this.withDefaults(options), create);
  }
}
