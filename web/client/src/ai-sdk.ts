// @tether/client/ai-sdk: a ChatTransport for the AI SDK's useChat that
// resumes a dropped answer from its exact offset (docs/ai-sdk.md).
import type { ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import { parseUIStream } from './ai-sdk-stream.js';
import { TetherError, errorFromResponse, toTetherError } from './errors.js';
import { TokenKeeper, authorized, errorCode, type TokenSource } from './token.js';

export type { UIFrame } from './ai-sdk-stream.js';
export { parseUIStream } from './ai-sdk-stream.js';

/** Options of {@link TetherChatTransport}. */
export interface TetherChatTransportOptions {
  /**
   * The chat route of an agent: `https://tether.example/v1/ai-sdk/demo/chat`,
   * or a path on the page's origin (`/v1/ai-sdk/demo/chat`).
   */
  api: string;
  /**
   * A bearer token, or a function returning one, sent as `Authorization`.
   * Defaults to none. A function's JWT is asked for again before its `exp`
   * (see {@link refreshAheadMs}) and when the server answers
   * `token_expired` (a 401, or a stream's `reconnect` reason): the request
   * is sent again, the stream resumes from its offset. A function that
   * throws fails that request (`token_unavailable: …`); a stream retries
   * it like a drop.
   */
  token?: TokenSource;
  /** How long before a JWT's `exp` a new one is asked for. Defaults to 30 s (at most half its lifetime). */
  refreshAheadMs?: number;
  /** More request headers, or a function returning them per request. Defaults to none. */
  headers?: Record<string, string> | (() => Record<string, string> | Promise<Record<string, string>>);
  /**
   * More fields of every chat request's body, such as `metadata` (the run's
   * metadata, e.g. `{demo: {tokens: 200}}`). A request's own `body` is
   * merged over them. Defaults to none.
   */
  body?: Record<string, unknown>;
  /** The fetch to use (tests inject one). Defaults to `globalThis.fetch`. */
  fetch?: typeof fetch;
  /** Waits between reconnects: doubling from `initialMs` to `maxMs`, with jitter. Defaults to 250 ms and 5 s. */
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * Reconnects in a row that bring nothing new before the stream gives up
   * with a network error (useChat then keeps the message as a disconnect and
   * `reconnectToStream` later goes on from the same offset). Defaults to 8.
   */
  maxAttempts?: number;
  /**
   * A stream that brings nothing (not even the server's ping comment) for
   * this long is taken as dead and reconnected. Defaults to 45 s (the
   * server pings every 15 s).
   */
  idleTimeoutMs?: number;
}

/** Where a chat's latest stream stands: its run and the offset of its last whole event. */
export interface ChatPosition {
  /** The run the stream follows. */
  runId: string;
  /** The offset of the last event whose chunks were all delivered, or `undefined` before the first. */
  offset: string | undefined;
  /** The stream delivered its terminal chunk (finish or abort). */
  ended: boolean;
}

/** What a {@link TetherChatTransport} measured, for tests and dashboards. */
export interface TransportStats {
  /** Connections opened for streams (the first request and every reconnect). */
  connections: number;
  /** Reconnects after a drop. */
  reconnects: number;
  /** Bytes of chunks received that had been received before (re-sent after a reconnect). Always 0 unless the server replays. */
  resentBytes: number;
  /** Bytes of stream received, all connections together. */
  bytes: number;
  /** Bytes of the frames delivered (committed with their event); `bytes - committedBytes` is what drops cost (partial events received twice, pings). */
  committedBytes: number;
}

/**
 * A `ChatTransport` for `useChat` that talks to Tether's AI SDK routes
 * (`/v1/ai-sdk/{agent}/chat`) and survives drops: when a stream is cut, it
 * reconnects from the offset of the last event it delivered, so useChat's
 * stream goes on as if nothing happened and no chunk is sent twice. On a page
 * load (`useChat({resume: true})`, when it knows no offset) it falls back to
 * the server's rebuild of the active answer from its snapshot, or, with
 * none active, of the chat's last answer if a run has appended since
 * {@link loadMessages} loaded the chat's messages (an answer that ended
 * between the load and the resume).
 *
 * `resumeStreamIsReplay` is `false`: when useChat itself resumes after the
 * transport gave up (a long outage), the stream continues from the exact
 * offset on top of the message useChat kept.
 *
 * @example
 * ```ts
 * const transport = new TetherChatTransport({ api: '/v1/ai-sdk/demo/chat' });
 * const initial = await transport.loadMessages(chatId);
 * // in a component:
 * const { messages, sendMessage } = useChat({ id: chatId, messages: initial, transport, resume: true });
 * ```
 */
export class TetherChatTransport<UI_MESSAGE extends UIMessage = UIMessage> implements ChatTransport<UI_MESSAGE> {
  /** Resumes are continuations from the exact offset, never replays (see the class's doc). */
  readonly resumeStreamIsReplay = false;
  /** Counters of connections, reconnects and bytes. */
  readonly stats: TransportStats = { connections: 0, reconnects: 0, resentBytes: 0, bytes: 0, committedBytes: 0 };

  private readonly opts: TetherChatTransportOptions;
  private readonly positions = new Map<string, ChatPosition>();
  /** The offsets chats' messages were loaded as of (loadMessages), until a stream of the chat is followed. */
  private readonly loadedAt = new Map<string, string>();
  private readonly tokens: TokenKeeper;
  private readonly sentWith = new WeakMap<Response, string | undefined>();

  constructor(opts: TetherChatTransportOptions) {
    this.opts = opts;
    this.tokens = new TokenKeeper(opts.token, { refreshAheadMs: opts.refreshAheadMs });
  }

  /** Where the latest stream of a chat stands, if this transport served one. */
  position(chatId: string): ChatPosition | undefined {
    const p = this.positions.get(chatId);
    return p ? { ...p } : undefined;
  }

  /**
   * Loads a chat's messages (`GET {api}/{chatId}/messages`), for useChat's
   * `messages`, and notes the offset they are as of: the next
   * `reconnectToStream` of the chat (useChat's resume on mount) then
   * brings it up to date from there, also when the answer it holds partly
   * has ended meanwhile (a resume that asks only for the active answer is
   * told there is none, and leaves the partial answer as the whole).
   */
  async loadMessages(chatId: string): Promise<UI_MESSAGE[]> {
    const res = await this.request(`${this.base()}/${encodeURIComponent(chatId)}/messages`, {
      method: 'GET',
      headers: await this.headers(undefined),
    });
    const offset = res.headers.get('tether-offset');
    if (offset) this.loadedAt.set(chatId, offset);
    else this.loadedAt.delete(chatId);
    return (await res.json()) as UI_MESSAGE[];
  }

  /** Sends the chat's messages (`POST {api}`) and returns the answer's chunks, resumed across drops. */
  async sendMessages(options: Parameters<ChatTransport<UI_MESSAGE>['sendMessages']>[0]): Promise<ReadableStream<UIMessageChunk>> {
    const { chatId, messages, trigger, messageId, abortSignal } = options;
    const body = {
      ...this.opts.body,
      ...(options.body as Record<string, unknown> | undefined),
      id: chatId,
      messages: unanswered(messages),
      trigger,
      ...(messageId !== undefined ? { messageId } : {}),
    };
    const res = await this.request(this.opts.api, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(await this.headers(options.headers)) },
      body: JSON.stringify(body),
      signal: abortSignal ?? null,
    });
    // An answer to a waiting run's request (the last message is the
    // run's, its part answered) continues the message the page holds.
    const continues = trigger === 'submit-message' && messages.at(-1)?.role === 'assistant';
    return this.follow(chatId, res, abortSignal, options.headers, continues);
  }

  /**
   * Resumes a chat's answer: from the exact offset of the stream this
   * transport last served for the chat, else (a page load) the server's
   * rebuild of the active answer, or, with none active, of the last one
   * if a run has appended since {@link loadMessages} loaded the chat.
   * `null` when nothing is active and nothing happened since the load.
   */
  async reconnectToStream(
    options: Parameters<ChatTransport<UI_MESSAGE>['reconnectToStream']>[0],
  ): Promise<ReadableStream<UIMessageChunk> | null> {
    const { chatId, abortSignal } = options;
    const pos = this.positions.get(chatId);
    let url = `${this.base()}/${encodeURIComponent(chatId)}/stream`;
    const loaded = this.loadedAt.get(chatId);
    if (pos && !pos.ended) url += this.cursor(pos);
    else if (loaded) url += `?after=${encodeURIComponent(loaded)}`;
    const res = await this.request(url, { method: 'GET', headers: await this.headers(options.headers), signal: abortSignal ?? null });
    if (res.status === 204) return null;
    return this.follow(chatId, res, abortSignal, options.headers);
  }

  private base(): string {
    const q = this.opts.api.search(/[?#]/);
    return (q === -1 ? this.opts.api : this.opts.api.slice(0, q)).replace(/\/$/, '');
  }

  private cursor(pos: ChatPosition): string {
    return `?run_id=${encodeURIComponent(pos.runId)}` + (pos.offset ? `&after=${encodeURIComponent(pos.offset)}` : '');
  }

  private async headers(extra: Record<string, string> | Headers | undefined): Promise<Record<string, string>> {
    const h = typeof this.opts.headers === 'function' ? await this.opts.headers() : (this.opts.headers ?? {});
    const out: Record<string, string> = { ...h };
    if (extra instanceof Headers) extra.forEach((v, k) => (out[k] = v));
    else Object.assign(out, extra);
    return out;
  }

  // request sends with the token; a 401 token_expired is sent once more
  // with a new one.
  private async request(url: string, init: RequestInit): Promise<Response> {
    const f = this.opts.fetch ?? globalThis.fetch;
    this.stats.connections++;
    let token = await this.token();
    let res = await f(url, authorized(init, token));
    if (res.status === 401 && this.tokens.refreshable && (await errorCode(res)) === 'token_expired') {
      this.tokens.expired(token);
      token = await this.token();
      res.body?.cancel().catch(() => {});
      res = await f(url, authorized(init, token));
    }
    this.sentWith.set(res, token);
    if (!res.ok && res.status !== 204) throw chatError(await errorFromResponse(res));
    return res;
  }

  private async token(): Promise<string | undefined> {
    try {
      return await this.tokens.get();
    } catch (err) {
      throw chatError(toTetherError(err));
    }
  }

  /**
   * The chunks of a stream, committed an event at a time (a frame with an
   * `id` ends each event's chunks), reconnecting after the last committed
   * event until the terminal chunk.
   */
  private follow(
    chatId: string,
    first: Response,
    signal: AbortSignal | undefined,
    extraHeaders: Record<string, string> | Headers | undefined,
    continues = false,
  ): ReadableStream<UIMessageChunk> {
    const m = /\/v1\/runs\/([^/?#]+)/.exec(first.headers.get('content-location') ?? '')?.[1];
    const runId = m ? decodeURIComponent(m) : '';
    const prev = this.positions.get(chatId);
    let pos: ChatPosition = runId && prev && prev.runId === runId && !prev.ended ? prev : { runId, offset: undefined, ended: false };
    if (continues && runId) {
      // The answer's stream goes on from where the page's message is: the
      // end of the run's last stream here (its waiting point), else the
      // messages loaded. A drop before its first frame resumes from
      // there, not with the whole message rebuilt, which useChat would
      // add to the message it continues (every part twice).
      const offset = prev?.runId === runId ? prev.offset : this.loadedAt.get(chatId);
      pos = { runId, offset, ended: false };
    }
    this.positions.set(chatId, pos);
    this.loadedAt.delete(chatId); // the chat's streams are followed from here
    const initial = this.opts.backoff?.initialMs ?? 250;
    const maxWait = this.opts.backoff?.maxMs ?? 5000;
    const maxAttempts = this.opts.maxAttempts ?? 8;
    const idleMs = this.opts.idleTimeoutMs ?? 45_000;
    let res: Response | undefined = first;
    let controllerRef: ReadableStreamDefaultController<UIMessageChunk>;
    const self = this;

    async function pump(): Promise<void> {
      let failures = 0;
      let resumed = false;
      for (;;) {
        if (signal?.aborted) return;
        if (!res) {
          try {
            res = await self.request(`${self.base()}/${encodeURIComponent(chatId)}/stream${self.cursor(pos)}`, {
              method: 'GET',
              headers: await self.headers(extraHeaders),
              signal: signal ?? null,
            });
            self.stats.reconnects++;
            resumed = true;
          } catch (err) {
            if (signal?.aborted) return;
            if (err instanceof Error && !(err instanceof TypeError) && /^(gone|bad_request|not_found)/.test(err.message)) throw err;
            failures++;
            if (failures >= maxAttempts) throw new TypeError(`network error: the stream could not be resumed (${String(err)})`);
            await sleep(backoff(initial, maxWait, failures), signal);
            continue;
          }
        }
        const got = await read(res, resumed);
        res = undefined;
        if (got.progress) failures = 0;
        if (pos.ended || signal?.aborted) return;
        // A response that brought nothing new (a drop before the next
        // event, or a run that ended at the offset) counts as a failure.
        if (!got.progress) failures++;
        if (failures >= maxAttempts) throw new TypeError('network error: the stream keeps dropping');
        await sleep(backoff(initial, maxWait, failures), signal);
      }
    }

    // Reads one response: commits chunks a whole event at a time.
    async function read(r: Response, resumed: boolean): Promise<{ progress: boolean }> {
      let pending: UIMessageChunk[] = [];
      let pendingBytes = 0;
      let progress = false;
      const body = r.body;
      if (!body) return { progress };
      const idle = new AbortController();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => idle.abort(), idleMs);
      };
      arm();
      const onAbort = () => idle.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const f of parseUIStream(body, idle.signal, (n) => {
          self.stats.bytes += n;
          arm();
        })) {
          if (f.event !== undefined && f.event !== 'message') {
            // A control frame: the server ends the stream after it.
            if (f.event === 'reconnect' && f.chunk?.reason === 'token_expired') self.tokens.expired(self.sentWith.get(r));
            continue;
          }
          pending.push(f.chunk as UIMessageChunk);
          pendingBytes += f.size;
          if (f.id === undefined) continue;
          if (resumed && pos.offset !== undefined && f.id <= pos.offset) {
            // Already delivered (a server that replays): dropped, counted.
            self.stats.resentBytes += pendingBytes;
          } else {
            for (const c of pending) controllerRef.enqueue(c);
            self.stats.committedBytes += pendingBytes;
            pos.offset = f.id;
            progress = true;
            if (isTerminal(pending[pending.length - 1]!)) {
              pos.ended = true;
              return { progress };
            }
          }
          pending = [];
          pendingBytes = 0;
        }
      } catch {
        // a drop: resume from the last committed event
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
      // Chunks of the stream's end that carry no id (none today) still end it.
      if (pending.length > 0 && isTerminal(pending[pending.length - 1]!) && !idle.signal.aborted) {
        for (const c of pending) controllerRef.enqueue(c);
        pos.ended = true;
        progress = true;
      }
      return { progress };
    }

    return new ReadableStream<UIMessageChunk>({
      start(controller) {
        controllerRef = controller;
        pump().then(
          () => {
            try {
              controller.close();
            } catch {
              // already closed
            }
          },
          (err) => controller.error(err),
        );
      },
      cancel() {
        // useChat stopped reading (stop()): its abortSignal ends the fetch.
      },
    });
  }
}

/**
 * The messages of a chat request that the server reads: the user and
 * system messages (those it does not hold yet are the run's input), and
 * the last message, whatever it is (an answer whose request, or call's
 * approval, it answers).
 * The other answers the chat's thread holds already; sent again with
 * every request, a long chat would outgrow the largest request body the
 * server takes (`--max-body`).
 */
function unanswered<M extends UIMessage>(messages: M[]): M[] {
  return messages.filter((m, i) => m.role !== 'assistant' || i === messages.length - 1);
}

function isTerminal(c: UIMessageChunk): boolean {
  return c.type === 'finish' || c.type === 'abort';
}

function backoff(initial: number, max: number, n: number): number {
  const d = Math.min(max, initial * 2 ** Math.max(0, n - 1));
  return d / 2 + Math.random() * (d / 2);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * chatError is the error a chat request fails with: a TetherError (code,
 * status) whose message starts with its code, as useChat shows the message
 * alone.
 */
function chatError(e: TetherError): TetherError {
  return new TetherError(e.code, `${e.code}: ${e.message}`, e.status, {
    cause: e,
    ...(e.requestId ? { requestId: e.requestId } : {}),
    ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {}),
  });
}
