"""The resources and events of Tether's wire protocol (docs/protocol.md §2, §3).

Every type is a frozen dataclass read from the server's JSON with
``from_json``; fields the server leaves out are ``None`` (or empty). Each
keeps the object it was read from in ``raw``, so that fields a newer server
adds are never lost to an older client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Optional, TypeVar, Union

JSON = Any
"""Any JSON value, as ``json.loads`` returns it."""

RunStatus = Literal["pending", "running", "waiting", "done", "error", "cancelled", "aborted"]
ThreadStatus = Literal["idle", "busy", "waiting", "error"]
MessageStatus = Literal["pending", "running", "done", "error", "aborted"]
Role = Literal["user", "assistant", "tool", "system"]

TERMINAL_RUN_STATUSES = frozenset({"done", "error", "cancelled", "aborted"})
"""Run statuses after which nothing more happens to a run."""

TERMINAL_MESSAGE_STATUSES = frozenset({"done", "error", "aborted"})

OFFSET_START = "-1"
"""The cursor before a log's first event: subscribe from it to read the whole log."""

OFFSET_NOW = "now"
"""The cursor of a log's tail: subscribe from it for new events only."""


_T = TypeVar("_T")


def _obj(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _each(v: Any, read: Callable[[Any], _T]) -> tuple[_T, ...]:
    """A JSON list read item by item; empty if ``v`` is not a list."""
    return tuple(read(x) for x in v) if isinstance(v, list) else ()


@dataclass(frozen=True)
class ErrorInfo:
    """Why a run or a tool call failed: a stable ``code`` and a message for people."""

    code: str
    message: str

    @classmethod
    def from_json(cls, v: Any) -> Optional["ErrorInfo"]:
        if not isinstance(v, Mapping):
            return None
        return cls(code=str(v.get("code", "")), message=str(v.get("message", "")))


@dataclass(frozen=True)
class Request:
    """What a waiting run asks for (``run.waiting``): answer it with its ``id``."""

    id: str
    kind: str
    payload: JSON = None

    @classmethod
    def from_json(cls, v: Any) -> Optional["Request"]:
        if not isinstance(v, Mapping):
            return None
        return cls(id=str(v.get("id", "")), kind=str(v.get("kind", "")), payload=v.get("payload"))


@dataclass(frozen=True)
class Thread:
    """A conversation: its status and the offset of its last event."""

    id: str
    status: str
    metadata: dict[str, Any]
    created_at: Optional[str]
    updated_at: Optional[str]
    last_offset: str
    active_run_id: Optional[str]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, v: Any) -> "Thread":
        o = _obj(v)
        return cls(
            id=str(o.get("id", "")),
            status=str(o.get("status", "")),
            metadata=dict(_obj(o.get("metadata"))),
            created_at=o.get("created_at"),
            updated_at=o.get("updated_at"),
            last_offset=str(o.get("last_offset", OFFSET_START)),
            active_run_id=o.get("active_run_id"),
            raw=dict(o),
        )


@dataclass(frozen=True)
class Run:
    """One agent run on a thread."""

    id: str
    thread_id: str
    agent: str
    status: str
    input: dict[str, Any]
    metadata: dict[str, Any]
    attempt: int
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    completed_at: Optional[str] = None
    cancel_requested_at: Optional[str] = None
    worker_id: Optional[str] = None
    error: Optional[ErrorInfo] = None
    request: Optional[Request] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        """Whether the run has ended (done, error, cancelled or aborted)."""
        return self.status in TERMINAL_RUN_STATUSES

    @classmethod
    def from_json(cls, v: Any) -> "Run":
        o = _obj(v)
        return cls(
            id=str(o.get("id", "")),
            thread_id=str(o.get("thread_id", "")),
            agent=str(o.get("agent", "")),
            status=str(o.get("status", "")),
            input=dict(_obj(o.get("input"))),
            metadata=dict(_obj(o.get("metadata"))),
            attempt=int(o.get("attempt") or 0),
            created_at=o.get("created_at"),
            started_at=o.get("started_at"),
            completed_at=o.get("completed_at"),
            cancel_requested_at=o.get("cancel_requested_at"),
            worker_id=o.get("worker_id"),
            error=ErrorInfo.from_json(o.get("error")),
            request=Request.from_json(o.get("request")),
            raw=dict(o),
        )


@dataclass(frozen=True)
class Part:
    """One part of a message: ``text``, ``reasoning``, ``tool`` or ``data``."""

    type: str
    text: str = ""
    call_id: Optional[str] = None
    name: Optional[str] = None
    input: JSON = None
    input_text: str = ""
    output: JSON = None
    error: JSON = None
    status: Optional[str] = None
    data: JSON = None

    @classmethod
    def from_json(cls, v: Any) -> "Part":
        o = _obj(v)
        return cls(
            type=str(o.get("type", "")),
            text=str(o.get("text", "")),
            call_id=o.get("call_id"),
            name=o.get("name"),
            input=o.get("input"),
            input_text=str(o.get("input_text", "")),
            output=o.get("output"),
            error=o.get("error"),
            status=o.get("status"),
            data=o.get("data"),
        )


@dataclass(frozen=True)
class Message:
    """A message of a thread, with its parts."""

    id: str
    thread_id: str
    run_id: str
    role: str
    status: str
    parts: tuple[Part, ...]
    metadata: dict[str, Any]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The message's text parts joined (not its reasoning)."""
        return "".join(p.text for p in self.parts if p.type == "text")

    @classmethod
    def from_json(cls, v: Any) -> "Message":
        o = _obj(v)
        return cls(
            id=str(o.get("id", "")),
            thread_id=str(o.get("thread_id", "")),
            run_id=str(o.get("run_id", "")),
            role=str(o.get("role", "")),
            status=str(o.get("status", "")),
            parts=_each(o.get("parts"), Part.from_json),
            metadata=dict(_obj(o.get("metadata"))),
            raw=dict(o),
        )


@dataclass(frozen=True)
class Snapshot:
    """A thread (or a run's part of it) as of ``offset``: every event up to it, none after."""

    thread: Thread
    runs: tuple[Run, ...]
    messages: tuple[Message, ...]
    offset: str
    reset: bool = False

    def run(self, run_id: str) -> Optional[Run]:
        """The run with this id, if the snapshot holds it."""
        return next((r for r in self.runs if r.id == run_id), None)

    @classmethod
    def from_json(cls, v: Any) -> "Snapshot":
        o = _obj(v)
        return cls(
            thread=Thread.from_json(o.get("thread")),
            runs=_each(o.get("runs"), Run.from_json),
            messages=_each(o.get("messages"), Message.from_json),
            offset=str(o.get("offset", "")),
            reset=bool(o.get("reset", False)),
        )


@dataclass(frozen=True)
class RunSnapshot:
    """A run with its messages, as of the thread offset ``offset`` (``GET /v1/runs/{id}``)."""

    run: Run
    messages: tuple[Message, ...]
    offset: str

    @classmethod
    def from_json(cls, v: Any) -> "RunSnapshot":
        o = _obj(v)
        runs = o.get("runs")
        run = o.get("run") if "run" in o else (runs[0] if isinstance(runs, list) and runs else {})
        return cls(
            run=Run.from_json(run),
            messages=_each(o.get("messages"), Message.from_json),
            offset=str(o.get("offset", "")),
        )


@dataclass(frozen=True)
class FinalAnswer:
    """The text of the latest (or a given) run's last assistant message."""

    content: str
    complete: bool
    run_id: Optional[str]
    message_id: Optional[str]
    status: Optional[str]
    completed_at: Optional[str]
    offset: str

    @classmethod
    def from_json(cls, v: Any) -> "FinalAnswer":
        o = _obj(v)
        return cls(
            content=str(o.get("content", "")),
            complete=bool(o.get("complete", False)),
            run_id=o.get("run_id") or None,
            message_id=o.get("message_id") or None,
            status=o.get("status") or None,
            completed_at=o.get("completed_at"),
            offset=str(o.get("offset", "")),
        )


@dataclass(frozen=True)
class ThreadPage:
    """One page of ``list_threads``; pass ``next_cursor`` for the next (``None`` on the last)."""

    threads: tuple[Thread, ...]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class Agent:
    """An agent name the server accepts runs for (``GET /v1/agents``)."""

    name: str
    in_process: bool
    declared: Optional[str]
    last_claim_at: Optional[str]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: When it was declared through the API (``PUT /v1/agents/{name}``), else None.
    declared_at: Optional[str] = None

    @classmethod
    def from_json(cls, v: Any) -> "Agent":
        o = _obj(v)
        return cls(
            name=str(o.get("name", "")),
            in_process=bool(o.get("in_process", False)),
            declared=o.get("declared") or None,
            last_claim_at=o.get("last_claim_at"),
            raw=dict(o),
            declared_at=o.get("declared_at"),
        )


@dataclass(frozen=True)
class Event:
    """One event of a thread's log (docs/protocol.md §3).

    Only the fields its ``type`` uses are set. ``raw`` is the event's JSON
    as the server sent it.
    """

    type: str
    offset: str = ""
    ts: Optional[str] = None
    run_id: Optional[str] = None
    message_id: Optional[str] = None
    role: Optional[str] = None
    delta: Optional[str] = None
    call_id: Optional[str] = None
    name: Optional[str] = None
    input: JSON = None
    output: JSON = None
    error: JSON = None
    status: Optional[str] = None
    metadata: JSON = None
    data: JSON = None
    request: Optional[Request] = None
    request_id: Optional[str] = None
    value: JSON = None
    worker_id: Optional[str] = None
    attempt: Optional[int] = None
    run: Optional[Run] = None
    message: Optional[Message] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def error_info(self) -> Optional[ErrorInfo]:
        """A ``run.finished`` event's error, as code and message."""
        return ErrorInfo.from_json(self.error)

    @classmethod
    def from_json(cls, v: Any) -> "Event":
        o = _obj(v)
        attempt = o.get("attempt")
        return cls(
            type=str(o.get("type", "")),
            offset=str(o.get("offset", "")),
            ts=o.get("ts"),
            run_id=o.get("run_id"),
            message_id=o.get("message_id"),
            role=o.get("role"),
            delta=o.get("delta"),
            call_id=o.get("call_id"),
            name=o.get("name"),
            input=o.get("input"),
            output=o.get("output"),
            error=o.get("error"),
            status=o.get("status"),
            metadata=o.get("metadata"),
            data=o.get("data"),
            request=Request.from_json(o.get("request")),
            request_id=o.get("request_id"),
            value=o.get("value"),
            worker_id=o.get("worker_id"),
            attempt=int(attempt) if isinstance(attempt, int) else None,
            run=Run.from_json(o["run"]) if isinstance(o.get("run"), Mapping) else None,
            message=Message.from_json(o["message"]) if isinstance(o.get("message"), Mapping) else None,
            raw=dict(o),
        )


Update = Union[Snapshot, Event]
"""What a subscription yields: a snapshot (first, or after a reset) or the next event."""
