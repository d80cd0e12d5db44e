"""The asyncio client: :class:`AsyncClient`, the twin of :class:`tether.Client`."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Mapping, Optional, Sequence, Union

import httpx

from . import _api
from ._api import Call, T
from ._follow import Follower, Outcome, backoff
from ._sse import FrameTooLarge, SSEParser
from ._token import TokenKeeper, TokenSource, auth_header, is_token_expired
from .errors import CONFLICT, INTERNAL, TOO_LARGE, StreamError, TetherError
from .types import (
    JSON,
    OFFSET_START,
    Agent,
    Event,
    FinalAnswer,
    Run,
    RunSnapshot,
    Snapshot,
    Thread,
    ThreadPage,
    Update,
)

from .client import DEFAULT_URL, Prompt, StateCallback, stream_timeout


class AsyncClient:
    """An asyncio client of a Tether server: :class:`tether.Client` with ``await``.

    ``AsyncClient("http://127.0.0.1:8080", token="...")``; use it as
    ``async with``. REST calls that fail
    on the way (a transport error, 5xx, 429) are retried up to 4 times with
    backoff when repeating them is safe; :meth:`create_run` sends one
    ``Idempotency-Key`` for all its tries, so a retry never starts a second
    run. Subscriptions resume by themselves after any drop, from the last
    offset they yielded. Errors of the server raise :class:`TetherError`
    with its stable ``code``.

    Args:
        base_url: the server's URL; a path prefix is kept.
        token: sent as ``Authorization: Bearer <token>``; or a callable
            returning one (plain or ``async``), called for the first request and
            again when needed: for a JWT shortly before its ``exp`` (30 s, at
            most half its lifetime) and when the server answers
            ``token_expired`` (a 401: the request is sent once more; a
            stream's ``reconnect``: it resumes from its offset with the new
            one); for any other token at each request. A callable that raises
            fails the call with the code ``token_unavailable`` (a
            subscription retries it with its backoff).
        timeout: bound of each REST request, in seconds. Defaults to 30.
        min_backoff, max_backoff: the retry delays, exponential from
            ``min_backoff`` up to ``max_backoff`` with full jitter. Default to
            0.2 and 5 seconds.
        http_client: an ``httpx.AsyncClient`` to use (its base URL and auth are
            left as they are); the client then does not close it.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: TokenSource = None,
        *,
        timeout: float = 30.0,
        min_backoff: float = 0.2,
        max_backoff: float = 5.0,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = TokenKeeper(token)
        self._timeout = timeout
        self._min, self._max = min_backoff, max(max_backoff, min_backoff)
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        """Closes the connections (not those of an ``http_client`` passed in)."""
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- REST

    async def _send(self, method: str, url: str, *, headers: Mapping[str, str], **kw: Any) -> httpx.Response:
        """One request with the token; a 401 ``token_expired`` is sent once more with a new one."""
        token = await self._auth.aget()
        r = await self._http.request(method, url, headers={**auth_header(token), **headers}, **kw)
        if self._auth.refreshable and is_token_expired(r.status_code, r.content):
            self._auth.expired(token)
            token = await self._auth.aget()
            r = await self._http.request(method, url, headers={**auth_header(token), **headers}, **kw)
        return r

    async def _do(self, c: Call[T]) -> T:
        body = _api.encode(c.body) if c.body is not None else None
        headers = {"Accept": "application/json", **c.headers}
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(_api.MAX_RETRIES + 1):
            wait = 0.0
            try:
                r = await self._send(c.method, self.base_url + c.path, content=body, params=c.params, headers=headers, timeout=self._timeout)
            except httpx.TransportError as e:
                if attempt == _api.MAX_RETRIES or not _api.retryable_transport(e, c.retry):
                    raise
            else:
                if r.status_code // 100 == 2:
                    if r.status_code == 204 or not r.content:
                        return c.parse(None)
                    return c.parse(r.json())
                err = TetherError.from_response(r.status_code, r.content, r.headers)
                if attempt == _api.MAX_RETRIES or not _api.retryable(r.status_code, c.retry):
                    raise err
                wait = _api.retry_after(r.headers)
            await asyncio.sleep(max(backoff(attempt, self._min, self._max), min(wait, self._max)))
        raise AssertionError("unreachable")

    async def _post(self, path: str, body: Optional[bytes], headers: Mapping[str, str], timeout: float) -> httpx.Response:
        """One POST, no retries: the worker's appends and heartbeats retry by their own rules."""
        h = {"Accept": "application/json", **headers}
        if body is not None:
            h["Content-Type"] = "application/json"
        return await self._send("POST", self.base_url + path, content=body, headers=h, timeout=timeout)

    async def create_thread(self, id: Optional[str] = None, *, metadata: Optional[Mapping[str, Any]] = None) -> Thread:
        """Creates a thread (the server names it unless ``id`` is given); the same id and metadata again return it."""
        return await self._do(_api.create_thread(id, metadata))

    async def list_threads(self, *, status: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None) -> ThreadPage:
        """One page of threads, most recently updated first."""
        return await self._do(_api.list_threads(status, limit, cursor))

    async def threads(self, *, status: Optional[str] = None) -> AsyncIterator[Thread]:
        """Every thread (or every one with ``status``), page after page."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_threads(status=status, limit=100, cursor=cursor)
            for t in page.threads:
                yield t
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def snapshot(self, thread_id: str) -> Snapshot:
        """The thread's state (runs, messages) as of an offset: subscribe ``after`` it to go on."""
        return await self._do(_api.snapshot(thread_id))

    async def delete_thread(self, thread_id: str) -> None:
        """Deletes a thread, its log and its runs."""
        await self._do(_api.delete_thread(thread_id))

    async def create_run(
        self,
        thread_id: str,
        prompt: Prompt = None,
        *,
        agent: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        multitask: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Run:
        """Starts a run on a thread.

        ``prompt`` is the user's message, or a list of ``{"role", "content"}``
        input messages. ``agent`` defaults to the server's (``demo``).
        ``multitask`` is ``reject`` (the default: ``run_active`` error if the
        thread has an active run), ``enqueue`` or ``interrupt``. A repeated
        ``idempotency_key`` returns the first run instead of starting another.
        """
        return await self._do(_api.create_run(thread_id, prompt, agent, metadata, multitask, idempotency_key))

    async def get_run(self, run_id: str) -> RunSnapshot:
        """A run and its messages."""
        return await self._do(_api.get_run(run_id))

    async def cancel(self, run_id: str) -> Run:
        """Asks to cancel a run; it ends ``cancelled`` once its worker confirms (or the server's grace runs out)."""
        return await self._do(_api.cancel(run_id))

    async def submit_input(self, run_id: str, value: JSON, *, request_id: Optional[str] = None) -> Run:
        """Answers what a waiting run asks (its ``run.waiting`` request).

        Without ``request_id`` the run's open request is looked up; a run that
        waits for nothing raises a ``conflict`` :class:`TetherError`.
        """
        if request_id is None:
            run = (await self.get_run(run_id)).run
            if run.request is None:
                raise TetherError(CONFLICT, f"run {run_id} is {run.status}, not waiting for input")
            request_id = run.request.id
        return await self._do(_api.submit_input(run_id, request_id, value))

    async def final_answer(self, thread_id: str, *, run_id: Optional[str] = None) -> FinalAnswer:
        """The whole text of the latest run's answer (or ``run_id``'s), however its stream went."""
        return await self._do(_api.final_answer(thread_id, run_id))

    async def list_agents(self) -> list[Agent]:
        """The agent names the server accepts runs for: in-process, declared, and claimed lately by workers."""
        return await self._do(_api.list_agents())

    async def declare_agent(self, name: str) -> Agent:
        """Declares an external agent name (admin), so runs of it are accepted before any worker claims."""
        return await self._do(_api.declare_agent(name))

    async def forget_agent(self, name: str) -> None:
        """Removes a declaration made with :meth:`declare_agent` (admin)."""
        await self._do(_api.forget_agent(name))

    # -- streams

    async def subscribe(
        self,
        thread_id: Optional[str] = None,
        *,
        run_id: Optional[str] = None,
        message_id: Optional[str] = None,
        types: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        on_state: Optional[StateCallback] = None,
    ) -> AsyncIterator[Update]:
        """Follows a thread, a run or a message and yields its updates in log order, each once.

        Without ``after`` the first update is a :class:`Snapshot`, then every
        later :class:`Event`; ``after="-1"`` gives the whole log, ``"now"``
        only new events, an offset every event after it. A snapshot with
        ``reset=True`` (the cursor was not in the log) replaces what the
        consumer had.

        It resumes by itself after any drop (end of stream, network error,
        5xx, a stream silent for 3 heartbeats) from the last offset it
        yielded, with backoff; events at or before it are skipped. A run
        subscription ends after ``run.finished``, a message subscription
        after the message ends; a thread subscription goes on until the
        consumer stops. Answers that retrying cannot change (400, 401, 403,
        404…) raise :class:`TetherError`.
        """
        f = Follower(thread_id, run_id, message_id, list(types) if types else None, after, on_state)
        f.set_state("connecting")
        attempt = asked = 0
        try:
            while True:
                o = Outcome()
                async for u in self._connect(f, o):
                    yield u
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
                        f.note_ended(await self._end_check(f))
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
                await asyncio.sleep(backoff(attempt, self._min, self._max))
                attempt += 1
        finally:
            f.set_state("closed")

    async def _end_check(self, f: Follower) -> Optional[Snapshot]:
        if f.run_id and not f.message_id or f.msg_run:
            rs = await self.get_run(f.msg_run or f.run_id or "")
            return Snapshot(Thread.from_json({"id": rs.run.thread_id}), (rs.run,), rs.messages, rs.offset)
        if f.thread_id:
            return await self.snapshot(f.thread_id)
        return None

    async def _connect(self, f: Follower, o: Outcome) -> AsyncIterator[Update]:
        path, headers = f.request()
        try:
            o.token = await self._auth.aget()
            for again in (False, True):
                h = {**auth_header(o.token), **headers}
                async with self._http.stream("GET", self.base_url + path, headers=h, timeout=stream_timeout(f.read_timeout)) as resp:
                    if resp.status_code != 200:
                        body = await resp.aread()
                        if not again and self._auth.refreshable and is_token_expired(resp.status_code, body):
                            self._auth.expired(o.token)
                            o.token = await self._auth.aget()
                            continue
                        err = TetherError.from_response(resp.status_code, body, resp.headers)
                        o.error, o.fatal = err, not _api.retryable(resp.status_code, _api.SAFE)
                        return
                    ctype = resp.headers.get("content-type", "").split(";")[0].strip()
                    if ctype != "text/event-stream":
                        o.error, o.fatal = StreamError(INTERNAL, f"the server answered {ctype or 'no content type'}, not an event stream"), True
                        return
                    p = SSEParser()
                    async for chunk in resp.aiter_bytes():
                        for fr in p.feed(chunk):
                            u = f.frame(fr.event, fr.data, fr.id, fr.has_data, o)
                            if o.fatal:
                                return
                            if u is not None:
                                yield u
                                if f.done:
                                    o.stop = True
                            if o.stop or o.now:
                                return
                    return
        except FrameTooLarge as e:
            o.error, o.fatal = StreamError(TOO_LARGE, str(e)), True
        except httpx.TransportError as e:
            o.error = e
        except TetherError as e:  # the token callable raised: retried with the backoff
            o.error = e

    async def follow(self, run_id: str, *, after: str = OFFSET_START, on_state: Optional[StateCallback] = None) -> AsyncIterator[Event]:
        """The events of one run, from its start (or ``after`` an offset) to its ``run.finished``."""
        async for u in self.subscribe(run_id=run_id, after=after, on_state=on_state):
            if isinstance(u, Event):
                yield u
