// One connection of a subscription over fetch-based SSE (protocol §5,
// "SSE"): the request, and the frames read into the subscription.

import { endReason, failure } from './control.js';
import { TetherError, errorFromResponse } from './errors.js';
import { SSEFrameTooLargeError, SSEParser, type SSEFrame } from './sse.js';
import type { Attempt, Connector, SubscriptionImpl } from './subscription.js';
import type { ConnectedInfo, Snapshot, TetherEvent } from './types.js';
import { isEventOffset } from './types.js';

const enc = encodeURIComponent;

function buildRequest(sub: SubscriptionImpl): { path: string; init: RequestInit } {
  // Only CORS-safelisted headers and those the server allows in preflights
  // (Last-Event-ID, Idempotency-Key, Content-Type, Authorization): no Cache-Control.
  const headers: Record<string, string> = { Accept: 'text/event-stream' };
  const { create, target, opts } = sub;
  if (create && !sub.runId) {
    headers['Content-Type'] = 'application/json';
    headers['Idempotency-Key'] = create.idempotencyKey;
    return {
      path: `/v1/threads/${enc(create.threadId)}/runs/stream`,
      init: { method: 'POST', headers, body: JSON.stringify(create.body ?? {}) },
    };
  }
  const q = new URLSearchParams();
  if (target.messageId) q.set('message_id', target.messageId);
  if (opts.types?.length) q.set('types', opts.types.join(','));
  const from = sub.resumeFrom();
  if (isEventOffset(sub.cursor)) headers['Last-Event-ID'] = sub.cursor;
  else if (from) q.set('after', from);
  const base = sub.runId ? `/v1/runs/${enc(sub.runId)}/events` : `/v1/threads/${enc(target.threadId!)}/events`;
  const qs = q.toString();
  return { path: qs ? `${base}?${qs}` : base, init: { method: 'GET', headers } };
}

/** @internal The default connector: one fetch-based SSE stream per connection. */
export const sseConnector: Connector = {
  async connect(sub, a) {
    const o = a.o;
    const { path, init } = buildRequest(sub);
    const res = await sub.transport.request(path, { ...init, signal: a.signal });
    if (a.signal.aborted) return;
    if (!res.ok) {
      const err = await errorFromResponse(res);
      Object.assign(o, { error: err, fatal: !err.retryable });
      return;
    }
    if (sub.create && !sub.runId) {
      const loc = res.headers.get('content-location') ?? '';
      const m = /\/v1\/runs\/([^/?#]+)$/.exec(loc);
      if (m) sub.runId = decodeURIComponent(m[1]!);
    }
    const ct = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (ct !== 'text/event-stream' || !res.body) {
      res.body?.cancel().catch(() => {});
      Object.assign(o, { fatal: true, error: new TetherError('protocol', `server answered ${ct || 'no content type'}, not an event stream`, res.status) });
      return;
    }
    let last = sub.timers.now();
    a.activity = () => last;
    let stop = false;
    const parser = new SSEParser((f) => {
      if (!stop) stop = frame(sub, a, f);
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    try {
      while (!stop) {
        const { done, value } = await reader.read();
        if (a.signal.aborted) return;
        if (done) break;
        last = sub.timers.now();
        parser.feed(decoder.decode(value, { stream: true }));
      }
    } catch (err) {
      if (!(err instanceof SSEFrameTooLargeError)) throw err;
      Object.assign(o, { fatal: true, error: new TetherError('too_large', err.message) });
      return;
    } finally {
      reader.cancel().catch(() => {});
    }
    if (o.tokenExpired) sub.transport.tokenExpired?.(res);
  },
};

function parse<T>(a: Attempt, data: string, what: string): T | undefined {
  try {
    return JSON.parse(data) as T;
  } catch {
    a.o.error = new TetherError('protocol', `${what} is not valid JSON`);
    a.o.fatal = true;
    return undefined;
  }
}

// frame handles one frame; it returns true to end the connection.
function frame(sub: SubscriptionImpl, a: Attempt, f: SSEFrame): boolean {
  if (a.signal.aborted) return true;
  switch (f.event) {
    case 'connected': {
      let info: ConnectedInfo | undefined;
      try {
        info = JSON.parse(f.data) as ConnectedInfo;
      } catch {
        /* keep the defaults */
      }
      sub.opened(a, info ?? undefined);
      return false;
    }
    case 'ping':
      return false;
    case 'reconnect':
    case 'end':
      // reconnect: the server ends the stream and asks to resume (a stream
      // that could not start because the store did not answer says why).
      // end: the subscription is complete (the run or message ended, or the
      // thread was deleted), or could not start (an unknown thread, run or
      // message: the error its status would have said).
      sub.ended(a, f.event === 'reconnect', endReason(f.data), failure(f.data));
      return true;
    case 'snapshot': {
      if (f.noData) return false;
      const snap = parse<Snapshot>(a, f.data, 'the snapshot');
      if (!snap) return true;
      if (!snap.offset && f.id) snap.offset = f.id;
      return sub.snapshot(a, snap);
    }
  }
  if (f.noData || f.id === undefined) return false; // a control frame this client does not know
  const ev = parse<TetherEvent>(a, f.data, `event ${f.id}`);
  if (!ev) return true;
  if (!ev.offset) ev.offset = f.id;
  if (!ev.type) ev.type = f.event;
  return sub.event(a, ev);
}
