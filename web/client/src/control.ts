// What the server's end and reconnect frames say (protocol §5): their
// reason, and the error of one that ended a stream before it started.

import { TetherError } from './errors.js';

// endReason reads the reason of an end frame, if it has one.
export function endReason(data: string): unknown {
  try {
    return (JSON.parse(data) as { reason?: unknown })?.reason;
  } catch {
    return undefined;
  }
}

// failure reads the error of an end or reconnect frame that ended a stream
// before it started (protocol §5): `{"reason", "error": {code, message}}`.
export function failure(data: string): TetherError | undefined {
  try {
    const d = JSON.parse(data) as { error?: { code?: unknown; message?: unknown } };
    const code = d?.error?.code;
    if (typeof code !== 'string' || !code) return undefined;
    const message = typeof d.error!.message === 'string' ? d.error!.message : code;
    return new TetherError(code, message, 200);
  } catch {
    return undefined;
  }
}
