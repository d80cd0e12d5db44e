"""The REST calls of the protocol (docs/protocol.md §4), apart from their I/O.

Each function returns a :class:`Call`: what to send, how to read the
answer, and which failures may be retried. ``tether._core`` sends them the
same way for :class:`tether.Client` and :class:`tether.AsyncClient`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Mapping, Optional, Sequence, TypeVar, Union
from urllib.parse import quote

import httpx

from .errors import PROTOCOL, TetherError
from .types import JSON, Agent, FinalAnswer, Run, RunSnapshot, Snapshot, Thread, ThreadPage

SAFE = "safe"
"""The request may be repeated without harm: transport errors, 5xx and 429 are retried."""
UNSENT = "unsent"
"""A repeat could act twice: only failures where the server did not act are retried (503, 429, no connection)."""

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
    retry: str = SAFE

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


def retryable(status: int, mode: str) -> bool:
    if status in (503, 429):
        return True
    return mode == SAFE and (status >= 500 or status == 408)


def retryable_transport(exc: BaseException, mode: str) -> bool:
    """A transport error: retried if the request is safe to repeat, or certainly never left."""
    return mode == SAFE or isinstance(exc, httpx.ConnectError)


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
    body: dict[str, Any] = {}
    if id is not None:
        body["id"] = id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    # Without an id a repeat would make a second thread: retry only what never reached the server.
    return Call("create thread", "POST", "/v1/threads", Thread.from_json, body=body, retry=SAFE if id else UNSENT)


def list_threads(status: Optional[str], limit: Optional[int], cursor: Optional[str]) -> Call[ThreadPage]:
    params = {k: str(v) for k, v in (("status", status), ("limit", limit), ("cursor", cursor)) if v is not None}

    def parse(v: Any) -> ThreadPage:
        ts = v.get("threads") if isinstance(v, dict) else None
        return ThreadPage(tuple(Thread.from_json(t) for t in ts or ()), (v or {}).get("next_cursor") or None)

    return Call("list threads", "GET", "/v1/threads", parse, params=params)


def snapshot(thread_id: str) -> Call[Snapshot]:
    return Call("get thread", "GET", "/v1/threads/" + seg(thread_id), Snapshot.from_json)


def delete_thread(thread_id: str) -> Call[None]:
    return Call("delete thread", "DELETE", "/v1/threads/" + seg(thread_id), _none)


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
    # A second answer would be refused: retry only what the server cannot have taken.
    return Call("submit input", "POST", "/v1/runs/" + seg(run_id) + "/input", Run.from_json, body={"request_id": request_id, "value": value}, retry=UNSENT)


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
    return Call("remove agent", "DELETE", "/v1/agents/" + seg(name), _none)
