// @tether/client: the public API. This file only re-exports.
export { TetherClient } from './client.js';
export type { TetherClientOptions, SubscriptionTransport, RequestOptions, RunRequest, CreateRunOptions, ThreadPage, RunWithMessages } from './client.js';
export { TetherError } from './errors.js';
export type { ErrorCode } from './errors.js';
export { LiveRun, LiveThread } from './live.js';
export type { FollowOptions } from './live.js';
export { applyPatch, parsePatch, PatchConflict } from './jsonpatch.js';
export type { PatchOperation } from './jsonpatch.js';
export { mergePatch } from './mergepatch.js';
export { Reducer, reduce } from './reducer.js';
export type { ThreadInit } from './reducer.js';
export { canShare } from './shared.js';
export type { ShareOptions, ShareRole } from './shared.js';
export { SSEParser, SSEFrameTooLargeError, readSSE, DEFAULT_MAX_FRAME } from './sse.js';
export type { SSEFrame } from './sse.js';
export { ThreadStore } from './store.js';
export type { ApplyResult, ApplySnapshotOptions, RecoveryState, StoreView } from './store.js';
export type {
  CloseReason,
  ConnectionOptions,
  ConnectionState,
  StatusInfo,
  SubscribeOptions,
  SubscribeTarget,
  Subscription,
  SubscriptionHandlers,
} from './subscription.js';
export { jwtExpiry } from './token.js';
export type { TokenOptions, TokenReason, TokenRequest, TokenSource } from './token.js';
export { backoffDelay, browserLifecycle, defaultTimers } from './timing.js';
export type { BackoffOptions, Lifecycle, Timers, WakeReason } from './timing.js';
export { compareOffsets, isEventOffset, isTerminalMessageStatus, isTerminalRunStatus } from './types.js';
export type * from './types.js';
export { validId, knownEventType } from './validate.js';
export type { Rejection } from './validate.js';
