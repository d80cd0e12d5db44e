"""The state of a subscription, apart from its I/O.

A subscription (``tether._core``) connects with :meth:`Follower.request`,
hands every frame to :meth:`Follower.frame`, and after the connection ends
asks :meth:`Follower.needs_end_check` whether the server must be asked if
the run or message ended. So it resumes from the last offset it yielded
(``Last-Event-ID``), skipping anything at or before it, and ends a run or
message subscription at its end.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union
from urllib.parse import quote, urlencode

from .errors import INTERNAL, NOT_FOUND, PROTOCOL, StreamError
from .types import OFFSET_NOW, OFFSET_START, Event, Snapshot, Update

DEFAULT_HEARTBEAT = 15.0
"""The server's ping interval until its ``connected`` frame says otherwise."""

STALL_FACTOR = 3
"""A stream silent for this many heartbeats is dead."""

StateCallback = Callable[[str, str], None]
"""Called with a subscription's new state (``connecting``, ``open``, ``reconnecting``, ``closed``) and its cursor."""


def backoff(attempt: int, lo: float, hi: float) -> float:
    """The delay before retry ``attempt`` (from 0): uniform in [0, min(hi, lo·2^attempt)) ("full jitter")."""
    return random.uniform(0, min(hi, lo * (2 ** min(attempt, 32))))


def is_event_offset(o: str) -> bool:
    return bool(o) and o not in (OFFSET_START, OFFSET_NOW)


@dataclass
class Outcome:
    """How one connection ended."""

    error: Optional[BaseException] = None
    fatal: bool = False  # retrying cannot help: raise error
    stop: bool = False  # the subscription is complete (or the consumer left)
    now: bool = False  # the server asked to reconnect at once
    token_expired: bool = False  # ...because the token expired: the next connection needs a new one
    token: Optional[str] = None  # the token the connection was made with
    answer: Optional[Any] = None  # an answer other than 200 (an httpx.Response): its Retry-After bounds the wait
    connected: bool = False
    yielded: int = 0


class Follower:
    """What a subscription knows between connections."""

    def __init__(
        self,
        thread_id: Optional[str],
        run_id: Optional[str],
        message_id: Optional[str],
        types: Optional[list[str]],
        after: Optional[str],
        on_state: Optional[StateCallback] = None,
    ) -> None:
        if not thread_id and not run_id:
            raise ValueError("subscribe needs a thread_id or a run_id")
        self.thread_id = thread_id
        self.run_id = run_id
        self.message_id = message_id
        self.types = types
        self.after = after
        self.cursor = ""  # the offset of the last event or snapshot yielded
        self.msg_run = run_id if message_id and run_id else ""
        self.done = False
        self.heartbeat = DEFAULT_HEARTBEAT
        self.state = ""
        self._on_state = on_state

    # -- requests

    @property
    def path(self) -> str:
        if self.run_id:
            return "/v1/runs/" + quote(self.run_id, safe="") + "/events"
        return "/v1/threads/" + quote(self.thread_id or "", safe="") + "/events"

    def request(self) -> tuple[str, dict[str, str]]:
        """The path (with query) and headers of the next connection."""
        q: dict[str, str] = {}
        if self.message_id:
            q["message_id"] = self.message_id
        if self.types:
            q["types"] = ",".join(self.types)
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if is_event_offset(self.cursor):
            headers["Last-Event-ID"] = self.cursor
        elif self.cursor == OFFSET_START:
            q["after"] = OFFSET_START  # a snapshot of an empty log: every event is after it
        elif self.after:
            q["after"] = self.after
        path = self.path + ("?" + urlencode(q) if q else "")
        return path, headers

    @property
    def read_timeout(self) -> float:
        return STALL_FACTOR * self.heartbeat

    def set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            if self._on_state:
                self._on_state(state, self.cursor)

    # -- frames

    def frame(self, event: str, data: str, id: Optional[str], has_data: bool, o: Outcome) -> Optional[Update]:
        """Handles one frame; returns what to yield, if anything. Sets ``o.stop``/``o.now``/errors."""
        if not o.connected and event not in ("connected", "ping"):
            self.set_state("open")
        if event == "connected":
            try:
                c = json.loads(data)
            except ValueError:
                c = {}
            hb = c.get("heartbeat_ms") if isinstance(c, dict) else None
            if isinstance(hb, (int, float)) and hb > 0:
                self.heartbeat = hb / 1000
            off = c.get("offset") if isinstance(c, dict) else None
            if self.after == OFFSET_NOW and not self.cursor and isinstance(off, str) and off and off != OFFSET_NOW:
                self.cursor = off  # "now" again on a reconnect would skip what came meanwhile
            o.connected = True
            self.set_state("open")
            return None
        if event == "ping":
            return None
        if event == "reconnect":
            o.now = True
            try:
                o.token_expired = json.loads(data).get("reason") == "token_expired"
            except (ValueError, AttributeError):
                pass
            return None
        if event == "end":
            try:
                body = json.loads(data)
                reason = body.get("reason")
            except (ValueError, AttributeError):
                body, reason = {}, None
            if reason == "error":
                # The stream could not start (an unknown thread, run or
                # message): sent in-band, as the server starts every
                # stream before it reads the store.
                err = body.get("error") if isinstance(body.get("error"), dict) else {}
                code = str(err.get("code") or INTERNAL)
                o.error, o.fatal = StreamError(code, str(err.get("message") or "the stream could not start"), 200), True
                return None
            if reason == "thread_deleted":
                o.error, o.fatal = StreamError(NOT_FOUND, "the thread was deleted"), True
                return None
            self.done = True
            o.stop = True
            return None
        if event == "snapshot":
            if not has_data:
                return None
            try:
                snap = Snapshot.from_json(json.loads(data))
            except ValueError:
                o.error, o.fatal = StreamError(PROTOCOL, "the snapshot is not valid JSON"), True
                return None
            if not snap.offset and id:
                snap = Snapshot(snap.thread, snap.runs, snap.messages, id, snap.reset)
            # A reset snapshot replaces the consumer's state, so the cursor
            # follows it, also backwards; another never moves it back.
            if snap.reset or not is_event_offset(self.cursor) or snap.offset > self.cursor:
                self.cursor = snap.offset
            self._note_snapshot(snap)
            o.yielded += 1
            return snap
        if not has_data or id is None:
            return None  # a control frame this client does not know
        try:
            raw = json.loads(data)
        except ValueError:
            o.error, o.fatal = StreamError(PROTOCOL, f"event {id[:64]!r} is not valid JSON"), True
            return None
        if not isinstance(raw, dict):
            o.error, o.fatal = StreamError(PROTOCOL, f"event {id[:64]!r} is not a JSON object"), True
            return None
        raw.setdefault("offset", id)
        raw.setdefault("type", event)
        ev = Event.from_json(raw)
        if ev.offset and is_event_offset(self.cursor) and ev.offset <= self.cursor:
            return None  # at or before the last one yielded: seen
        if ev.offset:
            self.cursor = ev.offset
        self._note_event(ev)
        o.yielded += 1
        return ev

    def _note_event(self, ev: Event) -> None:
        if self.message_id:
            if ev.message_id == self.message_id and ev.run_id:
                self.msg_run = ev.run_id
            if ev.type == "message.finished":
                self.done = ev.message_id == self.message_id
            elif ev.type == "message.created":
                m = ev.message
                self.done = m is not None and m.id == self.message_id and m.status in ("done", "error", "aborted")
            elif ev.type == "run.finished":
                self.done = not self.msg_run or not ev.run_id or ev.run_id == self.msg_run
        elif self.run_id:
            self.done = ev.type == "run.finished" and (not ev.run_id or ev.run_id == self.run_id)

    def _note_snapshot(self, snap: Snapshot) -> None:
        if self.message_id:
            for m in snap.messages:
                if m.id == self.message_id:
                    self.msg_run = m.run_id
                    self.done = m.status in ("done", "error", "aborted")
            r = snap.run(self.msg_run) if self.msg_run else None
            self.done = self.done or bool(r and r.terminal)
        elif self.run_id:
            r = snap.run(self.run_id)
            self.done = bool(r and r.terminal)

    def needs_end_check(self, o: Outcome) -> bool:
        """A run or message stream that closed right after ``connected``: the server does that when
        it had ended before the cursor. The caller then asks the server (:meth:`note_ended`)."""
        return o.error is None and o.connected and o.yielded == 0 and bool(self.run_id or self.message_id)

    def note_ended(self, snap: Union[Snapshot, None]) -> None:
        if snap is not None:
            self._note_snapshot(snap)
