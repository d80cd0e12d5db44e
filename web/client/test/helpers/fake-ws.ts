// A scripted stand-in for the page's WebSocket: the test opens it, hands it
// frames, and drops it the way networks and servers do; what the client
// sends is kept, parsed.

import type { WebSocketLike } from '../../src/websocket.js';

export class FakeWS implements WebSocketLike {
  /** Every socket made, in order. */
  static made: FakeWS[] = [];

  readonly sent: Record<string, unknown>[] = [];
  /** The code the client closed it with, once it did. */
  closedWith: number | undefined;
  onopen: ((ev: unknown) => unknown) | null = null;
  onmessage: ((ev: { data: unknown }) => unknown) | null = null;
  onclose: ((ev: { code: number; reason: string }) => unknown) | null = null;
  onerror: ((ev: unknown) => unknown) | null = null;

  constructor(readonly url: string) {
    FakeWS.made.push(this);
  }

  send(data: string): void {
    if (this.closedWith !== undefined) return;
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
  }

  close(code = 1005): void {
    this.closedWith ??= code;
  }

  /** The upgrade succeeded. */
  open(): void {
    this.onopen?.({});
  }

  /** The server sends a frame (an object, or raw text). */
  recv(frame: object | string): void {
    this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) });
  }

  /** The socket ends (1006: cut without a close frame). */
  drop(code = 1006, reason = ''): void {
    this.closedWith ??= code;
    this.onclose?.({ code, reason });
  }

  /** The subscribe frames sent, in order. */
  subscribes(): Record<string, unknown>[] {
    return this.sent.filter((f) => f.op === 'subscribe');
  }

  /** The last subscribe frame's id. */
  lastId(): string {
    const s = this.subscribes();
    return s[s.length - 1]!.id as string;
  }

  /** Whether the client still holds the socket open. */
  get live(): boolean {
    return this.closedWith === undefined;
  }
}
