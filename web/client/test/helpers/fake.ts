// A scripted stand-in for fetch: each request is answered by the next
// handler; SSE bodies are pushed by the test in whatever chunks it likes,
// and every body that is still open is counted.

export interface Recorded {
  url: string;
  method: string;
  headers: Headers;
  body: string | undefined;
}

/** An SSE body the test pushes into. */
export class Pipe {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  readonly stream: ReadableStream<Uint8Array>;
  closed = false;
  cancelled = false;
  private enc = new TextEncoder();

  constructor(private readonly onClose: () => void) {
    this.stream = new ReadableStream<Uint8Array>({
      start: (c) => {
        this.controller = c;
      },
      cancel: () => {
        this.cancelled = true;
        this.finish();
      },
    });
  }

  push(text: string | Uint8Array): void {
    if (this.closed) return;
    this.controller.enqueue(typeof text === 'string' ? this.enc.encode(text) : text);
  }

  /** Pushes `text` cut into chunks of the given sizes (cycled), in bytes. */
  pushChunked(text: string, sizes: number[]): void {
    const bytes = this.enc.encode(text);
    let i = 0;
    let k = 0;
    while (i < bytes.length) {
      const n = Math.max(1, sizes[k++ % sizes.length]!);
      this.push(bytes.slice(i, i + n));
      i += n;
    }
  }

  end(): void {
    if (this.closed) return;
    this.controller.close();
    this.finish();
  }

  fail(err: unknown = new TypeError('network error')): void {
    if (this.closed) return;
    this.controller.error(err);
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

export type Handler = (req: Recorded, signal: AbortSignal | undefined) => Response | Promise<Response> | Error;

export class FakeFetch {
  readonly requests: Recorded[] = [];
  readonly pipes: Pipe[] = [];
  private handlers: Handler[] = [];
  /** Used when the queue is empty. */
  fallback: Handler | undefined;
  open = 0;

  /** The fetch to inject. */
  fetch = async (input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> => {
    const rec: Recorded = {
      url: String(input),
      method: init.method ?? 'GET',
      headers: new Headers(init.headers),
      body: typeof init.body === 'string' ? init.body : undefined,
    };
    this.requests.push(rec);
    const signal = init.signal ?? undefined;
    if (signal?.aborted) throw new DOMException('aborted', 'AbortError');
    const h = this.handlers.shift() ?? this.fallback;
    if (!h) throw new TypeError(`no handler for ${rec.method} ${rec.url}`);
    const out = await h(rec, signal);
    if (out instanceof Error) throw out;
    return out;
  };

  /** Answers the next request with `h`. */
  next(...h: Handler[]): this {
    this.handlers.push(...h);
    return this;
  }

  /** An SSE answer whose body the test drives; aborting the request errors the body, as fetch does. */
  sse(headers: Record<string, string> = {}): { handler: Handler; pipe: Promise<Pipe> } {
    let resolve!: (p: Pipe) => void;
    const pipe = new Promise<Pipe>((r) => (resolve = r));
    const handler: Handler = (_req, signal) => {
      this.open++;
      const p = new Pipe(() => this.open--);
      this.pipes.push(p);
      signal?.addEventListener('abort', () => p.fail(new DOMException('aborted', 'AbortError')));
      resolve(p);
      return new Response(p.stream, { status: 200, headers: { 'Content-Type': 'text/event-stream', ...headers } });
    };
    return { handler, pipe };
  }

  /** Queues an SSE answer and returns its pipe once requested. */
  expectSSE(headers: Record<string, string> = {}): Promise<Pipe> {
    const { handler, pipe } = this.sse(headers);
    this.next(handler);
    return pipe;
  }
}

/** A JSON answer. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

/** An error answer with the server's body. */
export function errorResponse(status: number, code: string, message = code): Response {
  return json({ error: { code, message } }, status);
}

/** One SSE frame. */
export function frame(event: string, data: unknown, id?: string): string {
  return `${id ? `id: ${id}\n` : ''}event: ${event}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/** The frames of an event. */
export function eventFrame(e: { offset: string; type: string }): string {
  return frame(e.type, e, e.offset);
}

export function connected(extra: Record<string, unknown> = {}): string {
  return frame('connected', { thread_id: 't1', offset: '-1', heartbeat_ms: 1000, server_time: '2025-01-01T00:00:00.000Z', ...extra });
}

/** Lets pending promise callbacks run (a few rounds of microtasks and I/O). */
export async function settle(rounds = 40): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((r) => queueMicrotask(r));
}
