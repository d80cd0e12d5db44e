// A fetch that wraps the real one to break things the way networks do: cut
// a response body after some bytes, refuse or hang requests, or hand the
// body over in uneven chunks. Tests then check what the client made of it.

export type Action =
  | { kind: 'pass' }
  | { kind: 'cut'; after: number } // deliver `after` bytes of the body, then drop the connection
  | { kind: 'fail' } // the request never reaches the server (network error)
  | { kind: 'hang' } // the request gets no answer until it is aborted
  | { kind: 'stall'; after: number } // deliver `after` bytes, then nothing, connection kept open
  | { kind: 'rechunk'; sizes: number[] } // the whole body, in chunks of these sizes (cycled)
  | { kind: 'landed' }; // the server does the request, but its answer is a 503 unavailable (a write whose outcome was lost)

export interface Rule {
  /** Which requests: method and URL. */
  match: (method: string, url: string) => boolean;
  /** What to do; called per matching request (n counts the matches from 0). */
  action: (n: number) => Action;
}

export class Wire {
  private rules: Rule[] = [];
  private counts = new Map<Rule, number>();
  /** Bodies delivered through the wire that are not finished yet. */
  open = 0;
  readonly log: string[] = [];

  constructor(private readonly base: typeof fetch = globalThis.fetch) {}

  /** Adds a rule; the first matching rule wins. Returns a function that removes it. */
  on(match: Rule['match'], action: Rule['action']): () => void {
    const rule = { match, action };
    this.rules.push(rule);
    return () => {
      this.rules = this.rules.filter((r) => r !== rule);
    };
  }

  clear(): void {
    this.rules = [];
  }

  fetch = async (input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> => {
    const url = String(input);
    const method = init.method ?? 'GET';
    const rule = this.rules.find((r) => r.match(method, url));
    let action: Action = { kind: 'pass' };
    if (rule) {
      const n = this.counts.get(rule) ?? 0;
      this.counts.set(rule, n + 1);
      action = rule.action(n);
    }
    const lastId = new Headers(init.headers).get('last-event-id');
    this.log.push(`${method} ${url} ${action.kind}${lastId ? ` last-event-id=${lastId}` : ''}`);
    const signal = init.signal ?? undefined;
    if (action.kind === 'fail') throw new TypeError('fetch failed (wire: refused)');
    if (action.kind === 'hang') {
      await new Promise((_, reject) => {
        if (signal?.aborted) reject(signal.reason);
        signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
      });
    }
    const res = await this.base(input, init);
    if (action.kind === 'landed') {
      await res.arrayBuffer().catch(() => {});
      return new Response(JSON.stringify({ error: { code: 'unavailable', message: 'the request timed out; its outcome is unknown, retry it' } }), {
        status: 503,
        headers: { 'content-type': 'application/json' },
      });
    }
    if (!res.body || action.kind === 'pass' || action.kind === 'hang') return this.track(res, res.body);
    return this.track(res, this.wrap(res.body, action, signal));
  };

  private track(res: Response, body: ReadableStream<Uint8Array> | null): Response {
    if (!body) return res;
    this.open++;
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        this.open--;
      }
    };
    const reader = body.getReader();
    const tracked = new ReadableStream<Uint8Array>({
      async pull(c) {
        try {
          const { done: end, value } = await reader.read();
          if (end) {
            finish();
            c.close();
          } else c.enqueue(value);
        } catch (err) {
          finish();
          c.error(err);
        }
      },
      cancel(reason) {
        finish();
        return reader.cancel(reason).catch(() => {});
      },
    });
    return new Response(tracked, { status: res.status, statusText: res.statusText, headers: res.headers });
  }

  private wrap(body: ReadableStream<Uint8Array>, action: Action, signal?: AbortSignal): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    let sent = 0;
    let queue: Uint8Array = new Uint8Array(0);
    let k = 0;
    return new ReadableStream<Uint8Array>({
      async pull(c) {
        if (action.kind === 'rechunk') {
          const want = Math.max(1, action.sizes[k % action.sizes.length]!);
          while (queue.length < want) {
            const { done, value } = await reader.read();
            if (done) break;
            const q = new Uint8Array(queue.length + value.length);
            q.set(queue);
            q.set(value, queue.length);
            queue = q;
          }
          if (queue.length === 0) return c.close();
          k++;
          c.enqueue(queue.slice(0, want));
          queue = queue.slice(want);
          return;
        }
        const limit = (action as { after: number }).after;
        if (sent >= limit) {
          if (action.kind === 'cut') {
            await reader.cancel().catch(() => {});
            return c.error(new TypeError('network error (wire: cut)'));
          }
          // stall: keep the connection open, deliver nothing more
          await new Promise((_, reject) => {
            if (signal?.aborted) reject(signal.reason);
            signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
          }).catch((err) => {
            reader.cancel().catch(() => {});
            c.error(err);
          });
          return;
        }
        const { done, value } = await reader.read();
        if (done) return c.close();
        const chunk = value.slice(0, limit - sent);
        sent += chunk.length;
        c.enqueue(chunk);
      },
      cancel(reason) {
        return reader.cancel(reason).catch(() => {});
      },
    });
  }
}

/** Matches GET subscriptions (…/events), not the POST that creates a run stream. */
export const isEventsGet = (method: string, url: string) => method === 'GET' && /\/events(\?|$)/.test(url);
/** Matches the POST /runs/stream. */
export const isRunStreamPost = (method: string, url: string) => method === 'POST' && url.includes('/runs/stream');
