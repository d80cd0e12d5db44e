// @tether/client/ag-ui: an AG-UI agent whose runs survive every drop.
//
// TetherAgent is the real HttpAgent of @ag-ui/client, pointed at Tether's
// AG-UI routes (docs/ag-ui.md). A run POSTs as HttpAgent does; when the
// stream drops (network, a server restart, its max lifetime) it joins the
// run again and reconciles what the server says with what the client has
// open, so that the pipeline (verifyEvents, the reducer, subscribers) sees
// one unbroken run: the answer once, nothing twice. connect() joins the
// thread's current run (after a page reload, for instance).
import {
  EventType,
  HttpAgent,
  enforceOutgoingInput,
  transformHttpEventStream,
  type AgentSubscriber,
  type BaseEvent,
  type HttpAgentConfig,
  type RunAgentParameters,
  type RunAgentResult,
  type RunAgentInput,
} from '@ag-ui/client';
import { Observable, type Subscription } from 'rxjs';
import { errorFromResponse, toTetherError } from './errors.js';
import { backoffDelay, defaultTimers, type BackoffOptions, type Timers } from './timing.js';
import { TokenKeeper, authorized, errorCode, type TokenSource } from './token.js';

/** Options of a {@link TetherAgent}: HttpAgent's, and how it resumes. */
export interface TetherAgentConfig extends HttpAgentConfig {
  /**
   * The base of Tether's AG-UI routes, e.g. `http://127.0.0.1:8080/v1/ag-ui`.
   * Defaults to `url` without its last path segment (the agent's name):
   * `…/v1/ag-ui/demo` gives `…/v1/ag-ui`.
   */
  baseUrl?: string;
  /** Delays between attempts to join again after a drop. Defaults: 250 ms, doubling to 5 s. */
  backoff?: BackoffOptions;
  /**
   * How many attempts in a row may fail (no event received) before the run
   * fails with the last error. Defaults to 20.
   */
  maxAttempts?: number;
  /** Timers, injectable for tests. Defaults to the global ones. */
  timers?: Timers;
  /**
   * A bearer token, or a function returning one, sent as `Authorization`
   * (see `TetherClientOptions.token`): a JWT is asked for again before its
   * `exp` and when the server answers `token_expired`; a stream cut at the
   * token's expiry is joined again with the new one.
   */
  token?: TokenSource;
  /** How long before a JWT's `exp` a new one is asked for. Defaults to 30 s (at most half its lifetime). */
  refreshAheadMs?: number;
}

/** What the Tether projection adds to every event's metadata (key `tether`). */
export interface TetherEventMetadata {
  /** The Tether offset the event comes from. */
  offset: string;
  /** The Tether run it belongs to. */
  run_id?: string;
  /** Set on the frames of a join prelude. */
  prelude?: boolean;
}

/**
 * An AG-UI agent backed by Tether: a subclass of `@ag-ui/client`'s
 * `HttpAgent` (a drop-in replacement) whose `runAgent()` and
 * `connectAgent()` resume after any drop. Point `url` at
 * `POST /v1/ag-ui/{agent}` of a Tether server.
 *
 * The events it hands on carry no `metadata.tether` (it is read and taken
 * off); {@link TetherAgent.tetherRunId} and {@link TetherAgent.lastOffset}
 * say where the agent is in the thread's log.
 */
export class TetherAgent extends HttpAgent {
  /** The base of the AG-UI routes (see {@link TetherAgentConfig.baseUrl}). */
  readonly baseUrl: string;
  private readonly backoff: BackoffOptions;
  private readonly maxAttempts: number;
  private readonly timers: Timers;
  private readonly tokens: TokenKeeper;
  /**
   * The Tether run followed: the one a run request created (its
   * `Content-Location`), else that of the last event received, if any.
   * A new `runAgent()` or `connectAgent()` forgets the run before.
   */
  tetherRunId: string | undefined;
  /** The Tether offset of the last event received, if any. */
  lastOffset: string | undefined;

  /** Creates an agent; see {@link TetherAgentConfig}. */
  constructor(config: TetherAgentConfig) {
    super(config);
    this.baseUrl = (config.baseUrl ?? config.url.replace(/\/[^/]*\/?$/, '')).replace(/\/$/, '');
    this.backoff = { initialMs: 250, maxMs: 5_000, ...config.backoff };
    this.maxAttempts = config.maxAttempts ?? 20;
    this.timers = config.timers ?? defaultTimers;
    this.tokens = new TokenKeeper(config.token, { refreshAheadMs: config.refreshAheadMs }, this.timers);
  }

  /**
   * Runs the agent: `POST url` with the input, as HttpAgent does; after a
   * drop, joins the run again until it ends.
   */
  override run(input: RunAgentInput): Observable<BaseEvent> {
    // A stop button pressed before this run's first event must not name
    // the run followed before (cancelRun).
    this.tetherRunId = undefined;
    const init = this.requestInit(enforceOutgoingInput(input));
    return this.follow(input, () => this.send(this.url, init), input.resume?.length ? 'rejoin' : 'repeat', input.runId);
  }

  /**
   * Joins the thread's current run (running or waiting, else the latest):
   * its messages, then what it streams, until it ends or asks for input. A
   * thread without runs, or that does not exist yet, gives nothing.
   */
  protected override connect(input: RunAgentInput): Observable<BaseEvent> {
    this.tetherRunId = undefined;
    return this.follow(input, () => this.send(this.joinUrl(input.threadId, 'current'), this.getInit()), 'rejoin', undefined);
  }

  /**
   * Joins the thread's current run and follows it to its end (see
   * {@link TetherAgent.connect}); `abortRun()` stops it.
   */
  override connectAgent(parameters?: RunAgentParameters, subscriber?: AgentSubscriber): Promise<RunAgentResult> {
    this.abortController = new AbortController();
    return super.connectAgent(parameters, subscriber);
  }

  /**
   * Returns a clone; it shares nothing with this agent but its
   * configuration and state, as HttpAgent's does.
   */
  override clone(): TetherAgent {
    const c = super.clone() as TetherAgent;
    Object.assign(c, { baseUrl: this.baseUrl, backoff: this.backoff, maxAttempts: this.maxAttempts, timers: this.timers, tokens: this.tokens });
    return c;
  }

  /**
   * One request with the token; a 401 `token_expired` is sent once more
   * with a new one. Throws a TetherError `token_unavailable` when the token
   * function throws (retried like a drop).
   */
  private async send(url: string, init: RequestInit): Promise<Response> {
    let token = await this.tokens.get();
    let res = await this.fetch(url, authorized(init, token));
    if (res.status === 401 && this.tokens.refreshable && (await errorCode(res)) === 'token_expired') {
      this.tokens.expired(token);
      token = await this.tokens.get();
      res.body?.cancel().catch(() => {});
      res = await this.fetch(url, authorized(init, token));
    }
    return res;
  }

  /**
   * Asks the server to end the run, for a stop button: the Tether run this
   * agent follows ({@link tetherRunId}), else the thread's active run.
   * `abortRun()` only stops following, and the run, durable, goes on (so a
   * page that is closed or reloaded does not stop it); this stops it. The
   * run then ends `cancelled`, and a stream still following it ends with
   * `RUN_FINISHED{outcome: cancelled}`. Resolves false when the thread has
   * no run to cancel; rejects with a TetherError.
   */
  async cancelRun(): Promise<boolean> {
    const run = this.tetherRunId ?? 'current';
    const url = `${this.baseUrl}/threads/${encodeURIComponent(this.threadId)}/runs/${encodeURIComponent(run)}/cancel`;
    let res: Response;
    try {
      res = await this.send(url, { method: 'POST', headers: { ...this.headers } });
    } catch (err) {
      throw toTetherError(err);
    }
    if (!res.ok) throw await errorFromResponse(res);
    res.body?.cancel().catch(() => {});
    return res.status !== 204;
  }

  private joinUrl(threadId: string, runId: string): string {
    return `${this.baseUrl}/threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/events`;
  }

  private getInit(signal: AbortSignal = this.abortController.signal): RequestInit {
    return { method: 'GET', headers: { ...this.headers, Accept: 'text/event-stream' }, signal };
  }

  /**
   * The events of one AG-UI run: from `first`, then, after each drop, from
   * a join of the run (its prelude reconciled with what is open).
   * `onEarlyFailure` says what to do when `first` fails before any event:
   * send it again (a POST of a new run is idempotent by its runId) or join.
   */
  private follow(input: RunAgentInput, first: () => Promise<Response>, onEarlyFailure: 'repeat' | 'rejoin', runId: string | undefined): Observable<BaseEvent> {
    return new Observable<BaseEvent>((out) => {
      // The run's own signal, taken now: abortRun() ends the run also while
      // it waits to join again (no request to abort then), and a join never
      // takes the signal of a later run (runAgent makes a new controller).
      const signal = this.abortController.signal;
      const open = new OpenSet();
      let current: Subscription | undefined;
      let stopHttp = () => {};
      let timer: unknown;
      let failures = 0;
      let received = false;
      let done = false;

      const onAbort = () => finish(new DOMException('the run was aborted', 'AbortError'));
      const finish = (err?: unknown) => {
        if (done) return;
        done = true;
        signal.removeEventListener('abort', onAbort);
        if (timer !== undefined) this.timers.clearTimeout(timer);
        stopHttp();
        if (err === undefined) out.complete();
        else out.error(err);
      };
      const deliver = (e: BaseEvent) => {
        if (runId !== undefined && (e.type === EventType.RUN_STARTED || e.type === EventType.RUN_FINISHED)) {
          (e as { runId?: string }).runId = runId;
        }
        open.apply(e);
        out.next(e);
      };
      const start = (request: () => Promise<Response>, resync: boolean) => {
        const sync = resync ? new Resync(open) : undefined;
        let ended = false;
        const http = httpEvents(async () => {
          const res = await request();
          // The run a run request created, before any of its events (it
          // may wait for a worker): what a stop button stops.
          const created = /^\/v1\/runs\/([^/?#]+)$/.exec(res.headers.get('content-location') ?? '');
          if (res.ok && created) this.tetherRunId = decodeURIComponent(created[1]!);
          if (res.status === 204 || (res.status === 404 && !received)) {
            // Nothing to join (a thread without runs, or none yet).
            ended = true;
            return new Response('', { status: 200, headers: { 'content-type': 'text/event-stream' } });
          }
          return res;
        });
        stopHttp = http.stop;
        current = transformHttpEventStream(http.events$ as Parameters<typeof transformHttpEventStream>[0]).subscribe({
          next: (e) => {
            received = true;
            failures = 0;
            const md = takeMetadata(e);
            if (md) {
              this.lastOffset = md.offset;
              if (md.run_id) this.tetherRunId = md.run_id;
            }
            for (const x of sync ? sync.take(e, md?.prelude === true) : [e]) deliver(x);
            if (open.ended) {
              ended = true;
              finish();
            }
          },
          error: (err) => {
            if (done) return;
            if (sync) for (const x of sync.flush()) deliver(x);
            retry(err);
          },
          complete: () => {
            if (done) return;
            if (sync) for (const x of sync.flush()) deliver(x);
            // A clean end before the run's end is a drop too (a proxy
            // that cut the stream): join again.
            if (ended || open.ended || (!open.runOpen && received && !resync)) finish();
            else retry(new Error('the stream ended before the run did'));
          },
        });
      };
      const retry = (err: unknown) => {
        if (isAbort(err) || !retryable(err) || ++failures > this.maxAttempts) {
          finish(err);
          return;
        }
        timer = this.timers.setTimeout(() => {
          timer = undefined;
          if (done) return;
          if (!received && onEarlyFailure === 'repeat') start(first, false);
          else start(() => this.send(this.joinUrl(input.threadId, this.tetherRunId ?? 'current'), this.getInit(signal)), true);
        }, backoffDelay(failures - 1, this.backoff, this.timers.random));
      };

      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      start(first, false);
      return () => {
        done = true;
        signal.removeEventListener('abort', onAbort);
        if (timer !== undefined) this.timers.clearTimeout(timer);
        current?.unsubscribe();
        stopHttp();
      };
    });
  }
}

/**
 * The response as the HTTP events transformHttpEventStream reads (what
 * `runHttpRequest` of @ag-ui/client makes), but whose teardown never
 * rejects: `runHttpRequest` rethrows the error of cancelling a body that a
 * drop already broke, an unhandled rejection at every drop.
 */
function httpEvents(request: () => Promise<Response>): { events$: Observable<HttpEvent>; stop: () => void } {
  let stop = () => {};
  const events$ = new Observable<HttpEvent>((sub) => {
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    let closed = false;
    (async () => {
      const res = await request();
      if (!res.ok) {
        const text = await res.text().catch(() => '');
        const err = new Error(`HTTP ${res.status}: ${text}`) as Error & { status: number };
        err.status = res.status;
        throw err;
      }
      if (!res.body) throw new Error('the response has no body');
      reader = res.body.getReader();
      if (closed) return void reader.cancel().catch(() => {});
      sub.next({ type: 'headers', status: res.status, headers: res.headers });
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        sub.next({ type: 'data', data: value });
      }
      sub.complete();
    })().catch((err) => sub.error(err));
    stop = () => {
      closed = true;
      reader?.cancel().catch(() => {});
    };
    return stop;
  });
  // transformHttpEventStream reads its source to the end whoever listens:
  // stop() ends the read when the agent is done.
  return { events$, stop: () => stop() };
}

type HttpEvent = { type: string; status?: number; headers?: Headers; data?: Uint8Array };

function isAbort(err: unknown): boolean {
  return (err as { name?: string } | undefined)?.name === 'AbortError';
}

/** A drop, a refused connection, a 5xx or a token function that failed is worth another try; a 4xx is not. */
function retryable(err: unknown): boolean {
  const status = (err as { status?: number } | undefined)?.status;
  return status === undefined || status === 0 || status >= 500 || status === 429;
}

/** Reads and removes `metadata.tether` (the metadata goes if it empties). */
function takeMetadata(e: BaseEvent): TetherEventMetadata | undefined {
  const md = (e as { metadata?: Record<string, unknown> }).metadata;
  const t = md?.tether as TetherEventMetadata | undefined;
  if (!md || !t) return undefined;
  delete md.tether;
  if (Object.keys(md).length === 0) delete (e as { metadata?: unknown }).metadata;
  return t;
}

/** What a client has open: the constructs verifyEvents tracks. */
class OpenSet {
  runOpen = false;
  ended = false;
  readonly text = new Set<string>();
  readonly reasoning = new Set<string>();
  readonly spans = new Set<string>();
  readonly tools = new Set<string>();
  readonly steps = new Set<string>();

  apply(e: BaseEvent): void {
    const x = e as BaseEvent & { messageId?: string; toolCallId?: string; stepName?: string };
    switch (e.type) {
      case EventType.RUN_STARTED:
        this.runOpen = true;
        break;
      case EventType.RUN_FINISHED:
      case EventType.RUN_ERROR:
        this.runOpen = false;
        this.ended = true;
        for (const s of [this.text, this.reasoning, this.spans, this.tools, this.steps]) s.clear();
        break;
      case EventType.TEXT_MESSAGE_START:
        this.text.add(x.messageId!);
        break;
      case EventType.TEXT_MESSAGE_END:
        this.text.delete(x.messageId!);
        break;
      case EventType.REASONING_START:
        this.spans.add(x.messageId!);
        break;
      case EventType.REASONING_END:
        this.spans.delete(x.messageId!);
        break;
      case EventType.REASONING_MESSAGE_START:
        this.reasoning.add(x.messageId!);
        break;
      case EventType.REASONING_MESSAGE_END:
        this.reasoning.delete(x.messageId!);
        break;
      case EventType.TOOL_CALL_START:
        this.tools.add(x.toolCallId!);
        break;
      case EventType.TOOL_CALL_END:
        this.tools.delete(x.toolCallId!);
        break;
      case EventType.STEP_STARTED:
        this.steps.add(x.stepName!);
        break;
      case EventType.STEP_FINISHED:
        this.steps.delete(x.stepName!);
        break;
    }
  }

  /** The ENDs of everything open (but the run), tool calls first. */
  ends(keep: (kind: string, id: string) => boolean = () => false): BaseEvent[] {
    const out: BaseEvent[] = [];
    for (const id of this.tools) if (!keep('tool', id)) out.push({ type: EventType.TOOL_CALL_END, toolCallId: id } as BaseEvent);
    for (const id of this.text) if (!keep('text', id)) out.push({ type: EventType.TEXT_MESSAGE_END, messageId: id } as BaseEvent);
    for (const id of this.reasoning) if (!keep('reasoning', id)) out.push({ type: EventType.REASONING_MESSAGE_END, messageId: id } as BaseEvent);
    for (const id of this.spans) if (!keep('span', id)) out.push({ type: EventType.REASONING_END, messageId: id } as BaseEvent);
    for (const name of [...this.steps].reverse()) if (!keep('step', name)) out.push({ type: EventType.STEP_FINISHED, stepName: name } as BaseEvent);
    return out;
  }
}

const starts: Record<string, [kind: string, key: 'messageId' | 'toolCallId']> = {
  [EventType.TEXT_MESSAGE_START]: ['text', 'messageId'],
  [EventType.REASONING_START]: ['span', 'messageId'],
  [EventType.REASONING_MESSAGE_START]: ['reasoning', 'messageId'],
  [EventType.TOOL_CALL_START]: ['tool', 'toolCallId'],
};

/**
 * Reconciles the join prelude of a run with what the client already has:
 * the prelude's RUN_STARTED is dropped while the client's run is open, its
 * STARTs for what the client has open are dropped, and what the client has
 * open that the prelude does not reopen is ended once the prelude is over,
 * before anything else. MESSAGES_SNAPSHOT goes through: it replaces the
 * client's messages with the server's, so content after it is appended to
 * exactly what the server had.
 */
class Resync {
  private inPrelude = true;
  private readonly reopened = new Set<string>();

  constructor(private readonly open: OpenSet) {}

  /** The events to hand on for `e`; `prelude` says whether it is a prelude frame. */
  take(e: BaseEvent, prelude: boolean): BaseEvent[] {
    if (this.inPrelude && prelude) {
      if (e.type === EventType.RUN_STARTED) return this.open.runOpen ? [] : [e];
      const start = starts[e.type];
      if (start) {
        const id = (e as unknown as Record<string, string>)[start[1]]!;
        this.reopened.add(`${start[0]}:${id}`);
        const has = start[0] === 'text' ? this.open.text : start[0] === 'span' ? this.open.spans : start[0] === 'reasoning' ? this.open.reasoning : this.open.tools;
        return has.has(id) ? [] : [e];
      }
      if (e.type === EventType.RUN_FINISHED || e.type === EventType.RUN_ERROR) return [...this.flush(), e];
      return [e];
    }
    const out = this.flush();
    // A step the client never saw start has no end to send.
    if (e.type === EventType.STEP_FINISHED && !this.open.steps.has((e as { stepName?: string }).stepName!)) return out;
    // Whatever the client still has open is ended before its run is.
    if (e.type === EventType.RUN_FINISHED) out.push(...this.open.ends());
    out.push(e);
    return out;
  }

  /** Ends the prelude: the ENDs of what it did not reopen. */
  flush(): BaseEvent[] {
    if (!this.inPrelude) return [];
    this.inPrelude = false;
    const ends = this.open.ends((kind, id) => kind !== 'step' && this.reopened.has(`${kind}:${id}`));
    for (const e of ends) this.open.apply(e); // applied again when handed on: the same
    return ends;
  }
}
