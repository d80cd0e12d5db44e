// The bearer token of a client: a fixed string, or a function the client
// calls when it needs one. A token that is a JWT with an `exp` is kept
// until shortly before that time and then asked for again, so requests and
// reconnects never wait on an expired one; the server's `token_expired`
// (a 401 code, an SSE `reconnect` reason) drops it at once.

import { TetherError } from './errors.js';
import { defaultTimers, type Timers } from './timing.js';

/** Why a token function is called. */
export type TokenReason =
  /** The client has no token for this request (the first request, or the token is not a JWT with an `exp`, so it is asked for each request). */
  | 'initial'
  /** The token's `exp` is near (see {@link TokenOptions.refreshAheadMs}). */
  | 'expiring'
  /** The server answered `token_expired` for the token: return a new one, not the same. */
  | 'expired';

/** What a token function is told. */
export interface TokenRequest {
  reason: TokenReason;
  /** The token being replaced, if any. */
  previous?: string;
}

/**
 * A bearer token, or a function returning one (`undefined` sends no
 * `Authorization`). A function is called when a token is needed: once per
 * request for a token that is not a JWT with an `exp` (as before), and for a
 * JWT only when it is about to expire or the server said it has.
 */
export type TokenSource = string | ((request: TokenRequest) => string | undefined | Promise<string | undefined>);

/** How tokens are refreshed. */
export interface TokenOptions {
  /**
   * How long before a JWT's `exp` a new token is asked for. Defaults to
   * 30 s; never more than half of the token's lifetime as the client saw it,
   * so a short-lived token is not refreshed again at once.
   */
  refreshAheadMs?: number;
}

/**
 * The `exp` of a JWT, in milliseconds since the epoch, read from its payload
 * without verifying anything (the server verifies; the client only needs to
 * know when to refresh). `undefined` for anything that is not a JWT with a
 * numeric `exp`.
 */
export function jwtExpiry(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts[1]) return undefined;
  try {
    const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
    const bin = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const payload = JSON.parse(new TextDecoder().decode(bytes)) as { exp?: unknown };
    return typeof payload.exp === 'number' && Number.isFinite(payload.exp) ? payload.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

interface Held {
  token: string | undefined;
  /** When to ask for a new one; undefined: ask at each request (not a JWT with an exp). */
  refreshAt: number | undefined;
  /** The JWT's `exp` in ms, if it has one. */
  exp: number | undefined;
}

/**
 * @internal Holds a client's token: calls the token function when needed,
 * one call at a time however many requests wait for it.
 */
export class TokenKeeper {
  private held: Held | undefined;
  private pending: Promise<string | undefined> | undefined;
  private next: TokenReason = 'initial';
  private previous: string | undefined;

  constructor(
    private readonly source: TokenSource | undefined,
    private readonly opts: TokenOptions = {},
    private readonly timers: Timers = defaultTimers,
  ) {}

  /** Whether a new token can be had (the source is a function). */
  get refreshable(): boolean {
    return typeof this.source === 'function';
  }

  /**
   * The token to send now. Throws a TetherError `token_unavailable`
   * (retryable) when the token function throws, but for a call ahead of
   * the held token's `exp` (reason `expiring`): that token is still good,
   * so it is sent, and the next request asks again.
   */
  async get(): Promise<string | undefined> {
    const src = this.source;
    if (typeof src !== 'function') return sendable(src);
    const h = this.held;
    if (h && h.refreshAt !== undefined) {
      if (this.timers.now() < h.refreshAt) return h.token;
      if (this.next === 'initial') {
        this.next = 'expiring';
        this.previous = h.token;
      }
    }
    if (!this.pending) {
      const request: TokenRequest = { reason: this.next, ...(this.previous !== undefined ? { previous: this.previous } : {}) };
      const p = (async () => {
        let token: string | undefined;
        try {
          token = await src(request);
        } catch (err) {
          const held = this.held;
          if (request.reason === 'expiring' && held?.exp !== undefined && this.timers.now() < held.exp) return held.token;
          const msg = err instanceof Error ? err.message : String(err);
          throw new TetherError('token_unavailable', `the token function failed: ${msg || 'no reason given'}`, 0, { cause: err });
        }
        if (token !== undefined && typeof token !== 'string') {
          throw new TetherError('token_unavailable', `the token function returned ${typeof token}, not a string`);
        }
        sendable(token);
        const exp = token ? jwtExpiry(token) : undefined;
        this.held = { token, refreshAt: this.refreshAt(exp), exp };
        this.next = 'initial';
        this.previous = undefined;
        return token;
      })();
      this.pending = p;
      const clear = () => {
        if (this.pending === p) this.pending = undefined;
      };
      p.then(clear, clear);
    }
    return this.pending;
  }

  /**
   * The server said `token` has expired: the next {@link get} asks for a
   * new one (unless a newer one is held already).
   */
  expired(token: string | undefined): void {
    if (typeof this.source !== 'function') return;
    if (this.held && this.held.token !== token) return; // replaced since
    this.held = undefined;
    this.next = 'expired';
    this.previous = token;
  }

  /** When the held token should be replaced, if it is a JWT with an `exp`. */
  refreshTime(): number | undefined {
    return typeof this.source === 'function' ? this.held?.refreshAt : undefined;
  }

  private refreshAt(exp: number | undefined): number | undefined {
    if (exp === undefined) return undefined;
    const now = this.timers.now();
    const life = exp - now;
    if (life <= 0) return now; // expired already: asked for again at the next request
    return exp - Math.min(this.opts.refreshAheadMs ?? 30_000, life / 2);
  }
}

/**
 * Returns `token` if an HTTP header can carry it (visible ASCII, as every
 * token Tether takes is), else throws a TetherError `token_unavailable`:
 * `fetch` would throw a bare TypeError ("Cannot convert argument to a
 * ByteString") from deep inside the request.
 */
function sendable(token: string | undefined): string | undefined {
  if (token !== undefined && !/^[\x21-\x7e]*$/.test(token)) {
    throw new TetherError('token_unavailable', 'the token cannot be sent in an HTTP header: it holds characters other than visible ASCII');
  }
  return token;
}

/** @internal `init` with `Authorization: Bearer <token>` (none without a token). */
export function authorized(init: RequestInit, token: string | undefined): RequestInit {
  if (!token) return init;
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${token}`);
  return { ...init, headers };
}

/** @internal The `error.code` of an error answer, read without consuming it. */
export async function errorCode(res: Response): Promise<string | undefined> {
  try {
    const body = (await res.clone().json()) as { error?: { code?: unknown } };
    return typeof body?.error?.code === 'string' ? body.error.code : undefined;
  } catch {
    return undefined;
  }
}
