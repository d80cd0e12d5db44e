// One connection per thread shared by the tabs of an origin: a leader tab
// holds the subscription and relays it over a BroadcastChannel; the others
// follow. When the leader goes, another takes over from its last offset.

import type { TetherError } from './errors.js';
import type { CloseReason, ConnectionState, StatusInfo, SubscribeOptions, Subscription } from './subscription.js';
import { defaultTimers, type Timers } from './timing.js';
import type { Offset, Snapshot, TetherEvent } from './types.js';
import { compareOffsets, isEventOffset } from './types.js';

/** Options of sharing one connection across tabs (`FollowOptions.share`). */
export interface ShareOptions {
  /** The channel name; tabs with the same name share. Defaults to one per server and thread. */
  channel?: string;
  /** How often the leader says it is alive. Defaults to 1 s. */
  heartbeatMs?: number;
  /** A leader silent this long is gone; a follower takes over. Defaults to 3.5 s. */
  leaseMs?: number;
  /** How long an election waits for a leader or a lower claim. Defaults to 150 ms. */
  electionMs?: number;
  /** The BroadcastChannel class. Defaults to the global one. */
  BroadcastChannel?: typeof BroadcastChannel;
}

/** A tab's part in a shared subscription. */
export type ShareRole = 'electing' | 'leader' | 'follower';

type Msg =
  | { t: 'who' | 'beat' | 'claim' | 'bye'; from: string }
  | { t: 'ev'; from: string; e: TetherEvent }
  | { t: 'snap'; from: string; s: Snapshot }
  | { t: 'status'; from: string; state: ConnectionState };

/** Whether sharing can work here (a BroadcastChannel exists). */
export function canShare(opts: ShareOptions = {}): boolean {
  return typeof (opts.BroadcastChannel ?? globalThis.BroadcastChannel) === 'function';
}

/**
 * @internal A Subscription that is the real one in the leader tab and a
 * relay in the others. Followers load a snapshot over REST, then apply the
 * events the leader relays (by offset, so an overlap is harmless).
 */
export class SharedSubscription implements Subscription {
  state: ConnectionState = 'connecting';
  cursor: Offset | undefined;
  runId: string | undefined = undefined;
  readonly closed: Promise<{ reason: CloseReason; error?: TetherError }>;
  /** This tab's role now. */
  role: ShareRole = 'electing';

  private readonly id = Math.random().toString(36).slice(2) + Date.now().toString(36);
  private readonly ch: BroadcastChannel;
  private readonly timers: Timers;
  private inner: Subscription | undefined;
  private isClosed = false;
  private resolveClosed!: (v: { reason: CloseReason; error?: TetherError }) => void;
  private leaderSeenAt = 0;
  private lowerClaim = false;
  private electTimer: unknown;
  private beatTimer: unknown;
  private leaseTimer: unknown;
  private retryTimer: unknown;
  private loading = false;
  private wakeRetry: (() => void) | undefined;
  private buffer: TetherEvent[] = [];
  private loaded = false;
  private readonly offPageHide: (() => void) | undefined;

  constructor(
    private readonly open: (opts: SubscribeOptions) => Subscription,
    private readonly opts: SubscribeOptions,
    private readonly share: ShareOptions,
    channel: string,
    private readonly load: () => Promise<Snapshot>,
  ) {
    this.timers = opts.timers ?? defaultTimers;
    this.closed = new Promise((r) => (this.resolveClosed = r));
    const BC = share.BroadcastChannel ?? globalThis.BroadcastChannel;
    this.ch = new BC(share.channel ?? channel);
    this.ch.onmessage = (m: MessageEvent<Msg>) => this.receive(m.data);
    if (typeof window !== 'undefined' && window.addEventListener) {
      const bye = () => this.close();
      window.addEventListener('pagehide', bye);
      this.offPageHide = () => window.removeEventListener('pagehide', bye);
    }
    queueMicrotask(() => {
      if (this.isClosed) return;
      this.status('connecting', { attempt: 0 });
      this.elect();
    });
  }

  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    if (this.role === 'leader') this.post({ t: 'bye', from: this.id });
    this.inner?.close();
    this.inner = undefined;
    for (const h of [this.electTimer, this.beatTimer, this.leaseTimer, this.retryTimer]) this.timers.clearTimeout(h);
    this.wakeRetry?.();
    this.ch.close();
    this.offPageHide?.();
    this.state = 'closed';
    this.opts.onStatus?.('closed', { attempt: 0, reason: 'closed' });
    this.resolveClosed({ reason: 'closed' });
  }

  reconnect(): void {
    this.inner?.reconnect();
  }

  setCursor(offset: Offset, force = false): void {
    if (force || compareOffsets(offset, this.cursor) > 0) this.cursor = offset;
    this.inner?.setCursor(offset, force);
  }

  private post(m: Msg): void {
    if (this.isClosed && m.t !== 'bye') return;
    try {
      this.ch.postMessage(m);
    } catch {
      // The channel is gone (the page is being torn down): nothing to tell.
    }
  }

  private status(state: ConnectionState, info: StatusInfo): void {
    if (state === this.state && info.delayMs === undefined && state !== 'connecting') return;
    this.state = state;
    this.opts.onStatus?.(state, info);
  }

  // elect asks who leads; with no answer in electionMs it claims, and leads
  // unless a lower claim or a leader shows up meanwhile.
  private elect(): void {
    if (this.isClosed) return;
    this.role = 'electing';
    this.lowerClaim = false;
    const wait = this.share.electionMs ?? 150;
    this.post({ t: 'who', from: this.id });
    this.electTimer = this.timers.setTimeout(() => {
      if (this.isClosed || this.role !== 'electing') return;
      this.post({ t: 'claim', from: this.id });
      this.electTimer = this.timers.setTimeout(() => {
        if (this.isClosed || this.role !== 'electing') return;
        if (this.lowerClaim) return this.follow();
        this.lead();
      }, wait);
    }, wait);
  }

  private receive(m: Msg): void {
    if (this.isClosed || m.from === this.id) return;
    switch (m.t) {
      case 'who':
        if (this.role === 'leader') this.post({ t: 'beat', from: this.id });
        return;
      case 'claim':
        if (this.role === 'leader') this.post({ t: 'beat', from: this.id });
        else if (m.from < this.id) this.lowerClaim = true;
        return;
      case 'beat':
        if (this.role === 'leader') {
          if (m.from < this.id) this.stepDown(); // two leaders: the lower id stays
          return;
        }
        this.leaderSeenAt = this.timers.now();
        if (this.role === 'electing') this.follow();
        return;
      case 'bye':
        if (this.role === 'follower') this.elect();
        return;
    }
    if (this.role !== 'follower') return;
    this.leaderSeenAt = this.timers.now();
    if (m.t === 'status') {
      if (m.state !== 'closed') this.status(m.state, { attempt: 0 });
    } else if (m.t === 'snap') {
      this.deliverSnapshot(m.s);
    } else if (m.t === 'ev') {
      if (!this.loaded) this.buffer.push(m.e);
      else this.deliver(m.e);
    }
  }

  private lead(): void {
    this.role = 'leader';
    this.timers.clearTimeout(this.leaseTimer);
    const beat = () => {
      this.post({ t: 'beat', from: this.id });
      this.beatTimer = this.timers.setTimeout(beat, this.share.heartbeatMs ?? 1000);
    };
    beat();
    // A follower that takes over resumes from what it has seen.
    const after = this.cursor ?? this.opts.after;
    this.inner = this.open({
      ...this.opts,
      ...(after !== undefined ? { after } : {}),
      onSnapshot: (s) => {
        this.post({ t: 'snap', from: this.id, s });
        this.deliverSnapshot(s);
      },
      onEvent: (e) => {
        this.post({ t: 'ev', from: this.id, e });
        this.deliver(e);
      },
      onStatus: (state, info) => {
        if (state !== 'closed') this.post({ t: 'status', from: this.id, state });
        if (state === 'closed' && this.role !== 'leader') return; // stepped down
        if (state === 'closed' && !this.isClosed) {
          this.isClosed = true;
          this.post({ t: 'bye', from: this.id });
          this.state = 'closed';
          this.opts.onStatus?.(state, info);
          this.resolveClosed(info.error ? { reason: info.reason ?? 'error', error: info.error } : { reason: info.reason ?? 'closed' });
          return;
        }
        this.status(state, info);
      },
      onConnected: this.opts.onConnected,
      onError: this.opts.onError,
    });
  }

  private stepDown(): void {
    this.timers.clearTimeout(this.beatTimer);
    this.role = 'follower';
    const inner = this.inner;
    this.inner = undefined;
    inner?.close();
    this.follow();
  }

  private follow(): void {
    this.role = 'follower';
    this.timers.clearTimeout(this.electTimer);
    this.leaderSeenAt = this.timers.now();
    this.status('open', { attempt: 0 });
    this.watchLease();
    if (!this.loaded && !this.loading) void this.catchUp();
  }

  private watchLease(): void {
    const lease = this.share.leaseMs ?? 3500;
    this.timers.clearTimeout(this.leaseTimer);
    this.leaseTimer = this.timers.setTimeout(() => {
      if (this.isClosed || this.role !== 'follower') return;
      if (this.timers.now() - this.leaderSeenAt >= lease) {
        this.status('reconnecting', { attempt: 0 });
        this.elect();
      } else this.watchLease();
    }, lease / 2);
  }

  // catchUp loads the state over REST, then applies what the leader relayed
  // meanwhile: nothing is missed, since the snapshot was read after joining.
  private async catchUp(): Promise<void> {
    this.loading = true;
    for (let attempt = 0; !this.isClosed && !this.loaded; attempt++) {
      try {
        const snap = await this.load();
        if (this.isClosed) return;
        this.deliverSnapshot(snap);
        this.loaded = true;
        for (const e of this.buffer.splice(0)) this.deliver(e);
      } catch {
        await new Promise<void>((r) => {
          this.wakeRetry = r;
          this.retryTimer = this.timers.setTimeout(r, Math.min(5000, 250 * 2 ** attempt));
        });
        this.wakeRetry = undefined;
      }
    }
    this.loading = false;
  }

  private deliverSnapshot(s: Snapshot): void {
    if (s.reset || !isEventOffset(this.cursor) || compareOffsets(s.offset, this.cursor) > 0) this.cursor = s.offset;
    this.loaded = true;
    this.opts.onSnapshot?.(s);
  }

  private deliver(e: TetherEvent): void {
    if (isEventOffset(this.cursor) && compareOffsets(e.offset, this.cursor) <= 0) return;
    this.cursor = e.offset;
    this.opts.onEvent?.(e);
  }
}
