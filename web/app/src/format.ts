// Pure formatting: text to blocks and inline spans, labels, times, the run
// options a page URL asks for. No DOM here, so it is unit-tested in Node.

import type { JSONObject, JSONValue, Run, ThreadStatus } from '@tether/client';

/** A block of message text: prose, or a fenced code block. */
export type Block = { kind: 'prose'; text: string } | { kind: 'code'; lang: string; text: string };

/** An inline span of prose. */
export type Span = { kind: 'text' | 'code' | 'strong'; text: string };

/**
 * Splits message text at ``` fences. An unclosed fence (still streaming)
 * runs to the end. Prose keeps its newlines (rendered with pre-wrap), so
 * the page shows exactly the characters of the text, minus the fences.
 */
export function blocks(text: string): Block[] {
  const out: Block[] = [];
  let rest = text;
  for (;;) {
    const open = rest.search(/(^|\n)```/);
    if (open < 0) break;
    const start = rest[open] === '\n' ? open + 1 : open;
    if (start > 0) out.push({ kind: 'prose', text: rest.slice(0, start) });
    const after = rest.slice(start + 3);
    const nl = after.indexOf('\n');
    const lang = nl < 0 ? after.trim() : after.slice(0, nl).trim();
    const body = nl < 0 ? '' : after.slice(nl + 1);
    const close = body.search(/(^|\n)```/);
    if (close < 0) {
      out.push({ kind: 'code', lang, text: body });
      return out;
    }
    out.push({ kind: 'code', lang, text: body.slice(0, close) });
    rest = body.slice(close).replace(/^\n?```[^\n]*\n?/, '');
  }
  if (rest) out.push({ kind: 'prose', text: rest });
  return out;
}

/** Splits prose into plain text, `code` and **strong** spans. Unclosed markers stay text. */
export function spans(text: string): Span[] {
  const out: Span[] = [];
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) out.push({ kind: 'text', text: text.slice(last, m.index) });
    if (m[1] !== undefined) out.push({ kind: 'code', text: m[1] });
    else out.push({ kind: 'strong', text: m[2]! });
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push({ kind: 'text', text: text.slice(last) });
  return out;
}

/** What the page says when a request got no answer at all (offline, server down). */
export const UNREACHABLE = 'Could not reach the server: check the connection, then try again.';

/**
 * What to tell a person about a failed request: the server's message, or,
 * when no answer came (the client's `network` code), that the server could
 * not be reached; not the browser's "Failed to fetch". A refusal the person
 * can act on says what it is and what to do: a message over the server's
 * size limit (`too_large`) is to be shortened, a rate limit waited out, for
 * as long as the answer's Retry-After says (`retryAfterMs`) when it says.
 */
export function errorText(err: unknown): string {
  const e = err && typeof err === 'object' ? (err as { code?: unknown; retryAfterMs?: unknown }) : undefined;
  const code = e?.code;
  if (code === 'network') return UNREACHABLE;
  const msg = err instanceof Error ? err.message : String(err);
  const said = msg.replace(/[.\s]+$/, '');
  const wait = typeof e?.retryAfterMs === 'number' && e.retryAfterMs >= 0 ? waitText(e.retryAfterMs) : undefined;
  if (code === 'too_large') return `The message is too long to send: ${said}.`;
  if (code === 'rate_limited' && wait) return `Too many requests: ${wait}.`;
  if (code === 'rate_limited') return `Too many requests: ${said}. Wait a moment, then send again.`;
  if (code === 'unavailable' && wait) return `The server is busy (${said}): ${wait}.`;
  if (code === 'quota_exceeded') return `Quota used up: ${said}.`;
  return msg;
}

/** "wait 12 s, then send again" for a Retry-After of 12 000 ms ("2 min 30 s" past a minute). */
function waitText(ms: number): string {
  const s = Math.ceil(ms / 1000);
  if (s <= 0) return 'send again now';
  const m = Math.floor(s / 60);
  const t = m === 0 ? `${s} s` : s % 60 === 0 ? `${m} min` : `${m} min ${s % 60} s`;
  return `wait ${t}, then send again`;
}

/** JSON for people: indented, with strings kept as they are. */
export function prettyJSON(v: JSONValue | undefined): string {
  if (v === undefined) return '';
  return JSON.stringify(v, null, 2) ?? String(v);
}

/** The label of a thread status in the list. */
export function threadStatusLabel(s: ThreadStatus | string): string {
  switch (s) {
    case 'busy':
      return 'running';
    case 'waiting':
      return 'needs input';
    case 'error':
      return 'error';
    default:
      return 'idle';
  }
}

/** A badge of the thread list: its text, and the status it is styled by (`data-status`). */
export interface Badge {
  label: string;
  status: string;
}

/**
 * A thread's badge in the list. A thread's status says `error` when its
 * last run ended `error` or `aborted`, and `idle` when it ended `done` or
 * `cancelled`; with the last run's status (when known) the badge says
 * which: an aborted run (the server restarted, the worker was lost) is not
 * an error of the agent, and a run the user stopped is not just idle.
 */
export function threadBadge(status: ThreadStatus | string, lastRun?: string): Badge {
  if (status === 'error' && lastRun === 'aborted') return { label: 'aborted', status: 'aborted' };
  if (status === 'idle' && lastRun === 'cancelled') return { label: 'stopped', status: 'cancelled' };
  return { label: threadStatusLabel(status), status };
}

/** A short sentence for a run's state, shown under its messages. */
export function runStatusText(run: Run): string {
  const took = duration(run.started_at ?? run.created_at, run.completed_at);
  switch (run.status) {
    case 'pending':
      return 'Queued — waiting for the agent to start…';
    case 'running':
      return run.cancel_requested_at ? 'Stopping…' : 'Working…';
    case 'waiting':
      return run.cancel_requested_at ? 'Stopping…' : 'Waiting for your answer';
    case 'done':
      return took ? `Done in ${took}` : 'Done';
    case 'cancelled':
      return 'Stopped';
    case 'error':
      return run.error?.message || 'The run failed.';
    case 'aborted':
      return run.error?.message || 'The run was aborted.';
  }
  return run.status;
}

/** "1.2 s", "3 min 4 s" between two timestamps, or "" if either is missing. */
export function duration(from: string | null | undefined, to: string | null | undefined): string {
  if (!from || !to) return '';
  const ms = Date.parse(to) - Date.parse(from);
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** "just now", "5 min ago", "3 h ago", or a date. */
export function ago(iso: string | null | undefined, now: number): string {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return '';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 45) return 'just now';
  if (s < 3600) return `${Math.max(1, Math.round(s / 60))} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return new Date(t).toISOString().slice(0, 10);
}

/** What a waiting run asks, as text: the payload's `prompt`, else its JSON. */
export function requestPrompt(payload: JSONValue | undefined): string {
  if (typeof payload === 'string') return payload;
  if (payload && typeof payload === 'object' && !Array.isArray(payload)) {
    const p = (payload as JSONObject).prompt ?? (payload as JSONObject).question;
    if (typeof p === 'string') return p;
  }
  if (payload === undefined || payload === null) return 'The agent is waiting for your input.';
  return prettyJSON(payload);
}

/** A title for a new thread from its first message: plain text, one line, at most 60 characters. */
export function titleFrom(text: string): string {
  return plainTitle(text);
}

/** The characters of a text a title is made from: plenty for 60 of them, markers dropped. */
const TITLE_HEAD = 1000;

/**
 * Text for a title: markdown markers dropped (a title is shown as plain
 * text, where `**bold**` or a fence would show as is), one line, at most
 * 60 characters. Only the text's head is read: the page titles every
 * thread on each render, and a message can be a megabyte (on which the
 * link pattern, say, would take minutes).
 */
export function plainTitle(text: string): string {
  const one = text
    .trimStart()
    .slice(0, TITLE_HEAD)
    .replace(/```[^\n]*\n?/g, ' ')
    .replace(/!?\[([^\]\n]*)\]\([^)\n]*\)/g, '$1')
    .replace(/`([^`\n]*)`/g, '$1')
    .replace(/\*\*([^*\n]+)\*\*/g, '$1')
    .replace(/(^|[^\w])__([^_\n]+)__(?!\w)/g, '$1$2')
    .replace(/(^|[^*\w])\*([^*\s][^*\n]*?)\*(?![*\w])/g, '$1$2')
    .replace(/(^|[^\w])_([^_\s][^_\n]*?)_(?!\w)/g, '$1$2')
    .replace(/~~([^~\n]+)~~/g, '$1')
    .replace(/^[ \t]{0,3}(#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d+[.)][ \t]+)/gm, '')
    .replace(/\s+/g, ' ')
    .trim();
  return one.length > 60 ? `${one.slice(0, 57).trimEnd()}…` : one;
}

/** The text of the first user message, if any: what a thread is about. */
export function firstUserText(messages: readonly { role: string; parts: readonly { type: string; text?: string }[] }[]): string | undefined {
  const m = messages.find((x) => x.role === 'user');
  if (!m) return undefined;
  const text = m.parts
    .filter((p) => p.type === 'text')
    .map((p) => p.text ?? '')
    .join('');
  return text.trim() ? text : undefined;
}

/**
 * The run options of the composer ("Options"), also read from the page
 * URL's query (`?agent=demo&tokens=200&delay_ms=40&ask=1&fail=0&reasoning=1&tool=1`)
 * so that a link or a test can set them.
 */
export interface RunOptions {
  /** Agent name; "" for the server's default. */
  agent: string;
  /** Demo: number of text deltas; undefined for the agent's default. */
  tokens: number | undefined;
  /** Demo: pause before each event in ms; undefined for the default. */
  delayMs: number | undefined;
  /** Demo: stream a reasoning part. */
  reasoning: boolean;
  /** Demo: make a tool call. */
  tool: boolean;
  /** Demo: make the tool call wait for the user's approval. */
  approve: boolean;
  /** Demo: ask the user a question before answering. */
  ask: boolean;
  /** Demo: fail halfway through the text. */
  fail: boolean;
}

/** Options as the demo agent has them by default. */
export const DEFAULT_OPTIONS: RunOptions = { agent: '', tokens: undefined, delayMs: undefined, reasoning: true, tool: true, approve: false, ask: false, fail: false };

/** Reads {@link RunOptions} from a query string; what it lacks or cannot read keeps its default. */
export function optionsFromQuery(search: string): RunOptions {
  const q = new URLSearchParams(search);
  const int = (k: string) => {
    const v = q.get(k);
    if (v === null || v.trim() === '') return undefined;
    const n = Number(v);
    return Number.isInteger(n) && n >= 0 ? n : undefined;
  };
  const bool = (k: string, d: boolean) => {
    const v = q.get(k);
    if (v === null) return d;
    return v === '' || v === '1' || v === 'true' || v === 'yes' || v === 'on';
  };
  return {
    agent: (q.get('agent') ?? '').trim(),
    tokens: int('tokens'),
    delayMs: int('delay_ms') ?? int('delay'),
    reasoning: bool('reasoning', true),
    tool: bool('tool', true),
    approve: bool('approve', false),
    ask: bool('ask', false),
    fail: bool('fail', false),
  };
}

/** The run metadata for options: `{demo: {…}}` with only what differs from the defaults, or undefined. */
export function runMetadata(o: RunOptions): JSONObject | undefined {
  const demo: JSONObject = {};
  if (o.tokens !== undefined) demo.tokens = o.tokens;
  if (o.delayMs !== undefined) demo.delay_ms = o.delayMs;
  if (!o.reasoning) demo.reasoning = false;
  if (!o.tool) demo.tool = false;
  if (o.approve) demo.approve = true;
  if (o.ask) demo.ask = true;
  if (o.fail) demo.fail = true;
  return Object.keys(demo).length > 0 ? { demo } : undefined;
}
