// A page for test/integration/websocket-browser.test.ts: live thread stores
// of one TetherClient on the WebSocket transport, with the page's own
// WebSocket, driven from the test through window.wsPage.
import { TetherClient } from '../../src/client.js';
import type { LiveThread } from '../../src/live.js';
import type { ApplyResult } from '../../src/store.js';
import { webSocket } from '../../src/websocket.js';

const lives = new Map<string, LiveThread>();
const results: Record<string, number> = {};
let client: TetherClient | undefined;

const wsPage = {
  /** Follows each thread (a thread store each) with a client on the WebSocket transport. */
  follow(tids: string[], token?: string): void {
    client ??= new TetherClient({ baseUrl: '', transport: webSocket(), backoff: { initialMs: 50, maxMs: 400 }, ...(token ? { token } : {}) });
    for (const tid of tids) {
      lives.set(tid, client.followThread(tid, { reconcileIntervalMs: 0, onEvent: (_e, r: ApplyResult) => void (results[r] = (results[r] ?? 0) + 1) }));
    }
  },
  /** Each store's state, as the server's snapshot would have it. */
  states(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [tid, l] of lives) {
      const v = l.store.getState();
      out[tid] = { thread: v.thread, runs: v.runs, messages: v.messages, offset: v.offset, loaded: v.loaded, connection: v.connection, error: v.error?.code };
    }
    return JSON.parse(JSON.stringify(out)) as Record<string, unknown>;
  },
  results,
  /** Resolves with how a subscription to `tid` closed. */
  async closedOf(tid: string): Promise<unknown> {
    const c = await lives.get(tid)!.subscription.closed;
    return { reason: c.reason, code: c.error?.code, status: c.error?.status };
  },
  close(): void {
    for (const l of lives.values()) l.close();
  },
};

(window as unknown as { wsPage: typeof wsPage }).wsPage = wsPage;
document.body.dataset.ready = 'true';
