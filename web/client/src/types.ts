// Wire types of the Tether protocol v1 (docs/protocol.md §2, §3, §5).

/**
 * A position in one thread's log: the position right after the event that
 * carries it. Treat it as opaque; offsets of one log compare as strings
 * (see {@link compareOffsets}). `"-1"` means before the first event and
 * `"now"` the tail.
 */
export type Offset = string;

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A JSON object (metadata, payloads). */
export type JSONObject = { [key: string]: JSONValue };

/** Status of a thread, derived from its runs. */
export type ThreadStatus = 'idle' | 'busy' | 'waiting' | 'error';

/** Status of a run: `pending → running ⇄ waiting → done | error | cancelled | aborted`. */
export type RunStatus = 'pending' | 'running' | 'waiting' | 'done' | 'error' | 'cancelled' | 'aborted';

/** Status of a message. */
export type MessageStatus = 'pending' | 'running' | 'done' | 'error' | 'aborted';

/** Role of a message's author. */
export type Role = 'user' | 'assistant' | 'tool' | 'system';

/** What to do when a thread already has an active run (`reject` by default). */
export type Multitask = 'reject' | 'enqueue' | 'interrupt';

/** A thread (protocol §2). */
export interface Thread {
  /** Opaque id. */
  id: string;
  /** Derived from the runs. */
  status: ThreadStatus;
  /** Free-form metadata given at creation. */
  metadata: JSONObject;
  /** RFC 3339 with milliseconds, UTC. */
  created_at: string;
  /** Time of the last event (creation time before any). */
  updated_at: string;
  /** Offset of the last event, `"-1"` for an empty log. */
  last_offset: Offset;
  /** The running or waiting run, else the oldest pending run, else null. */
  active_run_id: string | null;
  /** The `sub` of the user token that created the thread; absent for a thread made with a key or without auth. */
  owner?: string;
}

/** An error carried by a run or a message (`{code, message}`). */
export interface ErrorInfo {
  /** Stable, machine-readable code. */
  code: string;
  /** For people. */
  message: string;
}

/** The open request of a waiting run (`run.waiting`). */
export interface InputRequest {
  /** The id to answer with {@link TetherClient.submitInput}. */
  id: string;
  /** What kind of input is asked for (agent-defined, e.g. `approval`). */
  kind: string;
  /** Agent-defined details. */
  payload?: JSONValue;
}

/** One input message of a run request. */
export interface InputMessage {
  /** Optional message id; the server makes one when absent. */
  id?: string;
  /** Author role. */
  role: Role;
  /** The text. */
  content: string;
  /** Optional metadata object. */
  metadata?: JSONObject;
}

/** The input of a run. */
export interface RunInput {
  /** Messages added to the thread in the run's first append. */
  messages: InputMessage[];
}

/** A run (protocol §2). */
export interface Run {
  id: string;
  thread_id: string;
  agent: string;
  input: RunInput;
  status: RunStatus;
  metadata: JSONObject;
  created_at: string;
  started_at: string | null;
  last_update_at: string;
  completed_at: string | null;
  attempt: number;
  cancel_requested_at: string | null;
  /** Who holds the run, once started. */
  worker_id?: string;
  /** Set once the run ended `error` or `aborted`. */
  error?: ErrorInfo;
  /** The open request of a waiting run. */
  request?: InputRequest;
}

/** A text part. */
export interface TextPart {
  type: 'text';
  text: string;
}

/** A reasoning part (never part of the final answer). */
export interface ReasoningPart {
  type: 'reasoning';
  text: string;
}

/** A tool call. */
export interface ToolPart {
  type: 'tool';
  call_id: string;
  name: string;
  /** null until known. */
  input: JSONValue;
  /** The streamed input while the call runs (absent when empty). */
  input_text?: string;
  /** Present only when set. */
  output?: JSONValue;
  /** Present only when the call failed. */
  error?: JSONValue;
  status: 'running' | 'done' | 'error';
}

/** A named piece of data. */
export interface DataPart {
  type: 'data';
  name: string;
  data: JSONValue;
}

/** A part of a message. */
export type Part = TextPart | ReasoningPart | ToolPart | DataPart;

/** A message (protocol §2). */
export interface Message {
  id: string;
  thread_id: string;
  run_id: string;
  role: Role;
  status: MessageStatus;
  parts: Part[];
  metadata: JSONObject;
  started_at: string | null;
  last_update_at: string | null;
}

/**
 * The state of a thread as of `offset` (protocol §5): it holds every event
 * up to and including `offset` and none after. For a run subscription
 * `runs` is that run and `messages` its messages.
 */
export interface Snapshot {
  thread: Thread;
  runs: Run[];
  messages: Message[];
  offset: Offset;
  /**
   * The thread's state (`state.snapshot` and `state.delta` events, §3):
   * absent while it is null (never set, or set to null).
   */
  state?: JSONValue;
  /** The cursor could not be placed: the client must replace its state. */
  reset?: boolean;
}

/** All event types of protocol v1 (§3). */
export type EventType =
  | 'run.created'
  | 'message.created'
  | 'run.started'
  | 'message.started'
  | 'text.delta'
  | 'reasoning.delta'
  | 'tool.started'
  | 'tool.delta'
  | 'tool.finished'
  | 'message.updated'
  | 'message.finished'
  | 'run.waiting'
  | 'run.input'
  | 'custom'
  | 'state.snapshot'
  | 'state.delta'
  | 'run.cancel_requested'
  | 'run.finished';

/**
 * One event of a thread's log. `offset`, `ts` and `run_id` are set by the
 * server; the other fields depend on `type` (protocol §3). Unknown types
 * from a newer server may appear: treat `type` as open.
 */
export interface TetherEvent {
  offset: Offset;
  type: EventType | (string & {});
  ts: string;
  run_id: string;
  message_id?: string;
  role?: Role;
  metadata?: JSONValue;
  delta?: string;
  call_id?: string;
  name?: string;
  input?: JSONValue;
  output?: JSONValue;
  error?: JSONValue;
  status?: string;
  request?: InputRequest;
  data?: JSONValue;
  run?: Run;
  message?: Message;
  worker_id?: string;
  attempt?: number;
  request_id?: string;
  value?: JSONValue;
  /** `state.snapshot`: the thread's new state (any JSON value). */
  state?: JSONValue;
  /** `state.delta`: an RFC 6902 JSON Patch applied to the thread's state. */
  patch?: JSONValue;
}

/** The answer of GET /v1/threads/{tid}/final-answer. */
export interface FinalAnswer {
  /** The text parts (not reasoning) of the run's last assistant message, joined. */
  content: string;
  /** True iff the run is terminal. */
  complete: boolean;
  completed_at: string | null;
  run_id: string;
  message_id: string;
  status: RunStatus | '';
}

/** The `connected` frame of an SSE stream, or the `subscribed` frame of a WebSocket subscription. */
export interface ConnectedInfo {
  thread_id: string;
  run_id?: string;
  message_id?: string;
  /** The thread's tail when the stream started. */
  offset: Offset;
  /** The server's heartbeat; absent over a WebSocket, whose socket pings every heartbeat. */
  heartbeat_ms?: number;
  /** The server's clock; absent over a WebSocket. */
  server_time?: string;
}

/** Run statuses after which nothing more happens. */
export function isTerminalRunStatus(s: string | undefined): boolean {
  return s === 'done' || s === 'error' || s === 'cancelled' || s === 'aborted';
}

/** Message statuses after which the content does not change. */
export function isTerminalMessageStatus(s: string | undefined): boolean {
  return s === 'done' || s === 'error' || s === 'aborted';
}

/** Whether `o` names an event (not `-1`, `now` or empty). */
export function isEventOffset(o: Offset | undefined | null): o is Offset {
  return !!o && o !== '-1' && o !== 'now';
}

/**
 * Compares two offsets of the same log: negative if `a` comes first, 0 if
 * equal, positive if `a` comes after. `"-1"` and empty come before every
 * event. Offsets sort as strings (protocol §1).
 */
export function compareOffsets(a: Offset | undefined, b: Offset | undefined): number {
  const x = isEventOffset(a) ? a : '';
  const y = isEventOffset(b) ? b : '';
  return x < y ? -1 : x > y ? 1 : 0;
}
