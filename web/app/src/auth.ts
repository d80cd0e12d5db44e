// The API token. None by default (a server on loopback runs without keys).
// With keys on, the page gets its token one of two ways:
//
// - a login hook: a page that wraps this one (an operator's, behind its own
//   sign-in, on the same origin) defines `window.tetherToken`, an async
//   function returning a token, before app.js loads. The client calls it for
//   its first request, again shortly before a JWT's exp and when the server
//   answers `token_expired`; the token lives in memory only.
// - pasted: when the server answers 401 or 403 the page asks for one and
//   keeps it in sessionStorage (this tab, until it closes: not on disk for
//   every tab as localStorage would, never in a cookie or a URL). A pasted
//   JWT cannot be refreshed: when it expires the page asks again.
//
// Either way it is sent as `Authorization: Bearer …`.

import type { TetherError, TokenRequest, TokenSource } from '@tether/client';
import { h, icon } from './dom.js';

const KEY = 'tether.token';

declare global {
  interface Window {
    /** The login hook: returns a token for the page (see docs/operations.md, "The page"). */
    tetherToken?: (request: TokenRequest) => string | undefined | Promise<string | undefined>;
  }
}

/** The login hook, if the page that loaded this one set it. */
function hook(): Window['tetherToken'] {
  return typeof window.tetherToken === 'function' ? window.tetherToken : undefined;
}

/**
 * Where the client gets its token: the login hook (looked up at each call),
 * else the pasted one; a pasted token the server says has expired cannot be
 * renewed here, so the page asks for another at once.
 */
export function tokenSource(): TokenSource {
  return (r) => {
    const fn = hook();
    if (fn) return fn(r);
    if (r.reason === 'expired') askForToken('expired');
    return getToken();
  };
}

/** The pasted token, if any. */
export function getToken(): string | undefined {
  try {
    const old = localStorage.getItem(KEY);
    if (old) {
      // Kept by earlier versions of the page: moved to this tab's storage.
      localStorage.removeItem(KEY);
      if (!sessionStorage.getItem(KEY)) sessionStorage.setItem(KEY, old);
    }
    return sessionStorage.getItem(KEY) || undefined;
  } catch {
    return undefined; // storage disabled
  }
}

function setToken(token: string | undefined): void {
  try {
    if (token) sessionStorage.setItem(KEY, token);
    else sessionStorage.removeItem(KEY);
  } catch {
    // storage disabled: the token lasts until the page reloads
  }
}

let open = false;

/** Why the page needs a token. */
export type AuthReason = 'missing' | 'rejected' | 'expired' | 'forbidden' | 'hook';

/**
 * Shows the token prompt (once, however many requests failed). Saving the
 * token reloads the page, so every request and stream starts again with it.
 * With a login hook there is nothing to paste: the page says what happened
 * and offers a reload (which signs in again through the wrapper).
 */
export function askForToken(reason: AuthReason, err?: TetherError): void {
  if (open) return;
  open = true;
  if (reason === 'hook') {
    const detail = err ? `${err.code}: ${err.message}` : 'no token';
    const dialog = h(
      'div',
      { class: 'overlay', testid: 'token-prompt', attrs: { role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'token-title' } },
      h(
        'div',
        { class: 'dialog' },
        h('div', { class: 'dialog-icon' }, icon('key')),
        h('h2', { attrs: { id: 'token-title' } }, err?.status === 403 ? 'Not allowed' : 'Signed out of Tether'),
        h('p', {}, `The server did not accept the token from the sign-in (${detail}). Reload to sign in again.`),
        h('button', { class: 'btn primary wide', testid: 'token-reload', attrs: { type: 'button' }, on: { click: () => location.reload() } }, 'Reload'),
      ),
    );
    document.body.appendChild(dialog);
    return;
  }
  const input = h('input', {
    class: 'field',
    testid: 'token-input',
    attrs: { type: 'password', placeholder: 'API token', autocomplete: 'current-password', 'aria-label': 'API token', required: true, minlength: 16 },
  });
  const message =
    reason === 'forbidden'
      ? 'This token may not use the chat page (it needs the client or admin role). Enter another one.'
      : reason === 'expired'
        ? 'The token has expired. Enter a new one.'
        : reason === 'rejected'
          ? 'The server did not accept the saved token. Enter a valid one.'
          : 'This server needs an API token. Enter a client or admin token; it stays in this tab until you close it.';
  const dialog = h(
    'div',
    { class: 'overlay', testid: 'token-prompt', attrs: { role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'token-title' } },
    h(
      'form',
      {
        class: 'dialog',
        on: {
          submit: (e) => {
            e.preventDefault();
            setToken(input.value.trim());
            location.reload();
          },
        },
      },
      h('div', { class: 'dialog-icon' }, icon('key')),
      h('h2', { attrs: { id: 'token-title' } }, 'Sign in to Tether'),
      h('p', {}, message),
      input,
      h('button', { class: 'btn primary wide', testid: 'token-save', attrs: { type: 'submit' } }, 'Continue'),
    ),
  );
  document.body.appendChild(dialog);
  input.focus();
}

/** Why a 401/403 happened, given how the page gets its token. */
export function authReason(err: TetherError): AuthReason {
  if (hook()) return 'hook';
  if (err.status === 403) return 'forbidden';
  if (err.code === 'token_expired') return 'expired';
  return getToken() ? 'rejected' : 'missing';
}
