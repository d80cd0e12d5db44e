// The rules of an event's shape, which need no state: the fields a type
// must and may carry and their form (runs/shape.go and runs/fields.go on
// the server). Every failure is bad_request.

import { parsePatch } from './jsonpatch.js';
import type { TetherEvent } from './types.js';

/** Why the reducer refused an event, with the server's codes. */
export interface Rejection {
  /** `bad_request`: malformed, or names something that does not exist; `conflict`: impossible now. */
  code: 'bad_request' | 'conflict';
  /** For people and logs. */
  message: string;
}

const ID = /^[A-Za-z0-9._~-]{1,128}$/;

/** Whether `s` is a valid Tether id: 1 to 128 characters of `A-Z a-z 0-9 . _ ~ -`. */
export function validId(s: unknown): s is string {
  return typeof s === 'string' && ID.test(s);
}

/** @internal */
export function bad(message: string): Rejection {
  return { code: 'bad_request', message };
}

/** @internal */
export function conflict(message: string): Rejection {
  return { code: 'conflict', message };
}

const required = (field: string, typ: string) => bad(`field "${field}" is required in ${typ}`);
const notAllowed = (field: string, typ: string) => bad(`field "${field}" is not allowed in ${typ}`);
const oneOf = (field: string, typ: string, got: unknown, want: string) =>
  bad(`field "${field}" of ${typ} must be one of ${want}, got ${JSON.stringify(got)}`);

// Optional fields and how Go's decoder sees them present: strings when not
// empty, raw JSON when not absent (null counts), pointers when not null,
// numbers when not 0.
type Presence = 'str' | 'raw' | 'ptr' | 'num';
const FIELDS: Record<string, Presence> = {
  message_id: 'str',
  role: 'str',
  metadata: 'raw',
  delta: 'str',
  call_id: 'str',
  name: 'str',
  input: 'raw',
  output: 'raw',
  error: 'raw',
  status: 'str',
  request: 'ptr',
  data: 'raw',
  run: 'ptr',
  message: 'ptr',
  worker_id: 'str',
  attempt: 'num',
  request_id: 'str',
  value: 'raw',
  state: 'raw',
  patch: 'raw',
};

const ALLOWED: Record<string, string[]> = {
  'run.created': ['run'],
  'message.created': ['message', 'message_id'],
  'run.started': ['worker_id', 'attempt'],
  'message.started': ['message_id', 'role', 'metadata'],
  'text.delta': ['message_id', 'delta'],
  'reasoning.delta': ['message_id', 'delta'],
  'tool.started': ['message_id', 'call_id', 'name'],
  'tool.delta': ['message_id', 'call_id', 'delta'],
  'tool.finished': ['message_id', 'call_id', 'input', 'output', 'error'],
  'message.updated': ['message_id', 'metadata'],
  'message.finished': ['message_id', 'status'],
  'run.waiting': ['request'],
  'run.input': ['request_id', 'value'],
  custom: ['name', 'data'],
  'state.snapshot': ['state'],
  'state.delta': ['patch'],
  'run.cancel_requested': [],
  'run.finished': ['status', 'error'],
};

/** @internal Whether an optional event field is present, as the server sees it. */
export function has(e: object, field: string): boolean {
  const v = (e as Record<string, unknown>)[field];
  switch (FIELDS[field]) {
    case 'str':
      return v !== undefined && v !== '';
    case 'raw':
      return v !== undefined;
    case 'ptr':
      return v !== undefined && v !== null;
    case 'num':
      return v !== undefined && v !== 0;
  }
  return v !== undefined;
}

/** Whether `type` is an event type of protocol v1. */
export function knownEventType(type: string): boolean {
  return Object.prototype.hasOwnProperty.call(ALLOWED, type);
}

/** @internal */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const nullish = (v: unknown) => v === undefined || v === null;
const ROLES = ['user', 'assistant', 'tool', 'system'];
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

function checkId(id: unknown, field: string, typ: string): Rejection | undefined {
  if (id === undefined || id === '') return required(field, typ);
  if (!validId(id)) return bad(`${field} ${JSON.stringify(id)} is not a valid id (1 to 128 characters of A-Z a-z 0-9 . _ ~ -)`);
  return undefined;
}

function checkObject(v: unknown, field: string, typ: string): Rejection | undefined {
  return nullish(v) || isObject(v) ? undefined : bad(`field "${field}" of ${typ} must be a JSON object`);
}

/** @internal The error of run.finished: absent, null, or exactly {code, message} with non-empty strings. */
export function runError(v: unknown): Rejection | undefined {
  if (nullish(v)) return undefined;
  const ok =
    isObject(v) &&
    Object.keys(v).every((k) => k === 'code' || k === 'message') &&
    typeof v.code === 'string' &&
    v.code !== '' &&
    typeof v.message === 'string' &&
    v.message !== '';
  return ok ? undefined : bad('field "error" of run.finished must be an object {code, message} with non-empty strings');
}

/**
 * Checks the shape of an event for a thread: its type is known, it carries
 * only the fields its type uses and those it requires, in their form.
 */
export function checkShape(e: TetherEvent, threadId: string): Rejection | undefined {
  const typ = e.type;
  if (!typ) return bad('field "type" is required');
  const allowed = ALLOWED[typ];
  if (!allowed || !knownEventType(typ)) return bad(`unknown event type ${JSON.stringify(String(typ).slice(0, 40))}`);
  for (const f of Object.keys(FIELDS)) {
    if (has(e, f) && !allowed.includes(f)) return notAllowed(f, typ);
  }
  if (!e.run_id) return required('run_id', typ);
  switch (typ) {
    case 'run.created':
      return checkNewRun(e, threadId);
    case 'message.created':
      return checkCreatedMessage(e, threadId);
    case 'run.started':
      if (!has(e, 'worker_id')) return required('worker_id', typ);
      if ((e.attempt ?? 0) < 0) return bad(`field "attempt" of ${typ} must be positive`);
      return undefined;
    case 'message.started':
      return (
        checkId(e.message_id, 'message_id', typ) ??
        (!has(e, 'role')
          ? required('role', typ)
          : !ROLES.includes(str(e.role))
            ? oneOf('role', typ, e.role, ROLES.join('|'))
            : checkObject(e.metadata, 'metadata', typ))
      );
    case 'text.delta':
    case 'reasoning.delta':
      return has(e, 'message_id') ? undefined : required('message_id', typ);
    case 'tool.started':
      if (!has(e, 'message_id')) return required('message_id', typ);
      return checkId(e.call_id, 'call_id', typ) ?? (has(e, 'name') ? undefined : required('name', typ));
    case 'tool.delta':
    case 'tool.finished':
      if (!has(e, 'message_id')) return required('message_id', typ);
      return has(e, 'call_id') ? undefined : required('call_id', typ);
    case 'message.updated':
      if (!has(e, 'message_id')) return required('message_id', typ);
      if (e.metadata === undefined) return required('metadata', typ);
      return isObject(e.metadata) ? undefined : bad(`field "metadata" of ${typ} must be a JSON object`);
    case 'message.finished':
      if (!has(e, 'message_id')) return required('message_id', typ);
      if (!has(e, 'status')) return required('status', typ);
      return ['done', 'error', 'aborted'].includes(str(e.status)) ? undefined : oneOf('status', typ, e.status, 'done|error|aborted');
    case 'run.waiting': {
      const rq = e.request;
      if (nullish(rq)) return required('request', typ);
      return checkId(rq!.id, 'request.id', typ) ?? (rq!.kind ? undefined : required('request.kind', typ));
    }
    case 'run.input':
      return checkId(e.request_id, 'request_id', typ);
    case 'custom':
      return has(e, 'name') ? undefined : required('name', typ);
    case 'state.snapshot':
      return has(e, 'state') ? undefined : required('state', typ);
    case 'state.delta': {
      if (!has(e, 'patch')) return required('patch', typ);
      const ops = parsePatch(e.patch);
      return typeof ops === 'string' ? bad(`field "patch" of ${typ} is not a JSON Patch (RFC 6902): ${ops}`) : undefined;
    }
    case 'run.finished':
      if (!has(e, 'status')) return required('status', typ);
      if (!['done', 'error', 'cancelled', 'aborted'].includes(str(e.status))) {
        return oneOf('status', typ, e.status, 'done|error|cancelled|aborted');
      }
      return runError(e.error);
  }
  return undefined;
}

function checkNewRun(e: TetherEvent, threadId: string): Rejection | undefined {
  const typ = e.type;
  const r = e.run;
  if (nullish(r)) return required('run', typ);
  const bad1 = checkId(r!.id, 'run.id', typ);
  if (bad1) return bad1;
  if (e.run_id !== r!.id) return bad(`run_id ${e.run_id} of run.created differs from run.id ${r!.id}`);
  if (r!.thread_id !== threadId) return bad(`run ${r!.id} names thread ${JSON.stringify(r!.thread_id)}, not ${threadId}`);
  if (r!.status !== 'pending') return bad(`run ${r!.id} must be created pending, not ${JSON.stringify(r!.status)}`);
  if (r!.attempt) return notAllowed('run.attempt', typ);
  if (!nullish(r!.started_at)) return notAllowed('run.started_at', typ);
  if (!nullish(r!.completed_at)) return notAllowed('run.completed_at', typ);
  if (!nullish(r!.cancel_requested_at)) return notAllowed('run.cancel_requested_at', typ);
  if (!nullish(r!.error)) return notAllowed('run.error', typ);
  if (!nullish(r!.request)) return notAllowed('run.request', typ);
  if (r!.worker_id) return notAllowed('run.worker_id', typ);
  return checkObject(r!.metadata, 'run.metadata', typ);
}

function checkCreatedMessage(e: TetherEvent, threadId: string): Rejection | undefined {
  const typ = e.type;
  const m = e.message;
  if (nullish(m)) return required('message', typ);
  const msg = m!;
  const badId = checkId(msg.id, 'message.id', typ);
  if (badId) return badId;
  if (e.message_id && e.message_id !== msg.id) return bad(`message_id ${e.message_id} of ${typ} is not message.id ${msg.id}`);
  if (!msg.role) return required('message.role', typ);
  if (!ROLES.includes(msg.role)) return oneOf('message.role', typ, msg.role, ROLES.join('|'));
  if (msg.thread_id && msg.thread_id !== threadId) return bad(`message ${msg.id} names thread ${msg.thread_id}, not ${threadId}`);
  if (msg.run_id && msg.run_id !== e.run_id) return bad(`message ${msg.id} names run ${msg.run_id}, not ${e.run_id}`);
  if (msg.status && !['done', 'error', 'aborted'].includes(msg.status)) {
    return oneOf('message.status', typ, msg.status, 'done|error|aborted');
  }
  const badMeta = checkObject(msg.metadata, 'message.metadata', typ);
  if (badMeta) return badMeta;
  const parts = (msg.parts ?? []) as unknown as Record<string, unknown>[];
  const calls = new Set<string>();
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    const set = (names: string[]) =>
      names.find((n) => (n === 'input' || n === 'output' || n === 'error' || n === 'data' ? p[n] !== undefined : !!p[n]));
    let extra: string | undefined;
    switch (p.type) {
      case 'text':
      case 'reasoning':
        extra = set(['call_id', 'name', 'input', 'input_text', 'output', 'error', 'status', 'data']);
        break;
      case 'data':
        extra = set(['text', 'call_id', 'input', 'input_text', 'output', 'error', 'status']);
        break;
      case 'tool': {
        extra = set(['text', 'input_text', 'data']);
        if (extra) break;
        const badCall = checkId(p.call_id, 'call_id', 'a tool part');
        if (badCall) return badCall;
        if (!p.name) return required('name', 'a tool part');
        if (calls.has(p.call_id as string)) return bad(`message ${msg.id} has two tool parts with call_id ${String(p.call_id)}`);
        calls.add(p.call_id as string);
        if (p.status !== undefined && p.status !== '' && p.status !== 'done' && p.status !== 'error') {
          return oneOf('status', 'a tool part of a complete message', p.status, 'done|error');
        }
        break;
      }
      case undefined:
      case '':
        return bad(`part ${i} of message ${msg.id} has no type`);
      default:
        return bad(`part ${i} of message ${msg.id} has unknown type ${JSON.stringify(p.type)}`);
    }
    if (extra) return bad(`field "${extra}" is not allowed in a ${String(p.type)} part`);
  }
  return undefined;
}
