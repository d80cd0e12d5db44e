"""What :class:`tether.Client` and :class:`tether.AsyncClient` do, apart from their I/O.

Every operation of a client is a plan: a generator that yields the I/O it
needs as steps (the token, an HTTP request, the next bytes of a stream, a
pause, an update for the consumer), is sent each step's answer, and is
thrown its error. The plans hold the protocol: a request's path, headers,
idempotency key and body (``tether._api``), the token and its one refresh
after ``token_expired``, an answer read into a typed result or a
:class:`TetherError` with its stable code, the retries and their backoff,
and a subscription's resumption from its offset (``tether._follow``).

A client only does the steps, with blocking calls or with ``await``; so the
two speak the protocol the same way, from one copy of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Generator, Generic, Iterator, Mapping, Optional, Sequence, Union, cast

import httpx

from . import _api
from ._api import Call, T
from ._follow import Follower, Outcome, StateCallback, backoff
from ._sse import FrameTooLarge, SSEParser
from ._token import TokenKeeper, TokenSource, auth_header, is_token_expired
from .errors import CONFLICT, NOT_FOUND, PROTOCOL, TOO_LARGE, StreamError, TetherError
from .types import JSON, Event, Run, RunSnapshot, Snapshot, Thread


# -- steps: the I/O a plan asks of its client


@dataclass(frozen=True)
class GetToken:
    """Answered with the token to send now (``None`` for none); a callable's is awaited by the asyncio client."""


@dataclass(frozen=True)
class Send:
    """One HTTP request, answered with its ``httpx.Response``.

    A ``stream`` request's answer is left open with its body unread, for
    :class:`ReadChunk`, :class:`ReadBody` and :class:`CloseStream`; a plan
    has at most one open at a time.
    """

    method: str
    url: str
    headers: Mapping[str, str]
    content: Optional[bytes] = None
    params: Optional[Mapping[str, str]] = None
    timeout: Union[float, httpx.Timeout, None] = None
    stream: bool = False

    def with_token(self, token: Optional[str]) -> "Send":
        return replace(self, headers={**auth_header(token), **self.headers})

    def build(self, http: Union[httpx.Client, httpx.AsyncClient]) -> httpx.Request:
        return http.build_request(self.method, self.url, headers=self.headers, content=self.content, params=self.params, timeout=self.timeout)


@dataclass(frozen=True)
class ReadChunk:
    """Answered with the next bytes of the open stream, or ``None`` at its end."""


@dataclass(frozen=True)
class ReadBody:
    """Answered with the rest of the open stream's body; the stream is closed after it."""


@dataclass(frozen=True)
class CloseStream:
    """Closes the open stream, if there is one."""


@dataclass(frozen=True)
class Sleep:
    """Waits ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Emit:
    """Hands ``value`` (an update, a thread) to the consumer of a stream."""

    value: Any


Step = Union[GetToken, Send, ReadChunk, ReadBody, CloseStream, Sleep, Emit]
Plan = Generator[Step, Any, T]
"""A client operation: yields steps, is sent their answers (or thrown their errors), returns its result."""


class Stepper(Generic[T]):
    """Walks a plan for a client.

    Iterating gives the plan's steps; before asking for the next, the client
    sets :attr:`reply` to the step's answer or :attr:`error` to its failure,
    which the plan decides about (a failure it does not catch comes out of
    the iteration). Once the steps end, :attr:`result` is the plan's result.
    """

    def __init__(self, plan: Plan[T]) -> None:
        self._plan = plan
        self.reply: Any = None
        self.error: Optional[Exception] = None
        self._result: Optional[T] = None
        self._done = False

    def __iter__(self) -> Iterator[Step]:
        while True:
            reply, error = self.reply, self.error
            self.reply, self.error = None, None
            try:
                step = self._plan.send(reply) if error is None else self._plan.throw(error)
            except StopIteration as end:
                self._result, self._done = end.value, True
                return
            yield step

    @property
    def result(self) -> T:
        assert self._done, "the plan has not ended"
        return cast(T, self._result)

    def close(self) -> None:
        """Ends the plan where it is (its ``finally`` blocks run): the consumer left."""
        self._plan.close()


def stream_timeout(read: float) -> httpx.Timeout:
    return httpx.Timeout(connect=10.0, read=read, write=10.0, pool=10.0)


def run_as_snapshot(rs: RunSnapshot) -> Snapshot:
    """A run's answer (``GET /v1/runs/{id}``) as the snapshot of its part of the thread."""
    return Snapshot(Thread.from_json({"id": rs.run.thread_id}), (rs.run,), rs.messages, rs.offset)


class ClientCore:
    """A client's configuration and its plans; a subclass holds the httpx client and does the steps."""

    def __init__(self, base_url: str, token: TokenSource, timeout: float, min_backoff: float, max_backoff: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = TokenKeeper(token)
        self._timeout = timeout
        self._min, self._max = min_backoff, max(max_backoff, min_backoff)

    # -- delays

    def _backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (from 0): exponential from min_backoff to max_backoff, full jitter."""
        return backoff(attempt, self._min, self._max)

    def _retry_delay(self, attempt: int, answer: Optional[httpx.Response]) -> float:
        """The backoff, or the answer's ``Retry-After`` if longer (up to max_backoff)."""
        wait = _api.retry_after(answer.headers) if answer is not None else 0.0
        return max(self._backoff(attempt), min(wait, self._max))

    # -- requests

    def _request(
        self, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str], params: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None
    ) -> Send:
        """A request to the server that sends and takes JSON (the token is added by :meth:`_send`)."""
        h = {"Accept": "application/json", **headers}
        if body is not None:
            h["Content-Type"] = "application/json"
        return Send(method, self.base_url + path, h, body, params, self._timeout if timeout is None else timeout)

    def _send(self, req: Send) -> Plan[tuple[httpx.Response, Optional[str]]]:
        """Sends ``req`` with the token; a 401 ``token_expired`` is sent once more with a new one.

        Returns the answer and the token it was sent with. A stream's answer
        other than 200 is read whole (it is an error), so its ``content`` is there.
        """
        for again in (False, True):
            token: Optional[str] = yield GetToken()
            r: httpx.Response = yield req.with_token(token)
            if req.stream and r.status_code != 200:
                yield ReadBody()
            if r.status_code == 401 and not again and self._auth.refreshable and is_token_expired(r.status_code, r.content):
                self._auth.expired(token)
                continue
            return r, token
        raise AssertionError("unreachable")

    def _rest(self, c: Call[T]) -> Plan[T]:
        """A REST call: sent, retried with backoff where its ``retry`` allows, its answer read."""
        req = self._request(c.method, c.path, _api.encode(c.body) if c.body is not None else None, c.headers, c.params)
        acted = False  # an earlier try may have been done by the server
        for attempt in range(_api.MAX_RETRIES + 1):
            answer: Optional[httpx.Response] = None
            try:
                r, _ = yield from self._send(req)
            except httpx.TransportError as e:
                if attempt == _api.MAX_RETRIES:
                    raise
                acted = acted or _api.may_have_acted(e)
            else:
                if r.status_code // 100 == 2:
                    return c.read(r)
                err = TetherError.from_response(r.status_code, r.content, r.headers)
                if acted and c.gone_is_done and err.code == NOT_FOUND:
                    return c.parse(None)
                if attempt == _api.MAX_RETRIES or not _api.retryable(r.status_code):
                    raise err
                acted = acted or _api.may_have_acted(err)
                answer = r
            yield Sleep(self._retry_delay(attempt, answer))
        raise AssertionError("unreachable")

    # -- calls made of more than one request

    def _threads(self, status: Optional[str]) -> Plan[None]:
        """Emits every thread (or every one with ``status``), page after page."""
        cursor: Optional[str] = None
        while True:
            page = yield from self._rest(_api.list_threads(status, 100, cursor))
            for t in page.threads:
                yield Emit(t)
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def _submit_input(self, run_id: str, value: JSON, request_id: Optional[str]) -> Plan[Run]:
        """Answers the run's request ``request_id``, or without one the request the run has open."""
        if request_id is None:
            run = (yield from self._rest(_api.get_run(run_id))).run
            if run.request is None:
                raise TetherError(CONFLICT, f"run {run_id} is {run.status}, not waiting for input")
            request_id = run.request.id
        return (yield from self._rest(_api.submit_input(run_id, request_id, value)))

    # -- subscriptions

    def _subscribe(
        self,
        thread_id: Optional[str],
        run_id: Optional[str],
        message_id: Optional[str],
        types: Optional[Sequence[str]],
        after: Optional[str],
        on_state: Optional[StateCallback],
        events_only: bool = False,
    ) -> Plan[None]:
        """Emits a subscription's updates (only its events if ``events_only``), connecting again after
        any drop from its cursor, until it ends or raises (see :meth:`tether.Client.subscribe`)."""
        f = Follower(thread_id, run_id, message_id, list(types) if types else None, after, on_state)
        f.set_state("connecting")
        attempt = asked = 0
        try:
            while True:
                o = Outcome()
                yield from self._connect(f, o, events_only)
                yield CloseStream()
                if o.token_expired:
                    self._auth.expired(o.token)
                if o.stop:
                    return
                if o.fatal:
                    assert o.error is not None
                    raise o.error
                if o.connected:
                    attempt = 0
                if f.needs_end_check(o):
                    try:
                        f.note_ended((yield from self._end_check(f)))
                    except (TetherError, httpx.TransportError):
                        pass
                    if f.done:
                        return
                f.set_state("reconnecting")
                # At once when the server asks, but not twice in a row without an event between.
                if o.now and (asked == 0 or o.yielded > 0):
                    asked += 1
                    continue
                asked = 0
                yield Sleep(self._retry_delay(attempt, o.answer))
                attempt += 1
        finally:
            f.set_state("closed")

    def _end_check(self, f: Follower) -> Plan[Optional[Snapshot]]:
        if f.run_id and not f.message_id or f.msg_run:
            return run_as_snapshot((yield from self._rest(_api.get_run(f.msg_run or f.run_id or ""))))
        if f.thread_id:
            return (yield from self._rest(_api.snapshot(f.thread_id)))
        return None

    def _connect(self, f: Follower, o: Outcome, events_only: bool) -> Plan[None]:
        """One connection of a subscription, how it ended left in ``o``; its stream may be left open."""
        path, headers = f.request()
        try:
            resp, o.token = yield from self._send(Send("GET", self.base_url + path, headers, timeout=stream_timeout(f.read_timeout), stream=True))
            if resp.status_code != 200:
                err = TetherError.from_response(resp.status_code, resp.content, resp.headers)
                o.error, o.fatal, o.answer = err, not _api.retryable(resp.status_code), resp
                return
            ctype = resp.headers.get("content-type", "").split(";")[0].strip()
            if ctype != "text/event-stream":
                o.error, o.fatal = StreamError(PROTOCOL, f"the server answered {ctype or 'no content type'}, not an event stream"), True
                return
            p = SSEParser()
            while (chunk := (yield ReadChunk())) is not None:
                for fr in p.feed(chunk):
                    u = f.frame(fr.event, fr.data, fr.id, fr.has_data, o)
                    if o.fatal:
                        return
                    if u is not None:
                        if not events_only or isinstance(u, Event):
                            yield Emit(u)
                        if f.done:
                            o.stop = True
                    if o.stop or o.now:
                        return
        except FrameTooLarge as e:
            o.error, o.fatal = StreamError(TOO_LARGE, str(e)), True
        except httpx.TransportError as e:
            o.error = e
        except TetherError as e:  # the token callable raised: retried with the backoff
            o.error = e
