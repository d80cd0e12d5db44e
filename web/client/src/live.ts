// Live stores: a subscription feeding a ThreadStore, with the fallbacks for
// when the stream is not enough: truncation recovery, reconciliation
// polling and resync after divergence.

import type { RunRequest, RunWithMessages, TetherClient } from './client.js';
import { SharedSubscription, canShare, type ShareOptions } from './shared.js';
import { ThreadStore, type ApplyResult } from './store.js';
import type { ConnectionOptions, ConnectionState, StatusInfo, SubscribeOptions, Subscription } from './subscription.js';
import { defaultTimers, type Timers } from './timing.js';
import type { JSONValue, Offset, Run, Snapshot, TetherEvent } from './types.js';
import { compareOffsets, isTerminalRunStatus } from './types.js';

/** Options of {@link TetherClient.followThread}, {@link TetherClient.followRun} and {@link TetherClient.startRun}. */
export interface FollowOptions extends ConnectionOptions {
  /** The store to fill (e.g. one that outlives a React effect). Defaults to a new one. */
  store?: ThreadStore;
  /** Where to start (see {@link SubscribeOptions.after}); defaults to a snapshot first, or the store's offset if it has state. */
  after?: Offset;
  /**
   * Failed resumes in a row, while a run is unfinished, after which the
   * client stops relying on the stream alone and starts fetching the
   * server's snapshot (the truncation fallback). The stream is still
   * retried meanwhile. Defaults to 3.
   */
  resumeAttempts?: number;
  /** Delays between the fallback's fetches; the last repeats. Defaults to `[1000, 2000, 4000, 5000]`. */
  recoverySchedule?: number[];
  /** The fallback stops after this long, keeping the latest state it got. Defaults to 240 s. */
  recoveryMaxMs?: number;
  /** While a run is unfinished, poll its status this often and settle if it ended. Defaults to 15 s; 0 disables. */
  reconcileIntervalMs?: number;
  /** Each event as it arrives from the stream, with what the store did with it. */
  onEvent?(event: TetherEvent, result: ApplyResult): void;
  /**
   * Thread stores only: share one connection among the tabs of this origin
   * that follow the same thread (a BroadcastChannel leader relays it; another
   * tab takes over when the leader closes). Ignored where BroadcastChannel
   * does not exist. Off by default.
   */
  share?: boolean | ShareOptions;
}

/** @internal */
interface RunCreate {
  threadId: string;
  body: RunRequest;
  idempotencyKey: string;
}

/** What {@link Live} and subclasses share. */
abstract class Live {
  /** The state, for rendering. */
  readonly store: ThreadStore;
  /** The subscription feeding the store. */
  readonly subscription: Subscription;

  protected closedFlag = false;
  private dead = false; // the subscription closed on a fatal error
  private recovering = false;
  private gaveUp = false; // the fallback gave up; it starts again only after the stream opened
  private recoveryStart = 0;
  private recoveryTimer: unknown;
  private reconcileTimer: unknown;
  private fetching: AbortController | undefined;
  /** Aborted by close(): the reconciliation's requests end with it. */
  private readonly life = new AbortController();
  private readonly timers: Timers;
  private readonly unstore: () => void;

  protected constructor(
    protected readonly client: TetherClient,
    protected readonly opts: FollowOptions,
    store: ThreadStore,
    open: (handlers: SubscribeOptions) => Subscription,
  ) {
    this.store = store;
    this.timers = opts.timers ?? client.options.timers ?? defaultTimers;
    const after = opts.after ?? (store.getState().loaded ? store.offset : undefined);
    this.subscription = open({
      ...(after !== undefined ? { after } : {}),
      ...pickConnection(opts),
      onSnapshot: (s) => (this.beforeEvent(), this.store.applySnapshot(s)),
      onEvent: (e) => {
        this.beforeEvent();
        const result = this.store.applyEvent(e);
        opts.onEvent?.(e, result);
        if (result === 'rejected') void this.resync();
      },
      onStatus: (state, info) => this.status(state, info),
      onError: (err) => this.store.setError(err),
    });
    // Reconciliation follows the store: armed while a run is unfinished.
    this.unstore = this.store.subscribe(() => this.armReconcile());
  }

  /** Stops everything: the subscription, the fallback, the polling. The store keeps its state. */
  close(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.subscription.close();
    this.stopRecovery();
    this.timers.clearTimeout(this.reconcileTimer);
    this.reconcileTimer = undefined;
    this.fetching?.abort();
    this.life.abort();
    this.unstore();
  }

  /** @internal Called before each snapshot or event from the stream. */
  protected beforeEvent(): void {}

  /** @internal The run ids whose end this live store waits for. */
  protected abstract watched(): string[];

  /** @internal The thread id, once known. */
  protected threadId(): string | undefined {
    return this.store.getState().threadId;
  }

  private unfinished(): boolean {
    return this.watched().length > 0;
  }

  private status(state: ConnectionState, info: StatusInfo): void {
    if (this.closedFlag) return;
    this.store.setConnection(state);
    if (state === 'open') {
      this.gaveUp = false;
      this.store.setError(undefined);
      if (this.recovering) this.stopRecovery('idle');
    }
    // attempt counts the drop itself, then each failed resume.
    if (state === 'reconnecting' && info.attempt > (this.opts.resumeAttempts ?? 3) && this.unfinished()) this.startRecovery();
    if (state === 'closed' && info.reason === 'done' && this.unfinished()) {
      // The server says the run ended but its end did not reach the store.
      void this.settle();
    }
    if (state === 'closed' && info.reason === 'error') {
      // An answer retrying cannot change (404: the thread was deleted, 401,
      // 403): polling the same server would not either.
      this.dead = true;
      this.stopRecovery(this.recovering ? 'gave_up' : undefined);
      this.onFatal();
    }
    this.armReconcile();
  }

  /** @internal Called once the subscription closed on an error retrying cannot fix. */
  protected onFatal(): void {}

  // fetchSnapshot gets the thread's snapshot over REST: it has an offset, so
  // the stream can resume right after it without a duplicate.
  private async fetchSnapshot(): Promise<Snapshot | undefined> {
    const ac = new AbortController();
    this.fetching = ac;
    try {
      let tid = this.threadId();
      if (!tid) {
        const rid = this.store.runId;
        if (!rid) return undefined;
        const r: RunWithMessages = await this.client.getRun(rid, { signal: ac.signal });
        tid = r.run.thread_id;
      }
      return await this.client.getThread(tid, { signal: ac.signal });
    } catch {
      return undefined;
    } finally {
      if (this.fetching === ac) this.fetching = undefined;
    }
  }

  private applyFetched(snap: Snapshot, recovered: boolean, force = false): void {
    if (this.closedFlag) return;
    if (this.store.applySnapshot(snap, { recovered, force })) this.subscription.setCursor(snap.offset, force);
    if (!this.unfinished() && this.store.runId && this.subscription?.state !== 'closed') {
      this.subscription.close(); // the followed run is settled: nothing more will come
    }
  }

  /** Fetches the snapshot once and applies it, flagged as recovered. */
  private async settle(): Promise<void> {
    const snap = await this.fetchSnapshot();
    if (snap) this.applyFetched(snap, true);
  }

  /**
   * Replaces a diverged state with the server's. The stream goes on while
   * the snapshot is fetched: one older than what it delivered meanwhile
   * would take the state back (a run that ended here would show running
   * again, with nothing more to come to end it), so it is fetched again,
   * and is then as new, since what the stream delivers was committed
   * first. Still older (a server behind), it is applied and the stream
   * resumes right after it, so that nothing it delivered since is lost;
   * unless the stream is over (the run followed ended on it): then none
   * can resume after the snapshot, which would show the run going again
   * for good, so the state stays as the stream left it (needsResync).
   */
  private async resync(): Promise<void> {
    let snap: Snapshot | undefined;
    let older = false;
    for (let tries = 0; tries < 3; tries++) {
      snap = await this.fetchSnapshot();
      if (!snap || this.closedFlag) return;
      older = compareOffsets(snap.offset, this.subscription.cursor) < 0;
      if (!older) break;
    }
    if (older && this.subscription.state === 'closed') return;
    this.applyFetched(snap!, false, true);
    if (older && !this.closedFlag) this.subscription.reconnect();
  }

  private startRecovery(): void {
    if (this.recovering || this.gaveUp || this.closedFlag) return;
    this.recovering = true;
    this.recoveryStart = this.timers.now();
    this.store.setRecovery('recovering');
    this.scheduleRecovery(0);
  }

  private scheduleRecovery(n: number): void {
    const schedule = this.opts.recoverySchedule ?? [1000, 2000, 4000, 5000];
    const delay = schedule[Math.min(n, schedule.length - 1)] ?? 5000;
    this.recoveryTimer = this.timers.setTimeout(async () => {
      this.recoveryTimer = undefined;
      if (!this.recovering || this.closedFlag) return;
      const snap = await this.fetchSnapshot();
      if (!this.recovering || this.closedFlag) return;
      if (snap) this.applyFetched(snap, true);
      if (!this.unfinished()) return this.stopRecovery('recovered');
      if (this.timers.now() - this.recoveryStart >= (this.opts.recoveryMaxMs ?? 240_000)) {
        this.gaveUp = true;
        return this.stopRecovery('gave_up');
      }
      this.scheduleRecovery(n + 1);
    }, delay);
  }

  private stopRecovery(state?: 'idle' | 'recovered' | 'gave_up'): void {
    this.recovering = false;
    this.timers.clearTimeout(this.recoveryTimer);
    this.recoveryTimer = undefined;
    if (state) this.store.setRecovery(state);
  }

  /** @internal */
  protected armReconcile(): void {
    const every = this.opts.reconcileIntervalMs ?? 15_000;
    const want = !this.closedFlag && !this.dead && every > 0 && this.unfinished();
    if (!want) {
      if (this.reconcileTimer !== undefined) {
        this.timers.clearTimeout(this.reconcileTimer);
        this.reconcileTimer = undefined;
      }
      return;
    }
    if (this.reconcileTimer !== undefined) return;
    this.reconcileTimer = this.timers.setTimeout(async () => {
      await this.reconcile();
      this.reconcileTimer = undefined;
      this.armReconcile();
    }, every);
  }

  // reconcile asks the server about each unfinished run; if one ended there
  // but not here, the state is settled from the server's snapshot.
  private async reconcile(): Promise<void> {
    for (const id of this.watched()) {
      if (this.closedFlag) return;
      try {
        const { run } = await this.client.getRun(id, { signal: this.life.signal });
        if (this.closedFlag) return;
        const local = this.store.run(id);
        if (isTerminalRunStatus(run.status) && !(local && isTerminalRunStatus(local.status))) {
          await this.settle();
          return;
        }
      } catch {
        // The next round will tell.
      }
    }
  }
}

function pickConnection(o: ConnectionOptions): ConnectionOptions {
  const out: ConnectionOptions = {};
  for (const k of ['readinessTimeoutMs', 'stallHeartbeats', 'heartbeatMs', 'backoff', 'maxAttempts', 'timers', 'lifecycle'] as const) {
    if (o[k] !== undefined) (out as Record<string, unknown>)[k] = o[k];
  }
  return out;
}

/**
 * A thread kept in sync: {@link store} holds its state, fed by a thread
 * subscription that stays open across runs. Start runs with
 * {@link LiveThread.startRun}: their events arrive on the same stream.
 */
export class LiveThread extends Live {
  /** @internal */
  constructor(client: TetherClient, readonly id: string, opts: FollowOptions) {
    const store = opts.store ?? new ThreadStore({ threadId: id });
    const share = opts.share === true ? {} : opts.share || undefined;
    super(client, opts, store, (h) =>
      share && canShare(share)
        ? new SharedSubscription(
            (o) => client.subscribe({ threadId: id }, o),
            client.withDefaults(h),
            share,
            `tether:${client.options.baseUrl}:thread:${id}`,
            () => client.getThread(id),
          )
        : client.subscribe({ threadId: id }, h),
    );
  }

  // Runs this client created: watched even before their run.created
  // arrives, so that a run started while the stream is down is reconciled.
  private readonly started = new Set<string>();

  protected watched(): string[] {
    const ids = new Set(this.store.unfinishedRuns().map((r) => r.id));
    for (const id of this.started) {
      const run = this.store.run(id);
      if (run && isTerminalRunStatus(run.status)) this.started.delete(id);
      else ids.add(id);
    }
    return [...ids];
  }

  /**
   * Creates a run on the thread (POST /runs); its events arrive through the
   * thread's subscription, and it is reconciled even if they do not.
   */
  async startRun(body: RunRequest = {}, opts?: { idempotencyKey?: string; signal?: AbortSignal }): Promise<Run> {
    const run = await this.client.createRun(this.id, body, opts);
    if (!this.closedFlag) {
      this.started.add(run.id);
      this.armReconcile();
    }
    return run;
  }

  /** Asks to cancel the active run (or `runId`); resolves with undefined when there is none. */
  async cancel(runId?: string): Promise<Run | undefined> {
    const id = runId ?? this.store.getState().activeRun?.id;
    return id ? this.client.cancelRun(id) : undefined;
  }

  /** Answers the open request of the waiting run. */
  async submitInput(value: JSONValue, requestId?: string): Promise<Run> {
    const run = this.store.getState().activeRun;
    const rq = requestId ?? run?.request?.id;
    if (!run || !rq) throw new Error('no run is waiting for input');
    return this.client.submitInput(run.id, rq, value);
  }
}

/**
 * One run kept in sync: {@link store} holds the run and its messages. Made
 * by {@link TetherClient.followRun} (an existing run) or
 * {@link TetherClient.startRun} (POST /runs/stream, then resume by GET).
 */
export class LiveRun extends Live {
  /** Resolves with the run once it is terminal in the store, or with undefined if closed before. */
  readonly finished: Promise<Run | undefined>;
  private readonly stopWaiting: () => void;

  /** @internal */
  constructor(client: TetherClient, target: { runId: string } | RunCreate, opts: FollowOptions) {
    const store = opts.store ?? new ThreadStore('runId' in target ? { runId: target.runId } : { threadId: target.threadId });
    super(client, opts, store, (h) =>
      'runId' in target ? client.subscribe({ runId: target.runId }, h) : client.newSubscription({}, h, target),
    );
    let resolve!: (r: Run | undefined) => void;
    this.finished = new Promise((r) => (resolve = r));
    const off = this.store.subscribe(() => {
      const id = this.runId;
      const run = id ? this.store.run(id) : undefined;
      if (run && isTerminalRunStatus(run.status)) {
        off();
        resolve(run);
      }
    });
    this.stopWaiting = () => {
      off();
      resolve(undefined);
    };
  }

  protected override onFatal(): void {
    this.stopWaiting?.(); // the run will not be followed: finished resolves with undefined
  }

  /** The run id, once known (at once for followRun; from Content-Location for startRun). */
  get runId(): string | undefined {
    return this.store.runId ?? this.subscription?.runId;
  }

  override close(): void {
    super.close();
    this.stopWaiting();
  }

  // The store learns the run id from the subscription (Content-Location)
  // before the first event, so it keeps only that run's events.
  protected override beforeEvent(): void {
    const id = this.subscription?.runId;
    if (id) this.store.setRunId(id);
  }

  protected watched(): string[] {
    const id = this.runId;
    if (!id) return [];
    const run = this.store.run(id);
    return run && isTerminalRunStatus(run.status) ? [] : [id];
  }

  /** Asks to cancel the run. */
  async cancel(): Promise<Run | undefined> {
    const id = this.runId;
    return id ? this.client.cancelRun(id) : undefined;
  }

  /** Answers the run's open request. */
  async submitInput(value: JSONValue, requestId?: string): Promise<Run> {
    const id = this.runId;
    const rq = requestId ?? (id ? this.store.run(id)?.request?.id : undefined);
    if (!id || !rq) throw new Error('the run is not waiting for input');
    return this.client.submitInput(id, rq, value);
  }
}

