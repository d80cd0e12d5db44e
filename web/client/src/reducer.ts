// The client's fold of a thread's log, the same as the server's (runs/
// package): the golden vectors of runs/testdata run against both.

import { applyPatch, parsePatch, PatchConflict } from './jsonpatch.js';
import { mergePatch } from './mergepatch.js';
import type {
  FinalAnswer,
  JSONObject,
  JSONValue,
  Message,
  MessageStatus,
  Offset,
  Part,
  Run,
  RunStatus,
  Snapshot,
  TetherEvent,
  Thread,
  ToolPart,
} from './types.js';
import { compareOffsets, isEventOffset, isTerminalMessageStatus, isTerminalRunStatus } from './types.js';
import { bad, checkShape, conflict, isObject, type Rejection } from './validate.js';

/** What a reducer needs of a thread to start from an empty log. */
export interface ThreadInit {
  /** The thread id; run.created events must name it. */
  id: string;
  /** Thread metadata; `{}` when unknown. */
  metadata?: JSONObject;
  /** Creation time; `""` when unknown. */
  created_at?: string;
}

interface RunState {
  run: Run;
  running: string[]; // ids of the run's messages that are not terminal, in start order
}

const isNull = (v: unknown) => v === undefined || v === null;

/** Copies `o` without its undefined members, so snapshots are plain wire JSON. */
function compact<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}

function createdToolStatus(p: { status?: unknown; error?: unknown }): 'done' | 'error' {
  if (p.status === 'done' || p.status === 'error') return p.status;
  return isNull(p.error) ? 'done' : 'error';
}

/**
 * The input of a tool call that finished without one: its streamed text as
 * JSON if it parses, else as a string, so that a model's broken JSON is
 * still shown; null if nothing was streamed.
 */
function streamedInput(text: string | undefined): JSONValue {
  if (!text) return null;
  try {
    return JSON.parse(text) as JSONValue;
  } catch {
    return text;
  }
}

/**
 * Reducer folds the events of one thread's log into its state (thread, runs,
 * messages with parts) exactly as the server does, and refuses the events
 * the server's state machine would refuse, with the same codes.
 *
 * Start it with {@link Reducer.empty} (an empty log) or
 * {@link Reducer.fromSnapshot} (a snapshot from the server, also a run
 * snapshot), then {@link Reducer.apply} each event in log order. The objects
 * it returns are never modified afterwards: every change makes new ones
 * (copy on write), so UIs can compare them by reference.
 */
export class Reducer {
  private readonly threadId: string;
  private base: Thread;
  private updated = '';
  private _offset: Offset = '-1';
  private runs = new Map<string, RunState>();
  private runOrder: string[] = [];
  private msgs = new Map<string, Message>();
  private msgOrder: string[] = [];
  private byRun = new Map<string, string[]>();
  // What the thread status is derived from (runs/machine.go threadState).
  private active = '';
  private waiting = false;
  private pending: string[] = [];
  private last: RunStatus | '' = '';
  // The thread's state (state.snapshot, state.delta); null while unset.
  private _state: JSONValue = null;
  private cached: Snapshot | undefined;
  private version = 0;

  private constructor(thread: ThreadInit | Thread) {
    this.threadId = thread.id;
    this.base = {
      id: thread.id,
      status: 'idle',
      metadata: isObject(thread.metadata) ? (thread.metadata as JSONObject) : {},
      created_at: thread.created_at ?? '',
      updated_at: thread.created_at ?? '',
      last_offset: '-1',
      active_run_id: null,
      // Set once, at the thread's creation: no event changes it.
      ...('owner' in thread && thread.owner ? { owner: thread.owner } : {}),
    };
  }

  /** A reducer of a thread with no events. */
  static empty(thread: ThreadInit): Reducer {
    return new Reducer(thread);
  }

  /**
   * A reducer holding a snapshot from the server: the thread, run or
   * message snapshot of a subscription (§5) or `GET /v1/threads/{tid}`.
   * Later events must come after `snapshot.offset`.
   */
  static fromSnapshot(snapshot: Snapshot): Reducer {
    const r = new Reducer(snapshot.thread);
    r.updated = snapshot.thread.updated_at;
    r._offset = snapshot.offset || '-1';
    r._state = snapshot.state ?? null;
    for (const run of snapshot.runs) {
      r.runs.set(run.id, { run, running: [] });
      r.runOrder.push(run.id);
      if (run.status === 'running' || run.status === 'waiting') {
        r.active = run.id;
        r.waiting = run.status === 'waiting';
      } else if (run.status === 'pending') {
        r.pending.push(run.id);
      }
    }
    for (const m of snapshot.messages) {
      r.addMessage(m);
      const rs = r.runs.get(m.run_id);
      if (rs && !isTerminalMessageStatus(m.status)) rs.running.push(m.id);
    }
    // The status of the last run to finish shows in the thread's status
    // when nothing is active; otherwise take the latest completion.
    const st = snapshot.thread.status;
    if (st === 'error') r.last = 'error';
    else if (st === 'idle') r.last = 'done';
    else {
      let latest: Run | undefined;
      for (const run of snapshot.runs) {
        if (run.completed_at && (!latest || run.completed_at >= (latest.completed_at ?? ''))) latest = run;
      }
      r.last = latest?.status ?? '';
    }
    return r;
  }

  /** Offset of the last event folded (or of the snapshot), `"-1"` for none. */
  get offset(): Offset {
    return this._offset;
  }

  /** The thread id. */
  get thread(): string {
    return this.threadId;
  }

  /** Counts the changes, so that callers can tell cheaply whether anything changed. */
  get changes(): number {
    return this.version;
  }

  /** The thread's state: `null` until a run sets it (protocol §3, `state.snapshot`, `state.delta`). */
  get state(): JSONValue {
    return this._state;
  }

  /** The run with this id, if the reducer holds it. */
  run(id: string): Run | undefined {
    return this.runs.get(id)?.run;
  }

  /** The message with this id, if the reducer holds it. */
  message(id: string): Message | undefined {
    return this.msgs.get(id);
  }

  /** The run that is running or waiting, else the oldest pending one. */
  activeRunId(): string | undefined {
    return this.active || this.pending[0] || undefined;
  }

  /** The runs that are not terminal: the active one first, then the pending ones. */
  unfinishedRuns(): Run[] {
    const ids = this.active ? [this.active, ...this.pending] : this.pending;
    return ids.map((id) => this.runs.get(id)!.run);
  }

  /** The latest run created, if any. */
  latestRunId(): string | undefined {
    return this.runOrder[this.runOrder.length - 1];
  }

  /**
   * Folds one event. It must come after {@link offset}. If the event is
   * refused (malformed, or impossible in this state) the reducer is not
   * changed and the rejection is returned, with the server's code.
   */
  apply(e: TetherEvent): Rejection | undefined {
    if (!isEventOffset(e.offset)) return bad(`event ${String(e.type).slice(0, 40)} has no offset`);
    if (compareOffsets(e.offset, this._offset) <= 0) return conflict(`offset ${e.offset} does not come after ${this._offset}`);
    const rej = checkShape(e, this.threadId) ?? this.fold(e);
    if (rej) return rej;
    this._offset = e.offset;
    if (e.ts) this.updated = e.ts;
    this.cached = undefined;
    this.version++;
    return undefined;
  }

  /** The whole state as of {@link offset}: thread, runs and messages in creation order. */
  snapshot(): Snapshot {
    if (this.cached) return this.cached;
    const thread: Thread = {
      ...this.base,
      status: this.threadStatus(),
      active_run_id: this.activeRunId() ?? null,
      updated_at: this.updated || this.base.created_at,
      last_offset: this._offset,
    };
    this.cached = {
      thread,
      runs: this.runOrder.map((id) => this.runs.get(id)!.run),
      messages: this.msgOrder.map((id) => this.msgs.get(id)!),
      offset: this._offset,
    };
    if (this._state !== null) this.cached.state = this._state;
    return this.cached;
  }

  /** The messages of one run, in creation order. */
  messagesOf(runId: string): Message[] {
    return (this.byRun.get(runId) ?? []).map((id) => this.msgs.get(id)!);
  }

  /**
   * The answer of a run (the latest if `runId` is not given), as
   * `GET /final-answer` computes it: the text parts of the run's last
   * assistant message, reasoning left out, joined. Undefined for an
   * unknown run.
   */
  finalAnswer(runId?: string): FinalAnswer | undefined {
    const id = runId ?? this.latestRunId();
    if (!id) return { content: '', complete: false, completed_at: null, run_id: '', message_id: '', status: '' };
    const rs = this.runs.get(id);
    if (!rs) return undefined;
    const fa: FinalAnswer = {
      content: '',
      complete: isTerminalRunStatus(rs.run.status),
      completed_at: rs.run.completed_at,
      run_id: id,
      message_id: '',
      status: rs.run.status,
    };
    const ms = this.messagesOf(id);
    for (let i = ms.length - 1; i >= 0; i--) {
      const m = ms[i]!;
      if (m.role !== 'assistant') continue;
      fa.message_id = m.id;
      fa.content = m.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
      break;
    }
    return fa;
  }

  private threadStatus(): Thread['status'] {
    if (this.active && this.waiting) return 'waiting';
    if (this.active || this.pending.length > 0) return 'busy';
    if (this.last === 'error' || this.last === 'aborted') return 'error';
    return 'idle';
  }

  private addMessage(m: Message): void {
    this.msgs.set(m.id, m);
    this.msgOrder.push(m.id);
    const ids = this.byRun.get(m.run_id);
    if (ids) ids.push(m.id);
    else this.byRun.set(m.run_id, [m.id]);
  }

  private setRun(id: string, patch: Partial<Run> & Record<string, unknown>): void {
    const rs = this.runs.get(id)!;
    this.runs.set(id, { run: compact({ ...rs.run, ...patch }), running: rs.running });
  }

  private setMessage(id: string, patch: Partial<Message>): void {
    this.msgs.set(id, { ...this.msgs.get(id)!, ...patch });
  }

  // message returns the message e names, which must belong to e's run.
  private messageOf(e: TetherEvent): Message | Rejection {
    const m = this.msgs.get(e.message_id ?? '');
    if (!m) return bad(`message ${JSON.stringify(e.message_id)} not found`);
    if (m.run_id !== e.run_id) return bad(`message ${m.id} belongs to run ${m.run_id}, not ${e.run_id}`);
    return m;
  }

  private runningMessage(e: TetherEvent): Message | Rejection {
    const m = this.messageOf(e);
    if ('code' in m) return m;
    if (isTerminalMessageStatus(m.status)) return conflict(`message ${m.id} is finished`);
    return m;
  }

  // fold checks e against the state and applies it, or changes nothing.
  private fold(e: TetherEvent): Rejection | undefined {
    if (e.type === 'run.created') return this.runCreated(e);
    const rs = this.runs.get(e.run_id);
    if (!rs) return bad(`run ${JSON.stringify(e.run_id)} not found`);
    if (isTerminalRunStatus(rs.run.status)) return conflict(`run ${e.run_id} is finished`);
    const run = rs.run;
    let rej: Rejection | undefined;
    switch (e.type) {
      case 'message.created':
        rej = this.messageCreated(e);
        break;
      case 'run.started':
        rej = this.runStarted(e, run);
        break;
      case 'message.started':
        if (run.status !== 'running' && run.status !== 'waiting') return conflict(`run ${e.run_id} has not started`);
        if (this.msgs.has(e.message_id!)) return conflict(`message ${e.message_id} already exists`);
        this.addMessage({
          id: e.message_id!,
          thread_id: this.threadId,
          run_id: e.run_id,
          role: e.role!,
          status: 'running',
          parts: [],
          metadata: isNull(e.metadata) ? {} : (e.metadata as JSONObject),
          started_at: e.ts,
          last_update_at: e.ts,
        });
        this.runs.set(e.run_id, { run, running: [...rs.running, e.message_id!] });
        break;
      case 'text.delta':
      case 'reasoning.delta': {
        const m = this.runningMessage(e);
        if ('code' in m) return m;
        const typ = e.type === 'text.delta' ? 'text' : 'reasoning';
        let parts = m.parts;
        if (e.delta) {
          const lastPart = parts[parts.length - 1];
          parts =
            lastPart && lastPart.type === typ
              ? [...parts.slice(0, -1), { type: typ, text: lastPart.text + e.delta }]
              : [...parts, { type: typ, text: e.delta }];
        }
        this.setMessage(m.id, { parts, last_update_at: e.ts });
        break;
      }
      case 'tool.started': {
        const m = this.runningMessage(e);
        if ('code' in m) return m;
        if (this.toolIndex(m, e.call_id!) >= 0) return conflict(`tool call ${e.call_id} already exists in message ${m.id}`);
        const part: ToolPart = { type: 'tool', call_id: e.call_id!, name: e.name!, input: null, status: 'running' };
        this.setMessage(m.id, { parts: [...m.parts, part], last_update_at: e.ts });
        break;
      }
      case 'tool.delta':
      case 'tool.finished':
        rej = this.toolEvent(e);
        break;
      case 'message.updated': {
        const m = this.messageOf(e);
        if ('code' in m) return m;
        this.setMessage(m.id, { metadata: mergePatch(m.metadata, e.metadata!) as JSONObject, last_update_at: e.ts });
        break;
      }
      case 'message.finished': {
        const m = this.runningMessage(e);
        if ('code' in m) return m;
        this.finishMessage(m, e.status as MessageStatus, e.ts);
        this.runs.set(e.run_id, { run, running: rs.running.filter((id) => id !== m.id) });
        break;
      }
      case 'run.waiting':
        if (run.status === 'pending') return conflict(`run ${e.run_id} has not started`);
        if (run.status === 'waiting') return conflict(`run ${e.run_id} is already waiting on request ${run.request?.id}`);
        this.setRun(e.run_id, {
          status: 'waiting',
          request: compact({ id: e.request!.id, kind: e.request!.kind, payload: e.request!.payload }),
        });
        this.waiting = true;
        break;
      case 'run.input':
        if (run.status !== 'waiting') return conflict(`run ${e.run_id} is not waiting`);
        if (e.request_id !== run.request?.id) {
          return conflict(`run ${e.run_id} is waiting on request ${run.request?.id}, not ${e.request_id}`);
        }
        this.setRun(e.run_id, { status: 'running', request: undefined });
        this.waiting = false;
        break;
      case 'run.cancel_requested':
        if (!run.cancel_requested_at) this.setRun(e.run_id, { cancel_requested_at: e.ts });
        break;
      case 'run.finished':
        this.runFinished(e, rs);
        break;
      case 'state.snapshot':
      case 'state.delta':
        rej = this.stateEvent(e, run);
        break;
      case 'custom':
        break;
    }
    if (rej) return rej;
    this.setRun(e.run_id, { last_update_at: e.ts });
    return undefined;
  }

  // stateEvent sets or patches the thread's state; only a run that is
  // running or waiting may change it, and a pending run (the state a front
  // end creates the run with: whole, or as a patch when the whole is
  // larger than an event). A refused patch changes nothing.
  private stateEvent(e: TetherEvent, run: Run): Rejection | undefined {
    const settable = run.status === 'running' || run.status === 'waiting' || run.status === 'pending';
    if (!settable) return conflict(`run ${e.run_id} has not started`);
    if (e.type === 'state.snapshot') {
      this._state = e.state ?? null;
      return undefined;
    }
    const ops = parsePatch(e.patch);
    if (typeof ops === 'string') return bad(`field "patch" of ${e.type} is not a JSON Patch (RFC 6902): ${ops}`);
    try {
      this._state = applyPatch(this._state, ops);
    } catch (err) {
      if (err instanceof PatchConflict) {
        return conflict(`the patch of ${e.type} does not apply to the thread's state: ${err.message}`);
      }
      throw err;
    }
    return undefined;
  }

  private runCreated(e: TetherEvent): Rejection | undefined {
    const r = e.run!;
    if (this.runs.has(r.id)) return conflict(`run ${r.id} already exists`);
    const run: Run = compact({
      ...r,
      input: { ...(r.input ?? {}), messages: r.input?.messages ?? [] },
      metadata: isObject(r.metadata) ? r.metadata : {},
      created_at: r.created_at || e.ts,
      started_at: r.started_at ?? null,
      last_update_at: r.last_update_at || e.ts,
      completed_at: r.completed_at ?? null,
      attempt: r.attempt ?? 0,
      cancel_requested_at: r.cancel_requested_at ?? null,
      worker_id: r.worker_id || undefined,
    });
    this.runs.set(r.id, { run, running: [] });
    this.runOrder.push(r.id);
    this.pending = [...this.pending, r.id];
    return undefined;
  }

  private messageCreated(e: TetherEvent): Rejection | undefined {
    const msg = e.message!;
    if (this.msgs.has(msg.id)) return conflict(`message ${msg.id} already exists`);
    const parts: Part[] = (msg.parts ?? []).map((p0): Part => {
      const p = p0 as unknown as Record<string, JSONValue | undefined>;
      switch (p.type) {
        case 'text':
        case 'reasoning':
          return { type: p.type, text: (p.text as string) ?? '' };
        case 'data':
          return { type: 'data', name: (p.name as string) ?? '', data: p.data ?? null };
        default:
          return compact<ToolPart>({
            type: 'tool',
            call_id: p.call_id as string,
            name: p.name as string,
            input: p.input ?? null,
            output: p.output,
            error: isNull(p.error) ? undefined : p.error,
            status: createdToolStatus(p),
          });
      }
    });
    this.addMessage({
      id: msg.id,
      thread_id: this.threadId,
      run_id: e.run_id,
      role: msg.role,
      status: msg.status || 'done',
      parts,
      metadata: isNull(msg.metadata) ? {} : msg.metadata,
      started_at: e.ts,
      last_update_at: e.ts,
    });
    return undefined;
  }

  private runStarted(e: TetherEvent, run: Run): Rejection | undefined {
    let attempt = e.attempt ?? 0;
    if (run.status === 'pending') {
      if (this.active) return conflict(`run ${e.run_id} cannot start while run ${this.active} is active`);
      if (attempt === 0) attempt = 1;
      this.pending = this.pending.filter((id) => id !== e.run_id);
    } else if (attempt <= run.attempt) {
      return conflict(`run ${e.run_id} is already started (attempt ${run.attempt})`);
    }
    // A reclaimed run keeps its status: a waiting run still waits on its request.
    const status = run.status === 'pending' ? 'running' : run.status;
    this.setRun(e.run_id, { started_at: run.started_at || e.ts, attempt, worker_id: e.worker_id, status });
    this.active = e.run_id;
    this.waiting = status === 'waiting';
    return undefined;
  }

  private toolIndex(m: Message, callId: string): number {
    for (let i = m.parts.length - 1; i >= 0; i--) {
      const p = m.parts[i]!;
      if (p.type === 'tool' && p.call_id === callId) return i;
    }
    return -1;
  }

  private toolEvent(e: TetherEvent): Rejection | undefined {
    const m = this.runningMessage(e);
    if ('code' in m) return m;
    const i = this.toolIndex(m, e.call_id!);
    if (i < 0) return bad(`tool call ${JSON.stringify(e.call_id)} not found in message ${m.id}`);
    const p = m.parts[i] as ToolPart;
    if (p.status !== 'running') return conflict(`tool call ${e.call_id} is finished`);
    let next: ToolPart;
    if (e.type === 'tool.delta') {
      next = compact({ ...p, input_text: (p.input_text ?? '') + (e.delta ?? '') || undefined });
    } else {
      const failed = !isNull(e.error);
      next = compact<ToolPart>({
        type: 'tool',
        call_id: p.call_id,
        name: p.name,
        input: e.input !== undefined ? e.input : streamedInput(p.input_text),
        output: e.output,
        error: failed ? e.error : undefined,
        status: failed ? 'error' : 'done',
      });
    }
    const parts = m.parts.slice();
    parts[i] = next;
    this.setMessage(m.id, { parts, last_update_at: e.ts });
    return undefined;
  }

  // finishMessage ends a message and the tool calls still running in it:
  // done if the message is done, else error. They keep their input_text.
  private finishMessage(m: Message, status: MessageStatus, ts: string): void {
    const tool = status === 'done' ? 'done' : 'error';
    let parts = m.parts;
    if (parts.some((p) => p.type === 'tool' && p.status === 'running')) {
      parts = parts.map((p) => (p.type === 'tool' && p.status === 'running' ? { ...p, status: tool } : p));
    }
    this.setMessage(m.id, { status, parts, last_update_at: ts });
  }

  private runFinished(e: TetherEvent, rs: RunState): void {
    const st = e.status as RunStatus;
    const msgSt: MessageStatus = st === 'done' ? 'done' : st === 'error' ? 'error' : 'aborted';
    for (const id of rs.running) this.finishMessage(this.msgs.get(id)!, msgSt, e.ts);
    const wasPending = rs.run.status === 'pending';
    const err = e.error as { code: string; message: string } | null | undefined;
    this.runs.set(e.run_id, { run: rs.run, running: [] });
    this.setRun(e.run_id, {
      status: st,
      completed_at: e.ts,
      error: isNull(err) ? undefined : { code: err!.code, message: err!.message },
      request: undefined,
    });
    if (wasPending) this.pending = this.pending.filter((id) => id !== e.run_id);
    if (this.active === e.run_id) {
      this.active = '';
      this.waiting = false;
    }
    this.last = st;
  }
}

/**
 * Folds a whole log: the snapshot of `thread` after `events`. Throws on the
 * first event the reducer refuses.
 */
export function reduce(thread: ThreadInit, events: TetherEvent[]): Snapshot {
  const r = Reducer.empty(thread);
  events.forEach((e, i) => {
    const rej = r.apply(e);
    if (rej) throw new Error(`event ${i} (${e.type}): ${rej.code}: ${rej.message}`);
  });
  return r.snapshot();
}
