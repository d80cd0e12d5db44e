// The API token: none by default (a server on loopback runs without keys);
// when the server answers 401 or 403 the page asks for one and keeps it in
// localStorage, sent as `Authorization: Bearer …`.

import { h, icon } from './dom.js';

const KEY = 'tether.token';

/** The stored token, if any. */
export function getToken(): string | undefined {
  try {
    return localStorage.getItem(KEY) || undefined;
  } catch {
    return undefined; // storage disabled
  }
}

function setToken(token: string | undefined): void {
  try {
    if (token) localStorage.setItem(KEY, token);
    else localStorage.removeItem(KEY);
  } catch {
    // storage disabled: the token lasts until the page reloads
  }
}

let open = false;

/**
 * Shows the token prompt (once, however many requests failed). Saving the
 * token reloads the page, so every request and stream starts again with it.
 */
export function askForToken(reason: 'missing' | 'rejected' | 'forbidden'): void {
  if (open) return;
  open = true;
  const input = h('input', {
    class: 'field',
    testid: 'token-input',
    attrs: { type: 'password', placeholder: 'API token', autocomplete: 'current-password', 'aria-label': 'API token', required: true, minlength: 16 },
  });
  const message =
    reason === 'forbidden'
      ? 'This token may not use the chat page (it needs the client or admin role). Enter another one.'
      : reason === 'rejected'
        ? 'The server did not accept the saved token. Enter a valid one.'
        : 'This server needs an API token. Enter a client or admin token; it stays in this browser.';
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

/** Why a 401/403 happened, given whether a token was sent. */
export function authReason(status: number): 'missing' | 'rejected' | 'forbidden' {
  if (status === 403) return 'forbidden';
  return getToken() ? 'rejected' : 'missing';
}
