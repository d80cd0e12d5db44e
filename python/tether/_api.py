"""The REST calls of the protocol (docs/protocol.md §4), apart from their I/O.

Each function returns a :class:`Call`: what to send, how to read the
answer, and which failures may be retried. ``tether._core`` sends them the
same way for :class:`tether.Client` and :class:`tether.AsyncClient`.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, Optional, Sequence, TypeVar, Union
from urllib.parse import quote

import httpx

from .errors import PROTOCOL, TetherError
from .types import JSON, Agent, FinalAnswer, Run, RunSnapshot, Snapshot, Thread, ThreadPage

MAX_RETRIES = 4
"""How many times a REST call is retried after its first try."""


T = TypeVar("T")

Prompt = Union[str, Sequence[Mapping[str, Any]], None]
"""A run's input: the user's message, or a list of ``{"role", "content"}`` input messages."""


def _none(v: Any) -> None:
    return None


@dataclass
class Call(Generic[T]):
    op: str
    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None
    params: Optional[dict[str, str]] = None
    headers: dict[str, str] = field(default_factory=dict)
    gone_is_done: bool = False
    """A ``not_found`` answer to a retry, after a try the server may have done (a 5xx, a dropped
    connection), is the call's success: a delete done by that try finds nothing the second time."""

    def read(self, r: httpx.Response) -> T:
        """The result of a 2xx answer: its JSON, typed (``parse(None)`` for a call that expects no body).

        A body that is not JSON (a proxy's page, nothing where a resource was expected) is a
        :class:`TetherError` with the clients' code ``protocol``; its message never carries the
        body. (A body cut short by a dropped connection is httpx's transport error, retried.)
        """
        if r.status_code == 204 or self.parse is _none:
            return self.parse(None)
        try:
            v = json.loads(r.content)
        except ValueError as e:  # JSONDecodeError, and UnicodeDecodeError for bytes that are not UTF-8
            raise TetherError(PROTOCOL, f"{self.op}: the server answered {r.status_code} with a body that is not JSON", r.status_code, r.headers) from e
        return self.parse(v)


def seg(s: str) -> str:
    """One escaped path segment."""
    return quote(s, safe="")


def retryable(status: int) -> bool:
    """An answer that a repeat may change: 5xx, 408, 429.

    Every call is made safe to repeat (an id or an ``Idempotency-Key`` chosen here, or a request
    the server knows again), so a failure that may hide a write that landed (a 503 of a write that
    timed out, a dropped connection) is retried like any other.
    """
    return status >= 500 or status in (408, 429)


def may_have_acted(exc: BaseException) -> bool:
    """Whether the server may have done a request that failed so: anything but a connection
    never made and a 429 (answered before anything is done)."""
    if isinstance(exc, httpx.ConnectError):
        return False
    return not (isinstance(exc, TetherError) and exc.status == 429)


_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase


def new_id(prefix: str) -> str:
    """A new id as the server makes them: ``prefix``, then 48 bits of milliseconds and 80 random
    bits in 26 lowercase base32 digits, so that ids sort by creation time."""
    v = (int(time.time() * 1000) & (1 << 48) - 1) << 80 | secrets.randbits(80)
    return prefix + "".join(_ID_ALPHABET[(v >> 5 * i) & 31] for i in range(25, -1, -1))


def retry_after(headers: Mapping[str, str]) -> float:
    try:
        return max(0.0, float(headers.get("retry-after", "")))
    except ValueError:
        return 0.0


def encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def user_input(prompt: Prompt) -> dict[str, Any]:
    """A run's input from a prompt (one user message) or a list of ``{role, content}`` messages."""
    if prompt is None:
        return {"messages": []}
    if isinstance(prompt, str):
        return {"messages": [{"role": "user", "content": prompt}]}
    return {"messages": [dict(m) for m in prompt]}


def create_thread(id: Optional[str], metadata: Optional[Mapping[str, Any]]) -> Call[Thread]:
    # The client names a new thread, so that a retry (after a failure that may hide the creation)
    # is a create-if-absent: it returns the thread the first try made, never a second one.
    body: dict[str, Any] = {"id": id or new_id("thr_")}
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return Call("create thread", "POST", "/v1/threads", Thread.from_json, body=body)


def list_threads(status: Optional[str], limit: Optional[int], cursor: Optional[str]) -> Call[ThreadPage]:
    params = {k: str(v) for k, v in (("status", status), ("limit", limit), ("cursor", cursor)) if v is not None}

    def parse(v: Any) -> ThreadPage:
        ts = v.get("threads") if isinstance(v, dict) else None
        return ThreadPage(tuple(Thread.from_json(t) for t in ts or ()), (v or {}).get("next_cursor") or None)

    return Call("list threads", "GET", "/v1/threads", parse, params=params)


def snapshot(thread_id: str) -> Call[Snapshot]:
    return Call("get thread", "GET", "/v1/threads/" + seg(thread_id), Snapshot.from_json)


def delete_thread(thread_id: str) -> Call[None]:
    return Call("delete thread", "DELETE", "/v1/threads/" + seg(thread_id), _none, gone_is_done=True)


def create_run(
    thread_id: str,
    prompt: Prompt,
    agent: Optional[str],
    metadata: Optional[Mapping[str, Any]],
    multitask: Optional[str],
    idempotency_key: Optional[str],
) -> Call[Run]:
    body: dict[str, Any] = {"input": user_input(prompt)}
    if agent:
        body["agent"] = agent
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if multitask:
        body["multitask"] = multitask
    # One key per call covers the client's own retries: a retry never starts a second run.
    key = idempotency_key or "idem_" + uuid.uuid4().hex
    return Call("create run", "POST", "/v1/threads/" + seg(thread_id) + "/runs", Run.from_json, body=body, headers={"Idempotency-Key": key})


def get_run(run_id: str) -> Call[RunSnapshot]:
    return Call("get run", "GET", "/v1/runs/" + seg(run_id), RunSnapshot.from_json)


def cancel(run_id: str) -> Call[Run]:
    return Call("cancel run", "POST", "/v1/runs/" + seg(run_id) + "/cancel", Run.from_json, body={})


def submit_input(run_id: str, request_id: str, value: JSON) -> Call[Run]:
    # The server knows a repeat of the answer it took (the same request id and value) for that
    # answer, and a run never asks again under an answered id: a retry never answers twice.
    return Call("submit input", "POST", "/v1/runs/" + seg(run_id) + "/input", Run.from_json, body={"request_id": request_id, "value": value})


def final_answer(thread_id: str, run_id: Optional[str]) -> Call[FinalAnswer]:
    params = {"run_id": run_id} if run_id else None
    return Call("final answer", "GET", "/v1/threads/" + seg(thread_id) + "/final-answer", FinalAnswer.from_json, params=params)


def list_agents() -> Call[list[Agent]]:
    def parse(v: Any) -> list[Agent]:
        return [Agent.from_json(a) for a in (v or {}).get("agents") or ()]

    return Call("list agents", "GET", "/v1/agents", parse)


def declare_agent(name: str) -> Call[Agent]:
    return Call("declare agent", "PUT", "/v1/agents/" + seg(name), Agent.from_json, body={})


def forget_agent(name: str) -> Call[None]:
    return Call("remove agent", "DELETE", "/v1/agents/" + seg(name), _none, gone_is_done=True)
