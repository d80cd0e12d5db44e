"""Helpers of the tests: reading a thread's whole log as the server has it."""

from __future__ import annotations

import time
from typing import Any, Callable

import httpx


def log_events(url: str, thread_id: str) -> list[dict[str, Any]]:
    """Every event of a thread's log (JSON catch-up, page after page)."""
    out: list[dict[str, Any]] = []
    after = "-1"
    while True:
        r = httpx.get(f"{url}/v1/threads/{thread_id}/events", params={"after": after}, headers={"Accept": "application/json"}, timeout=30)
        r.raise_for_status()
        v = r.json()
        out.extend(v["events"])
        after = v["next_offset"]
        if v["up_to_date"]:
            return out


def wait_for(cond: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def requests_in_log(server_log: str, method: str, path: str) -> int:
    """How many requests the server logged for a method and path."""
    return sum(1 for line in server_log.splitlines() if f"method={method} path={path} " in line)
