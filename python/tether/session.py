"""A claimed run as its agent sees it: :class:`Session`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from .types import JSON, Message, Run

if TYPE_CHECKING:
    from ._lease import RunTransport

_UNSET: Any = object()
_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")  # docs/protocol.md §1


@dataclass(frozen=True)
class Reasoning:
    """Yield it from an agent generator to stream reasoning instead of text."""

    delta: str


class Finished(Exception):
    """The session already sent ``run.finished``: nothing more can be appended."""


class Session:
    """One run given to an agent, and the means to answer it.

    Emitting does not wait for the server: events go into the next append,
    and events emitted while an append is in flight are sent together in
    the one after it, so an agent that streams a token at a time does not
    make a request per token. :meth:`flush` waits until everything emitted
    is committed; :meth:`ask` and :meth:`finish` flush. An append the
    server refused raises :class:`tether.TetherError` from the next call.

    When a client cancels the run, or the worker loses it, the agent's
    task is cancelled (``asyncio.CancelledError`` at its next ``await``);
    the worker then ends the run ``cancelled`` (or leaves it to the server).
    """

    def __init__(self, run: Run, messages: tuple[Message, ...], transport: "RunTransport") -> None:
        self.run = run
        """The run, as of when it was claimed."""
        self.messages = messages
        """The thread's conversation as of the claim, the run's input included."""
        self._t = transport
        self._seq = 0
        self._finished = False
        self._message: Optional[str] = None  # the open assistant message text goes to
        self._calls: set[str] = set()  # the call ids the run's tool calls took
        # The first half of a character (a UTF-16 high surrogate) that ended a delta, by stream
        # (event type, message id, call id): a model's stream that cut a character's JSON escape
        # ("\ud83d", "\ude00") across two chunks gives its halves in two deltas, and each alone
        # has no UTF-8 form (the server would read two U+FFFD). It waits for its stream's next
        # delta, which starts with the other half; if its stream ends first, it goes alone.
        self._halves: dict[tuple[str, str, str], str] = {}

    # -- state

    @property
    def prompt(self) -> str:
        """The text of the last user message of the conversation."""
        for m in reversed(self.messages):
            if m.role == "user":
                return m.text
        return ""

    @property
    def finished(self) -> bool:
        """Whether the session has sent ``run.finished``."""
        return self._finished

    @property
    def cancel_requested(self) -> bool:
        """Whether a client asked to cancel the run (as far as the worker knows)."""
        return self._t.cancel_requested

    def new_id(self, kind: str = "m") -> str:
        """A new id unique within the run, also across attempts (a reclaimed run's earlier messages stay)."""
        self._seq += 1
        prefix = f"{self.run.id}-a{self.run.attempt}-" if self.run.attempt > 1 else f"{self.run.id}-"
        return f"{prefix}{kind}{self._seq}"

    def call_id(self, suggested: Optional[str] = None) -> str:
        """An id for a tool call starting now: ``suggested`` (the model's or the framework's own id)
        when it is a valid Tether id (docs/protocol.md §1) no other call of the run took, else a new one.

        Models' ids are not always either: some are ``functions.add:0``, the same in every turn.
        """
        if suggested and _ID.fullmatch(suggested) and suggested not in (".", "..") and suggested not in self._calls:
            return suggested
        cid = self.new_id("call")
        while cid in self._calls:
            cid = self.new_id("call")
        return cid

    # -- emitting

    async def emit(self, *events: dict[str, Any]) -> None:
        """Appends raw events (docs/protocol.md §3) to the run, in order, atomically with each other.

        It returns once they are queued; see the class's documentation. An event that is not
        JSON (an object JSON has no form for, NaN) raises ``TypeError`` or ``ValueError`` here, and
        none of the call's events is sent.
        """
        if self._finished:
            raise Finished("the run is finished")
        self._t.put(self._ended_halves(events) + list(events))  # raises with nothing queued
        if any(ev.get("type") == "run.finished" for ev in events):
            self._finished = True
        await self._t.room()

    async def flush(self) -> None:
        """Waits until every event emitted so far is committed; raises the error of a refused append,
        and ``lease_lost`` once the worker lost the run with events of it still unsent (always, after)."""
        if self._halves and not self._finished:
            self._t.put(self._ended_halves([{"type": "run.finished"}]))
        await self._t.flush()

    def _delta(self, type: str, message_id: str, delta: str, call_id: Optional[str] = None) -> Optional[dict[str, Any]]:
        """A delta event of a stream, with the half character its last delta ended with in front,
        and without a half character at its own end (held for the next); ``None`` if nothing is left."""
        key = (type, message_id, call_id or "")
        delta = self._halves.pop(key, "") + delta
        if delta and "\ud800" <= delta[-1] <= "\udbff":
            self._halves[key] = delta[-1]
            delta = delta[:-1]
        if not delta:
            return None
        ev: dict[str, Any] = {"type": type, "message_id": message_id, "delta": delta}
        if call_id is not None:
            ev["call_id"] = call_id
        return ev

    def _ended_halves(self, events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The held halves of the streams that ``events`` end (a message's, a tool call's, the run's),
        as deltas of their own to go before them: the server reads each as U+FFFD."""
        out: list[dict[str, Any]] = []
        for ev in events if self._halves else ():
            t = ev.get("type")
            for key in list(self._halves):
                typ, mid, cid = key
                if t == "run.finished" or (t == "message.finished" and ev.get("message_id") == mid) or (t == "tool.finished" and cid and ev.get("call_id") == cid):
                    d: dict[str, Any] = {"type": typ, "message_id": mid, "delta": self._halves.pop(key)}
                    if cid:
                        d["call_id"] = cid
                    out.append(d)
        return out

    async def start_message(self, role: str = "assistant", *, metadata: Optional[dict[str, Any]] = None) -> str:
        """Starts a message and returns its id; text and reasoning without an id go to it."""
        mid = self.new_id("m")
        ev: dict[str, Any] = {"type": "message.started", "message_id": mid, "role": role}
        if metadata is not None:
            ev["metadata"] = metadata
        await self.emit(ev)
        if role == "assistant":
            self._message = mid
        return mid

    async def _msg(self, message_id: Optional[str]) -> str:
        if message_id:
            return message_id
        if self._message is None:
            await self.start_message()
        assert self._message is not None
        return self._message

    async def text(self, delta: str, *, message_id: Optional[str] = None) -> None:
        """Streams answer text (into the open assistant message, started if there is none)."""
        if delta and (ev := self._delta("text.delta", await self._msg(message_id), delta)):
            await self.emit(ev)

    async def reasoning(self, delta: str, *, message_id: Optional[str] = None) -> None:
        """Streams reasoning (shown apart from the answer)."""
        if delta and (ev := self._delta("reasoning.delta", await self._msg(message_id), delta)):
            await self.emit(ev)

    async def tool_started(self, call_id: str, name: str, *, message_id: Optional[str] = None) -> None:
        """Starts a tool call; stream its input with :meth:`tool_delta`."""
        self._calls.add(call_id)
        await self.emit({"type": "tool.started", "message_id": await self._msg(message_id), "call_id": call_id, "name": name})

    async def tool_delta(self, call_id: str, delta: str, *, message_id: Optional[str] = None) -> None:
        """Streams part of a tool call's input (its arguments' JSON text)."""
        if delta and (ev := self._delta("tool.delta", await self._msg(message_id), delta, call_id)):
            await self.emit(ev)

    async def tool_finished(
        self, call_id: str, *, input: JSON = _UNSET, output: JSON = _UNSET, error: JSON = _UNSET, message_id: Optional[str] = None
    ) -> None:
        """Ends a tool call with its output, or its error (then it ends ``error``).

        Left out, ``input`` is the streamed input; ``None`` is a JSON null.
        """
        ev: dict[str, Any] = {"type": "tool.finished", "message_id": await self._msg(message_id), "call_id": call_id}
        if input is not _UNSET:
            ev["input"] = input
        if output is not _UNSET:
            ev["output"] = output
        if error is not _UNSET and error is not None:
            ev["error"] = error
        await self.emit(ev)

    async def tool_call(self, name: str, input: JSON, output: JSON = None, *, error: JSON = None, call_id: Optional[str] = None) -> str:
        """A whole tool call at once: started, its input, and its output (or error). Returns its call id."""
        cid = call_id or self.new_id("call")
        await self.tool_started(cid, name)
        await self.tool_delta(cid, json.dumps(input, separators=(",", ":")))
        if error is not None:
            await self.tool_finished(cid, input=input, error=error)
        else:
            await self.tool_finished(cid, input=input, output=output)
        return cid

    async def update_message(self, metadata: dict[str, Any], *, message_id: Optional[str] = None) -> None:
        """Merges metadata into a message's (a JSON merge patch)."""
        await self.emit({"type": "message.updated", "message_id": await self._msg(message_id), "metadata": metadata})

    async def finish_message(self, status: str = "done", *, message_id: Optional[str] = None) -> None:
        """Ends a message (``done``, ``error`` or ``aborted``); the next text starts a new one."""
        mid = message_id or self._message
        if mid is None:
            return
        await self.emit({"type": "message.finished", "message_id": mid, "status": status})
        if mid == self._message:
            self._message = None

    async def custom(self, name: str, data: JSON = _UNSET) -> None:
        """Sends an application event to clients (``custom``)."""
        ev: dict[str, Any] = {"type": "custom", "name": name}
        if data is not _UNSET:
            ev["data"] = data
        await self.emit(ev)

    async def ask(self, payload: JSON = None, *, kind: str = "input") -> JSON:
        """Asks for input (``run.waiting``) and returns the value a client answers with (``run.input``).

        The run is ``waiting`` meanwhile; the worker heartbeats its lease.
        ``payload`` is shown to people: ``{"prompt": "Which tone?"}`` is what
        the page and ``tether run`` show as the question.
        """
        req: dict[str, Any] = {"id": self.new_id("r"), "kind": kind}
        if payload is not None:
            req["payload"] = payload
        await self.emit({"type": "run.waiting", "request": req})
        await self.flush()
        return await self._t.wait_input(req["id"])

    async def finish(self, status: str = "done", *, error: Optional[dict[str, str]] = None) -> None:
        """Ends the run: ``done``, ``error`` (with ``{"code", "message"}``, shown to clients) or ``cancelled``.

        The events emitted before are committed first, and ``run.finished``
        goes alone, so a refusal of it (a cancel came: only ``cancelled`` is
        accepted then) loses nothing else.
        """
        await self.flush()
        ev: dict[str, Any] = {"type": "run.finished", "status": status}
        if error is not None:
            ev["error"] = error
        await self.emit(ev)
        try:
            await self.flush()
        except Exception:
            self._finished = False  # refused, so certainly not in the log: the run is still open
            raise
