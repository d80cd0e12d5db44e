"""Errors: every failure the server reports has a stable code (docs/protocol.md §1)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

# The stable error codes of the protocol.
BAD_REQUEST = "bad_request"
UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"
NOT_FOUND = "not_found"
CONFLICT = "conflict"
RUN_ACTIVE = "run_active"
LEASE_LOST = "lease_lost"
GONE = "gone"
TOO_LARGE = "too_large"
RATE_LIMITED = "rate_limited"
UNAVAILABLE = "unavailable"
INTERNAL = "internal"

# The clients' own code, never the server's: an answer that is not what the protocol says (a 2xx
# whose body is not the JSON expected, an error answer of a 4xx status without a code of its own
# (405, 418, 422) and without the error body, a stream that is not an event stream, an event that
# is not JSON); a repeat would most likely get the same. The Go and TypeScript clients use it too.
PROTOCOL = "protocol"

_BY_STATUS = {
    400: BAD_REQUEST,
    401: UNAUTHORIZED,
    403: FORBIDDEN,
    404: NOT_FOUND,
    409: CONFLICT,
    410: GONE,
    413: TOO_LARGE,
    429: RATE_LIMITED,
    503: UNAVAILABLE,
}


def code_for_status(status: int) -> str:
    """The code of an error answer without the protocol's error body (a proxy's page): the one the
    server gives with that status; ``internal`` for another 5xx, ``protocol`` for another status
    (405, 418, 422: no answer of the protocol, a repeat would get the same). The Go and TypeScript
    clients read it the same way (docs/protocol.md §1)."""
    return _BY_STATUS.get(status, INTERNAL if status >= 500 else PROTOCOL)


class TetherError(Exception):
    """An error of the server (``status`` is its HTTP status) or of the client (``status`` 0).

    ``code`` is one of the protocol's stable codes (``not_found``,
    ``conflict``, ``lease_lost``, ...); test it rather than the message,
    which is for people. ``retry_after`` is the answer's ``Retry-After`` in
    seconds (a 429 or a 503 says how long to wait before sending again),
    None when it had none or one that is not a number of seconds.
    """

    def __init__(self, code: str, message: str, status: int = 0, headers: Optional[Mapping[str, str]] = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.headers: Mapping[str, str] = dict(headers or {})
        self.retry_after: Optional[float] = _seconds(next((v for k, v in self.headers.items() if k.lower() == "retry-after"), None))

    @classmethod
    def from_response(cls, status: int, body: bytes, headers: Optional[Mapping[str, str]] = None) -> "TetherError":
        """Reads the protocol's error body ``{"error": {"code", "message"}}``, or makes one up from the status."""
        import json

        code, message = code_for_status(status), ""
        try:
            e: Any = json.loads(body or b"null")
            if isinstance(e, Mapping) and isinstance(e.get("error"), Mapping):
                code = str(e["error"].get("code") or code)
                message = str(e["error"].get("message") or "")
        except ValueError:
            pass
        if not message:
            message = f"the server answered {status}"
        return cls(code, message, status, headers)


def _seconds(value: Optional[str]) -> Optional[float]:
    """A ``Retry-After`` of a number of seconds, or None (absent, a date, not a number)."""
    try:
        n = float(value) if value is not None else None
    except ValueError:
        return None
    return n if n is not None and 0 <= n < float("inf") else None


class StreamError(TetherError):
    """A subscription that cannot go on: the server refused it for good, or sent something unreadable."""
