import type { JSONValue } from './types.js';

function isPlainObject(v: unknown): v is { [key: string]: JSONValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Applies an RFC 7396 JSON merge patch to `target` and returns the result,
 * as the server's reducer does for `message.updated`: members of an object
 * patch replace those of the target, null members remove them, nested
 * objects merge recursively, and a patch that is not an object replaces the
 * target whole. A target that is not an object is treated as `{}`. Neither
 * input is modified.
 */
export function mergePatch(target: JSONValue | undefined, patch: JSONValue): JSONValue {
  if (!isPlainObject(patch)) return patch;
  const out: { [key: string]: JSONValue } = isPlainObject(target) ? { ...target } : {};
  for (const key of Object.keys(patch)) {
    const val = patch[key]!;
    if (val === null) {
      delete out[key];
      continue;
    }
    out[key] = mergePatch(out[key], val);
  }
  return out;
}
