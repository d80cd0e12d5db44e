// @tether/client/react: React hooks over the framework-free ThreadStore.

import { createContext, createElement, useContext, useEffect, useMemo, useRef, useState, useSyncExternalStore, type ReactNode } from 'react';
import type { TetherClient } from './client.js';
import type { FollowOptions, LiveRun, LiveThread } from './live.js';
import { ThreadStore, type StoreView } from './store.js';

/** The client the hooks use when none is passed to them. */
export const TetherContext = createContext<TetherClient | null>(null);

/** Props of {@link TetherProvider}. */
export interface TetherProviderProps {
  /** The client for the hooks below. */
  client: TetherClient;
  /** The tree that uses it. */
  children?: ReactNode;
}

/** Makes `client` the default of the hooks in its subtree. */
export function TetherProvider({ client, children }: TetherProviderProps): ReturnType<typeof createElement> {
  return createElement(TetherContext.Provider, { value: client }, children);
}

/** The client passed, else the one of the nearest {@link TetherProvider}; throws if there is none. */
export function useTetherClient(client?: TetherClient): TetherClient {
  const ctx = useContext(TetherContext);
  const c = client ?? ctx;
  if (!c) throw new Error('@tether/client/react: pass a client or wrap the tree in <TetherProvider>');
  return c;
}

/** Options of the hooks: {@link FollowOptions} plus the client to use. */
export interface UseTetherOptions extends Omit<FollowOptions, 'store'> {
  /** Defaults to the {@link TetherProvider}'s. */
  client?: TetherClient;
}

/** What {@link useTetherThread} returns: the store's view, the store, and the live connection. */
export interface TetherThreadState extends StoreView {
  /** The store (for final answers, event listeners). */
  store: ThreadStore;
  /** The live connection while mounted (start runs, cancel, answer input). */
  live: LiveThread | undefined;
}

/** What {@link useTetherRun} returns. */
export interface TetherRunState extends StoreView {
  /** The store. */
  store: ThreadStore;
  /** The live connection while mounted (cancel, answer input). */
  live: LiveRun | undefined;
}

/** Renders from a store: the view, updated once per batch of changes. */
export function useTetherStore(store: ThreadStore): StoreView {
  return useSyncExternalStore(store.subscribe, store.getState, store.getState);
}

function useLive<L extends { close(): void }>(
  key: string | undefined,
  makeStore: () => ThreadStore,
  open: (store: ThreadStore, opts: FollowOptions) => L,
  options: UseTetherOptions | undefined,
): { store: ThreadStore; live: L | undefined; view: StoreView } {
  const client = useTetherClient(options?.client);
  // One store per key: it outlives effect re-runs (React's StrictMode), so
  // a remount resumes from its offset instead of starting over.
  const store = useMemo(makeStore, [key]); // eslint-disable-line react-hooks/exhaustive-deps
  const opts = useRef(options);
  opts.current = options;
  const [live, setLive] = useState<L>();
  useEffect(() => {
    if (!key) return;
    const { client: _c, ...rest } = opts.current ?? {};
    const l = open(store, { ...rest, store });
    setLive(l);
    return () => {
      l.close();
      setLive(undefined);
    };
  }, [key, store, client]); // eslint-disable-line react-hooks/exhaustive-deps
  const view = useTetherStore(store);
  return { store, live, view };
}

/**
 * Follows a thread while the component is mounted and re-renders on each
 * change: snapshot first, then live events, through drops, truncation and
 * stalls. Pass `undefined` to follow nothing. Options are read when the
 * thread id (or the client) changes.
 */
export function useTetherThread(threadId: string | undefined, options?: UseTetherOptions): TetherThreadState {
  const client = useTetherClient(options?.client);
  const { store, live, view } = useLive(
    threadId,
    () => new ThreadStore(threadId ? { threadId } : {}),
    (_store, o) => client.followThread(threadId!, o),
    options,
  );
  return useMemo(() => ({ ...view, store, live }), [view, store, live]);
}

/**
 * Follows one run while the component is mounted and re-renders on each
 * change; the state holds that run and its messages. Pass `undefined` to
 * follow nothing. To start a run in one request, call
 * `client.startRun(...)` and render its store with {@link useTetherStore}.
 */
export function useTetherRun(runId: string | undefined, options?: UseTetherOptions): TetherRunState {
  const client = useTetherClient(options?.client);
  const { store, live, view } = useLive(
    runId,
    () => new ThreadStore(runId ? { runId } : {}),
    (_store, o) => client.followRun(runId!, o),
    options,
  );
  return useMemo(() => ({ ...view, store, live }), [view, store, live]);
}
