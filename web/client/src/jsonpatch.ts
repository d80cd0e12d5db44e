// RFC 6902 JSON Patch as the server applies it to a thread's state
// (runs/jsonpatch.go): the vectors of runs/testdata/jsonpatch hold both to
// the same results.

import type { JSONValue } from './types.js';

/** One operation of a JSON Patch, as {@link parsePatch} returns it. */
export interface PatchOperation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  /** The decoded JSON Pointer: `[]` is the root. */
  path: string[];
  from?: string[];
  value?: JSONValue;
}

/** The copies of one patch may add at most this many characters. */
const MAX_PATCH_COPY = 1 << 20;

const OPS = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);

const own = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);
const isObj = (v: unknown): v is { [k: string]: JSONValue } => typeof v === 'object' && v !== null && !Array.isArray(v);

function parsePointer(p: unknown): string[] | undefined {
  if (typeof p !== 'string') return undefined;
  if (p === '') return [];
  if (p[0] !== '/') return undefined;
  if (/~(?![01])/.test(p)) return undefined;
  return p
    .slice(1)
    .split('/')
    .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

const sameTokens = (a: string[], b: string[]) => a.length === b.length && a.every((t, i) => t === b[i]);

/**
 * Checks that `patch` is a JSON Patch: an array of operations with a known
 * `op`, JSON Pointer paths, `from` for move and copy, `value` for add,
 * replace and test, and no move into its own child. Returns the decoded
 * operations, or a message saying what is wrong (the server's
 * `bad_request`).
 */
export function parsePatch(patch: unknown): PatchOperation[] | string {
  if (!Array.isArray(patch)) return 'must be a JSON array of operations';
  const ops: PatchOperation[] = [];
  for (let i = 0; i < patch.length; i++) {
    const o = patch[i] as unknown;
    const at = `operation ${i}`;
    if (!isObj(o)) return `${at} is not an object`;
    if (!own(o, 'op')) return `${at} has no "op"`;
    if (typeof o.op !== 'string') return `${at} has a "op" that is not a string`;
    if (!OPS.has(o.op)) return `${at} has an "op" that is not add, remove, replace, move, copy or test`;
    if (!own(o, 'path')) return `${at} has no "path"`;
    const path = parsePointer(o.path);
    if (!path) return `${at} has a "path" that is not ${typeof o.path === 'string' ? 'a JSON Pointer' : 'a string'}`;
    const op: PatchOperation = { op: o.op as PatchOperation['op'], path };
    if (o.op === 'move' || o.op === 'copy') {
      if (!own(o, 'from')) return `${at} has no "from"`;
      const from = parsePointer(o.from);
      if (!from) return `${at} has a "from" that is not a JSON Pointer`;
      if (o.op === 'move' && path.length > from.length && sameTokens(path.slice(0, from.length), from)) {
        return `${at} moves a value into its own child`;
      }
      op.from = from;
    } else if (o.op !== 'remove') {
      if (!own(o, 'value')) return `${at} has no "value"`;
      op.value = o.value!;
    }
    ops.push(op);
  }
  return ops;
}

/** Why {@link applyPatch} refused a patch: it does not apply to the document (the server's `conflict`). */
export class PatchConflict extends Error {
  override name = 'PatchConflict';
}

// An array index: "0" or digits without a leading zero (RFC 6901 §4), below n.
function arrayIndex(tok: string, n: number): number | undefined {
  if (!/^(0|[1-9][0-9]*)$/.test(tok)) return undefined;
  const i = Number(tok);
  return i < n ? i : undefined;
}

function child(v: JSONValue, tok: string): { v: JSONValue } | undefined {
  if (Array.isArray(v)) {
    const i = arrayIndex(tok, v.length);
    return i === undefined ? undefined : { v: v[i]! };
  }
  if (isObj(v)) return own(v, tok) ? { v: v[tok]! } : undefined;
  return undefined;
}

// setMember defines a member, so that "__proto__" is a member like any other.
function setMember(o: { [k: string]: JSONValue }, k: string, v: JSONValue): void {
  Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
}

function equal(a: JSONValue, b: JSONValue): boolean {
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]!));
  if (isObj(a)) {
    if (!isObj(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => own(b, k) && equal(a[k]!, b[k]!));
  }
  return a === b;
}

const clone = (v: JSONValue): JSONValue => JSON.parse(JSON.stringify(v)) as JSONValue;

/**
 * Applies operations that {@link parsePatch} accepted to `doc` (`null` for
 * a state that is not set) and returns the new document; `doc` is not
 * modified. Throws {@link PatchConflict} if an operation does not apply:
 * a missing location, a failed test, an index past the end, copies of
 * more than 1 MiB.
 */
export function applyPatch(doc: JSONValue, ops: PatchOperation[]): JSONValue {
  if (ops.length === 0) return doc;
  let root: JSONValue = clone(doc);
  let copied = 0;
  const fail = (i: number, op: PatchOperation, why: string): never => {
    throw new PatchConflict(`operation ${i} (${op.op}) ${why}`);
  };
  const get = (path: string[]) => {
    let cur: { v: JSONValue } | undefined = { v: root };
    for (const t of path) {
      cur = child(cur.v, t);
      if (!cur) return undefined;
    }
    return cur;
  };
  const parentOf = (path: string[]) => get(path.slice(0, -1))?.v;
  // put adds (insert) or replaces the value at path; false if it cannot.
  const put = (path: string[], v: JSONValue, insert: boolean): string | undefined => {
    if (path.length === 0) {
      root = v;
      return undefined;
    }
    const c = parentOf(path);
    const t = path[path.length - 1]!;
    if (Array.isArray(c)) {
      if (!insert) {
        c[arrayIndex(t, c.length)!] = v;
        return undefined;
      }
      const i = t === '-' ? c.length : arrayIndex(t, c.length + 1);
      if (i === undefined) return 'names an array index past the end';
      c.splice(i, 0, v);
      return undefined;
    }
    if (isObj(c)) {
      setMember(c, t, v);
      return undefined;
    }
    return 'names a location whose parent does not exist in the state';
  };
  const remove = (path: string[]): boolean => {
    if (path.length === 0) {
      root = null;
      return true;
    }
    const c = parentOf(path);
    const t = path[path.length - 1]!;
    if (Array.isArray(c)) {
      const i = arrayIndex(t, c.length);
      if (i === undefined) return false;
      c.splice(i, 1);
      return true;
    }
    if (isObj(c) && own(c, t)) {
      delete c[t];
      return true;
    }
    return false;
  };
  const NO_PATH = 'names a location that does not exist in the state';
  ops.forEach((op, i) => {
    let why: string | undefined;
    switch (op.op) {
      case 'add':
        why = put(op.path, clone(op.value!), true);
        break;
      case 'replace':
        why = get(op.path) ? put(op.path, clone(op.value!), false) : NO_PATH;
        break;
      case 'remove':
        if (!remove(op.path)) why = NO_PATH;
        break;
      case 'move': {
        const v = get(op.from!);
        if (!v) why = NO_PATH;
        else if (!sameTokens(op.from!, op.path)) {
          remove(op.from!);
          why = put(op.path, v.v, true);
        }
        break;
      }
      case 'copy': {
        const v = get(op.from!);
        if (!v) {
          why = NO_PATH;
          break;
        }
        const text = JSON.stringify(v.v);
        copied += new TextEncoder().encode(text).length;
        why = copied > MAX_PATCH_COPY ? 'copies more than 1 MiB in one patch' : put(op.path, JSON.parse(text) as JSONValue, true);
        break;
      }
      case 'test': {
        const v = get(op.path);
        if (!v) why = NO_PATH;
        else if (!equal(v.v, op.value!)) why = 'failed: the value differs';
        break;
      }
    }
    if (why) fail(i, op, why);
  });
  return root;
}
