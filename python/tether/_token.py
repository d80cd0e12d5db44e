"""The bearer token of a client: a fixed string, or a callable asked for one when needed.

A token that is a JWT with an ``exp`` is kept until shortly before that time
(30 s, at most half the lifetime the client saw) and then asked for again;
the server's ``token_expired`` (a 401 code, an SSE ``reconnect`` reason)
drops it at once. Anything else a callable returns is asked for at each
request. A callable that raises while the token held is still before its
``exp`` does not fail the request: that token is sent, and the callable is
asked again halfway to the ``exp``. The client never verifies a token: it
only reads ``exp``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import inspect
import json
import threading
import time
from typing import Any, Awaitable, Callable, Optional, Union

from .errors import TetherError

TOKEN_EXPIRED = "token_expired"
"""The server's code for a JWT past its ``exp`` (a 401), and the ``reason`` of a stream it ended for it."""
TOKEN_UNAVAILABLE = "token_unavailable"
"""The client's code when the token callable raised: nothing was sent."""

REFRESH_AHEAD = 30.0
"""Seconds before a JWT's ``exp`` a new one is asked for (at most half its lifetime)."""

TokenSource = Union[str, Callable[[], Union[Optional[str], Awaitable[Optional[str]]]], None]
"""A token, or a callable returning one (an ``AsyncClient`` also awaits a coroutine function's)."""


def jwt_expiry(token: str) -> Optional[float]:
    """The ``exp`` of a JWT (seconds since the epoch), read without verifying; ``None`` for anything else."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1]:
        return None
    try:
        raw = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(raw).get("exp")
    except (ValueError, binascii.Error, AttributeError):
        return None
    if isinstance(exp, bool) or not isinstance(exp, (int, float)):
        return None
    return float(exp)


def _unavailable(e: Exception) -> TetherError:
    return TetherError(TOKEN_UNAVAILABLE, f"the token callable failed: {e or type(e).__name__}")


class TokenKeeper:
    """Holds a client's token; :meth:`get` (sync) and :meth:`aget` (asyncio) call the callable when needed."""

    def __init__(self, source: TokenSource, refresh_ahead: float = REFRESH_AHEAD, clock: Callable[[], float] = time.time) -> None:
        self._source = source
        self._ahead = refresh_ahead
        self._clock = clock
        self._token: Optional[str] = None
        self._refresh_at: Optional[float] = None  # None: ask at each request
        self._held = False
        self._exp: Optional[float] = None  # the held token's exp, if it is a JWT with one
        self._lock = threading.Lock()
        self._alock: Optional[asyncio.Lock] = None

    @property
    def refreshable(self) -> bool:
        return callable(self._source)

    def _fresh(self) -> bool:
        return self._held and self._refresh_at is not None and self._clock() < self._refresh_at

    def _keep(self, token: Any) -> Optional[str]:
        if token is not None and not isinstance(token, str):
            raise TetherError(TOKEN_UNAVAILABLE, f"the token callable returned {type(token).__name__}, not a str")
        exp = jwt_expiry(token) if token else None
        now = self._clock()
        if exp is None:
            self._refresh_at = None
        elif exp <= now:
            self._refresh_at = now  # expired already: asked for again at the next request
        else:
            self._refresh_at = exp - min(self._ahead, (exp - now) / 2)
        self._token, self._held, self._exp = token, True, exp
        return token

    def _failed(self, e: Exception) -> Optional[str]:
        # Asked ahead of the exp and failed (its endpoint down for a moment):
        # the token held is still good. It is sent, and kept until halfway to
        # its exp (_keep), when the callable is asked again; the request does
        # not fail for a refresh it did not need.
        if self._held and self._exp is not None and self._clock() < self._exp:
            return self._keep(self._token)
        raise _unavailable(e) from e

    def get(self) -> Optional[str]:
        """The token to send now; raises :class:`TetherError` ``token_unavailable`` if the callable raises."""
        src = self._source
        if not callable(src):
            return src
        with self._lock:
            if self._fresh():
                return self._token
            try:
                t = src()
                if inspect.isawaitable(t):
                    getattr(t, "close", lambda: None)()  # never awaited: no warning about it
                    raise TypeError("an async token callable needs AsyncClient")
            except Exception as e:
                return self._failed(e)
            return self._keep(t)

    async def aget(self) -> Optional[str]:
        """:meth:`get` for asyncio: a callable's awaitable is awaited, one call at a time."""
        src = self._source
        if not callable(src):
            return src
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            if self._fresh():
                return self._token
            try:
                t = src()
                if inspect.isawaitable(t):
                    t = await t
            except Exception as e:
                return self._failed(e)
            return self._keep(t)

    def expired(self, token: Optional[str]) -> None:
        """The server said ``token`` has expired: the next request asks for a new one (unless one came since)."""
        if self._held and self._token == token:
            self._held = False


def auth_header(token: Optional[str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def is_token_expired(status: int, body: bytes) -> bool:
    """Whether an answer is the server's 401 ``token_expired``."""
    return status == 401 and TetherError.from_response(status, body).code == TOKEN_EXPIRED
