/**
 * Error codes: the server's stable codes (protocol §1) plus the client's
 * own: `network` (the request did not get an answer), `aborted` (closed by
 * the caller), `timeout` (no answer in time), `protocol` (the server's answer
 * was not what the protocol says: a 2xx whose body is not JSON, a stream
 * that is not an event stream; the Go and Python clients give the same
 * code), `token_unavailable` (the token function threw: nothing was sent).
 */
export type ErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'token_expired'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'run_active'
  | 'lease_lost'
  | 'gone'
  | 'too_large'
  | 'rate_limited'
  | 'unavailable'
  | 'internal'
  | 'network'
  | 'aborted'
  | 'timeout'
  | 'protocol'
  | 'token_unavailable'
  | (string & {});

/**
 * An error from Tether or from talking to it. `code` is the server's code
 * from its `{"error":{"code","message"}}` body, or one of the client's
 * (`network`, `aborted`, `timeout`, `protocol`); `status` is the HTTP status,
 * 0 when there was no answer.
 */
export class TetherError extends Error {
  /** Stable code to branch on. */
  readonly code: ErrorCode;
  /** HTTP status, or 0 when the server did not answer. */
  readonly status: number;
  /** The server's X-Request-Id, when it answered. */
  readonly requestId: string | undefined;
  /**
   * The answer's Retry-After in milliseconds: how long a 429 or a 503 asks
   * to wait before sending again. Undefined when it had none (or a date).
   */
  readonly retryAfterMs: number | undefined;

  /** Makes an error; `cause` is kept as the standard `cause`. */
  constructor(code: ErrorCode, message: string, status = 0, options?: { cause?: unknown; requestId?: string; retryAfterMs?: number }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'TetherError';
    this.code = code;
    this.status = status;
    this.requestId = options?.requestId;
    this.retryAfterMs = options?.retryAfterMs;
  }

  /**
   * Whether retrying the same request can succeed: no answer, 5xx, 408 and
   * 429. Other answers (400, 401, 403, 404, 409, 410…) will not change.
   */
  get retryable(): boolean {
    if (this.code === 'aborted') return false;
    if (this.status === 0) return this.code !== 'protocol';
    return this.status >= 500 || this.status === 408 || this.status === 429;
  }
}

/** Builds a TetherError from a non-2xx response, reading its error body. */
export async function errorFromResponse(res: Response): Promise<TetherError> {
  const requestId = res.headers.get('x-request-id') ?? undefined;
  let code = '';
  let message = '';
  try {
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
    if (body && typeof body.error === 'object' && body.error) {
      if (typeof body.error.code === 'string') code = body.error.code;
      if (typeof body.error.message === 'string') message = body.error.message;
    }
  } catch {
    // Not JSON (a proxy's error page): fall back to the status.
  }
  return new TetherError(code || codeForStatus(res.status), message || `HTTP ${res.status}`, res.status, {
    requestId,
    retryAfterMs: retryAfterMs(res),
  });
}

/**
 * The code of an error answer without the error body (a proxy's page): the
 * server's code for that status; `internal` for another 5xx, `protocol` for
 * another status (405, 418, 422). The Go and Python clients read it the
 * same way (docs/protocol.md §1).
 */
function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return 'bad_request';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'conflict';
    case 410:
      return 'gone';
    case 413:
      return 'too_large';
    case 429:
      return 'rate_limited';
    case 503:
      return 'unavailable';
  }
  return status >= 500 ? 'internal' : 'protocol';
}

/** Wraps anything thrown by fetch or a body read into a TetherError. */
export function toTetherError(err: unknown, signal?: AbortSignal): TetherError {
  if (err instanceof TetherError) return err;
  if (signal?.aborted || (err instanceof Error && err.name === 'AbortError')) {
    return new TetherError('aborted', 'the request was aborted', 0, { cause: err });
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new TetherError('network', msg || 'network error', 0, { cause: err });
}

/** Reads an answer's Retry-After (in seconds) as milliseconds, if it has one. */
export function retryAfterMs(res: Response): number | undefined {
  const v = res.headers.get('retry-after');
  if (v === null || !/^[0-9]+$/.test(v.trim())) return undefined;
  return Number(v.trim()) * 1000;
}
