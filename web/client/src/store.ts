// The client-side state of a thread (or of one run), built on the reducer,
// framework-free: the web app uses it directly, the React hooks wrap it.

import type { TetherError } from './errors.js';
import { Reducer } from './reducer.js';
import type { ConnectionState } from './subscription.js';
import type { FinalAnswer, Message, Offset, Run, Snapshot, TetherEvent, Thread } from './types.js';
import { compareOffsets, isTerminalRunStatus } from './types.js';
import { knownEventType } from './validate.js';

/**
 * Where the store is in recovering from a stream that keeps failing:
 * `recovering` while it polls the server's snapshot, `recovered` once the
 * followed runs were settled that way, `gave_up` after the maximum wait.
 */
export type RecoveryState = 'idle' | 'recovering' | 'recovered' | 'gave_up';

/** What {@link ThreadStore.applyEvent} did with an event. */
export type ApplyResult =
  /** Folded into the state. */
  | 'applied'
  /** At or before the store's offset: already applied (a replay, an overlapping stream). */
  | 'duplicate'
  /** For a run that already ended here: nothing can follow a terminal event. */
  | 'stale'
  /** Of another run than the one a run store follows (a superseded run's stream). */
  | 'superseded'
  /** An event type this client does not know (a newer server): passed on, not folded. */
  | 'skipped'
  /** Impossible in the local state: the store has diverged and needs a fresh snapshot ({@link StoreView.needsResync}). */
  | 'rejected';

/**
 * An immutable view of the store, for rendering. A new object is made on
 * each change; the thread, runs and messages that did not change are the
 * same objects as in the previous view.
 */
export interface StoreView {
  /** The thread id, once known. */
  threadId: string | undefined;
  /** The run a run store follows (undefined for a thread store). */
  runId: string | undefined;
  /** Whether any state arrived yet (a snapshot or an event). */
  loaded: boolean;
  /** The thread, as of `offset` (for a run store: as of its last snapshot, with derived status). */
  thread: Thread | undefined;
  /** Runs in creation order (a run store holds only its run). */
  runs: readonly Run[];
  /** Messages in creation order. */
  messages: readonly Message[];
  /** Offset of the last event or snapshot applied. */
  offset: Offset;
  /** The run that is running or waiting, else the oldest pending one. */
  activeRun: Run | undefined;
  /** Connection state of the subscription feeding the store. */
  connection: ConnectionState;
  /** Truncation recovery (see {@link RecoveryState}). */
  recovery: RecoveryState;
  /** Runs whose end state came from a REST snapshot rather than the stream. */
  recoveredRuns: ReadonlySet<string>;
  /** Messages whose content was replaced from a REST snapshot rather than streamed. */
  recoveredMessages: ReadonlySet<string>;
  /** How many reset snapshots replaced the state (the cursor was unknown to the server). */
  resets: number;
  /** The local state diverged from the server (an event was rejected); a fresh snapshot will replace it. */
  needsResync: boolean;
  /** The last error that closed the subscription, if any. */
  error: TetherError | undefined;
}

/** Options of {@link ThreadStore.applySnapshot}. */
export interface ApplySnapshotOptions {
  /** The snapshot comes from the truncation fallback or reconciliation: flag what it changed as recovered. */
  recovered?: boolean;
  /** Replace the state even if the snapshot is not newer (a resync after divergence). */
  force?: boolean;
}

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * ThreadStore holds the state of a thread (or of one run, with `runId`),
 * fed by a subscription: snapshots and events. It applies each event once,
 * by offset; drops events of a run that already ended here and, in a run
 * store, events of other runs; lets a reset snapshot replace everything and
 * ignores a snapshot older than what it has. Listeners are told once per
 * batch of changes (a microtask), never in the middle of one.
 */
export class ThreadStore {
  private reducer: Reducer | undefined;
  private view: StoreView | undefined;
  private readonly listeners = new Set<() => void>();
  private readonly eventListeners = new Set<(e: TetherEvent, result: ApplyResult) => void>();
  private notifyQueued = false;
  private connection: ConnectionState = 'connecting';
  private recovery: RecoveryState = 'idle';
  private recoveredRuns: ReadonlySet<string> = new Set();
  private recoveredMessages: ReadonlySet<string> = new Set();
  private resets = 0;
  private needsResync = false;
  private error: TetherError | undefined;
  private threadId: string | undefined;
  private runIdValue: string | undefined;

  /**
   * Makes an empty store. `threadId` lets it start from events without a
   * snapshot (the POST /runs/stream case); `runId` makes it a run store,
   * which keeps only that run's events.
   */
  constructor(scope: { threadId?: string; runId?: string } = {}) {
    this.threadId = scope.threadId;
    this.runIdValue = scope.runId;
  }

  /** The run a run store follows; undefined for a thread store. */
  get runId(): string | undefined {
    return this.runIdValue;
  }

  /** @internal Sets the run of a run store, once known (from Content-Location). */
  setRunId(runId: string): void {
    if (!this.runIdValue) this.runIdValue = runId;
  }

  /** The current view (same object until something changes). */
  getState = (): StoreView => {
    if (!this.view) this.view = this.makeView();
    return this.view;
  };

  /** Calls `listener` after each batch of changes; returns the function that stops it. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** Calls `listener` with every event offered to the store and what was done with it. */
  onEvent(listener: (event: TetherEvent, result: ApplyResult) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }

  /** Offset of the state held (`"-1"` before any). */
  get offset(): Offset {
    return this.reducer?.offset ?? '-1';
  }

  /** The run with this id, if held. */
  run(id: string): Run | undefined {
    return this.reducer?.run(id);
  }

  /** The final answer of a run (the followed or latest run by default), computed locally like the server's. */
  finalAnswer(runId?: string): FinalAnswer | undefined {
    return this.reducer?.finalAnswer(runId ?? this.runIdValue);
  }

  /** The runs held that are not terminal (the active one first). */
  unfinishedRuns(): Run[] {
    return this.reducer?.unfinishedRuns() ?? [];
  }

  /**
   * Applies a snapshot. A reset snapshot, or `force`, replaces the state
   * whatever its offset; any other is applied only if it is newer than the
   * state held (a slow REST answer must not take the state back). A thread
   * snapshot given to a run store is cut down to that run. Returns whether
   * it was applied.
   */
  applySnapshot(snapshot: Snapshot, opts: ApplySnapshotOptions = {}): boolean {
    let snap = snapshot;
    const runId = this.runIdValue;
    if (runId && (snap.runs.length !== 1 || snap.runs[0]!.id !== runId)) {
      snap = { ...snap, runs: snap.runs.filter((r) => r.id === runId), messages: snap.messages.filter((m) => m.run_id === runId) };
    }
    const old = this.reducer;
    if (old && !snap.reset && !opts.force && compareOffsets(snap.offset, old.offset) <= 0) return false;
    const next = Reducer.fromSnapshot(snap);
    // With no state before, everything the snapshot holds came from the fallback.
    if (opts.recovered) this.flagRecovered(old ?? Reducer.empty({ id: snap.thread.id }), next);
    this.reducer = next;
    this.threadId ??= snap.thread.id;
    if (snap.reset) this.resets++;
    this.needsResync = false;
    this.changed();
    return true;
  }

  /** Applies one event (see {@link ApplyResult} for what can happen to it). */
  applyEvent(e: TetherEvent): ApplyResult {
    const result = this.fold(e);
    for (const l of this.eventListeners) l(e, result);
    return result;
  }

  private fold(e: TetherEvent): ApplyResult {
    const runId = this.runIdValue;
    if (runId && e.run_id !== runId) return 'superseded';
    if (!this.reducer) {
      const id = this.threadId ?? (e.type === 'run.created' ? e.run?.thread_id : undefined);
      if (!id) return 'rejected';
      this.reducer = Reducer.empty({ id });
      this.threadId = id;
    }
    const r = this.reducer;
    if (compareOffsets(e.offset, r.offset) <= 0) return 'duplicate';
    const run = r.run(e.run_id);
    if (run && isTerminalRunStatus(run.status)) return 'stale';
    const rej = r.apply(e);
    if (rej) {
      if (!knownEventType(e.type)) return 'skipped';
      this.needsResync = true;
      this.changed();
      return 'rejected';
    }
    this.changed();
    return 'applied';
  }

  /** @internal */
  setConnection(state: ConnectionState): void {
    if (state === this.connection) return;
    this.connection = state;
    this.changed();
  }

  /** @internal */
  setRecovery(state: RecoveryState): void {
    if (state === this.recovery) return;
    this.recovery = state;
    this.changed();
  }

  /** @internal */
  setError(error: TetherError | undefined): void {
    this.error = error;
    this.changed();
  }

  /** Calls the listeners now if a change is pending, instead of at the end of the microtask. */
  flush(): void {
    if (!this.notifyQueued) return;
    this.notifyQueued = false;
    for (const l of [...this.listeners]) l();
  }

  // flagRecovered marks what a recovery snapshot changed in runs that were
  // not finished here: their messages' content and their end.
  private flagRecovered(old: Reducer, next: Reducer): void {
    const runs = new Set(this.recoveredRuns);
    const msgs = new Set(this.recoveredMessages);
    const snap = next.snapshot();
    for (const run of snap.runs) {
      const before = old.run(run.id);
      if (before && isTerminalRunStatus(before.status)) continue;
      const changedMsgs = next.messagesOf(run.id).filter((m) => {
        const b = old.message(m.id);
        return !b || b.status !== m.status || JSON.stringify(b.parts) !== JSON.stringify(m.parts);
      });
      for (const m of changedMsgs) msgs.add(m.id);
      if (changedMsgs.length > 0 || before?.status !== run.status) runs.add(run.id);
    }
    this.recoveredRuns = runs;
    this.recoveredMessages = msgs;
  }

  private changed(): void {
    this.view = undefined;
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    queueMicrotask(() => this.flush());
  }

  private makeView(): StoreView {
    const r = this.reducer;
    const snap = r?.snapshot();
    const active = r?.activeRunId();
    return {
      threadId: this.threadId,
      runId: this.runIdValue,
      loaded: !!r,
      thread: snap?.thread,
      runs: snap?.runs ?? EMPTY,
      messages: snap?.messages ?? EMPTY,
      offset: r?.offset ?? '-1',
      activeRun: active ? r!.run(active) : undefined,
      connection: this.connection,
      recovery: this.recovery,
      recoveredRuns: this.recoveredRuns,
      recoveredMessages: this.recoveredMessages,
      resets: this.resets,
      needsResync: this.needsResync,
      error: this.error,
    };
  }
}
