/**
 * The clock and timers the client uses. Inject your own to test timing
 * deterministically; the default reads `globalThis` at each call, so
 * `vi.useFakeTimers()` works too.
 */
export interface Timers {
  /** Schedules `fn` after `ms` milliseconds; returns a handle for {@link Timers.clearTimeout}. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a timer; a handle that already fired or was cleared is ignored. */
  clearTimeout(handle: unknown): void;
  /** Milliseconds since some fixed point (Date.now by default). */
  now(): number;
  /** A number in [0, 1) for jitter (Math.random by default). */
  random(): number;
}

/** The default timers: `globalThis.setTimeout`, `Date.now`, `Math.random`. */
export const defaultTimers: Timers = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof setTimeout>),
  now: () => Date.now(),
  random: () => Math.random(),
};

/** Why the page asks a subscription to try again now. */
export type WakeReason = 'online' | 'visible';

/**
 * Signals from the page's lifecycle: the network came back (`online`) or the
 * tab became visible (`visibilitychange`). The default listens on `window`
 * and `document` where they exist and does nothing elsewhere (Node).
 */
export interface Lifecycle {
  /** Calls `wake` on each signal until the returned function is called. */
  subscribe(wake: (reason: WakeReason) => void): () => void;
}

/** The browser's lifecycle: `online` on window, `visibilitychange` to visible on document. */
export const browserLifecycle: Lifecycle = {
  subscribe(wake) {
    const w = typeof window !== 'undefined' ? window : undefined;
    const d = typeof document !== 'undefined' ? document : undefined;
    if (!w?.addEventListener) return () => {};
    const online = () => wake('online');
    const visible = () => {
      if (!d || d.visibilityState === 'visible') wake('visible');
    };
    w.addEventListener('online', online);
    d?.addEventListener('visibilitychange', visible);
    return () => {
      w.removeEventListener('online', online);
      d?.removeEventListener('visibilitychange', visible);
    };
  },
};

/** The default largest backoff delay: 30 s. */
export const DEFAULT_MAX_BACKOFF_MS = 30_000;

/** Exponential backoff with jitter. */
export interface BackoffOptions {
  /** The first delay. Defaults to 500 ms. */
  initialMs?: number;
  /** The largest delay. Defaults to 30 s. */
  maxMs?: number;
  /** Growth per attempt. Defaults to 2. */
  factor?: number;
  /**
   * The share of each delay that is random: a delay is in
   * `[base × (1 − jitter), base]`. Defaults to 0.5, so that clients cut at
   * the same moment do not come back at the same moment.
   */
  jitter?: number;
}

/**
 * The delay before retry number `attempt` (0 for the first retry):
 * `min(maxMs, initialMs × factor^attempt)`, less up to `jitter` of it.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions = {}, random: () => number = Math.random): number {
  const { initialMs = 500, maxMs = DEFAULT_MAX_BACKOFF_MS, factor = 2, jitter = 0.5 } = opts;
  const base = Math.min(maxMs, initialMs * Math.pow(factor, Math.max(0, attempt)));
  return Math.round(base * (1 - jitter * random()));
}
