"""The synchronous client: :class:`Client`. Its asyncio twin is :class:`tether.AsyncClient`.

What a call sends, reads, retries and resumes is ``tether._core``'s, shared
with the twin; this class does its I/O with blocking calls.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Mapping, Optional, Sequence

import httpx

from . import _api
from ._api import Prompt as Prompt
from ._api import T
from ._core import ClientCore, CloseStream, Emit, GetToken, Plan, ReadBody, ReadChunk, Send, Sleep, Stepper
from ._follow import StateCallback as StateCallback
from ._token import TokenSource
from .types import JSON, OFFSET_START, Agent, Event, FinalAnswer, Run, RunSnapshot, Snapshot, Thread, ThreadPage, Update

DEFAULT_URL = "http://127.0.0.1:8080"


class Client(ClientCore):
    """A client of a Tether server; safe to use from several threads.

    ``Client("http://127.0.0.1:8080", token="...")``. REST calls that fail
    on the way (a transport error, 5xx, 429) are retried up to 4 times with
    backoff, each being safe to repeat (a 503 or a dropped connection may
    hide a write that landed): :meth:`create_thread` names a new thread
    itself, :meth:`create_run` sends one ``Idempotency-Key`` for all its
    tries, the server knows a repeat of :meth:`submit_input`'s answer for
    the answer it took, and a :meth:`delete_thread` retried after such a
    failure that finds nothing returns. Subscriptions resume by themselves after any drop, from the last
    offset they yielded. Errors of the server raise :class:`TetherError`
    with its stable ``code``.

    Args:
        base_url: the server's URL; a path prefix is kept.
        token: sent as ``Authorization: Bearer <token>``; or a callable
            returning one, called for the first request and
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
        http_client: an ``httpx.Client`` to use (its base URL and auth are
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
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        super().__init__(base_url, token, timeout, min_backoff, max_backoff)
        self._own = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Closes the connections (not those of an ``http_client`` passed in)."""
        if self._own:
            self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- I/O: the steps of a plan

    def _drive(self, p: Stepper[Any]) -> Iterator[Any]:
        """Does the steps of a plan, blocking, and yields what it emits."""
        stream: Optional[httpx.Response] = None
        chunks: Iterator[bytes] = iter(())
        try:
            for step in p:
                if isinstance(step, Emit):
                    yield step.value
                    continue
                try:
                    if isinstance(step, GetToken):
                        p.reply = self._auth.get()
                    elif isinstance(step, Send):
                        p.reply = r = self._http.send(step.build(self._http), stream=step.stream)
                        if step.stream:
                            stream, chunks = r, r.iter_bytes()
                    elif isinstance(step, ReadChunk):
                        p.reply = next(chunks, None)
                    elif isinstance(step, ReadBody) and stream is not None:
                        p.reply = stream.read()
                        stream.close()
                        stream = None
                    elif isinstance(step, CloseStream) and stream is not None:
                        stream.close()
                        stream = None
                    elif isinstance(step, Sleep):
                        time.sleep(step.seconds)
                except Exception as e:
                    p.error = e
        finally:
            if stream is not None:
                stream.close()
            p.close()

    def _run(self, plan: Plan[T]) -> T:
        """A plan's result, its steps done (a call emits nothing)."""
        p = Stepper(plan)
        for _ in self._drive(p):
            pass
        return p.result

    # -- REST

    def create_thread(self, id: Optional[str] = None, *, metadata: Optional[Mapping[str, Any]] = None) -> Thread:
        """Creates a thread (named ``thr_…`` by the client unless ``id`` is given, so that a retry is a
        create-if-absent); the same id and metadata again return it."""
        return self._run(self._rest(_api.create_thread(id, metadata)))

    def list_threads(self, *, status: Optional[str] = None, limit: Optional[int] = None, cursor: Optional[str] = None) -> ThreadPage:
        """One page of threads, most recently updated first."""
        return self._run(self._rest(_api.list_threads(status, limit, cursor)))

    def threads(self, *, status: Optional[str] = None) -> Iterator[Thread]:
        """Every thread (or every one with ``status``), page after page."""
        yield from self._drive(Stepper(self._threads(status)))

    def snapshot(self, thread_id: str) -> Snapshot:
        """The thread's state (runs, messages) as of an offset: subscribe ``after`` it to go on."""
        return self._run(self._rest(_api.snapshot(thread_id)))

    def delete_thread(self, thread_id: str) -> None:
        """Deletes a thread, its log and its runs; ``not_found`` for no thread, but when a retry after a try
        whose outcome is unknown (a 5xx, a dropped connection) finds none: that try may have deleted it."""
        self._run(self._rest(_api.delete_thread(thread_id)))

    def create_run(
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
        return self._run(self._rest(_api.create_run(thread_id, prompt, agent, metadata, multitask, idempotency_key)))

    def get_run(self, run_id: str) -> RunSnapshot:
        """A run and its messages."""
        return self._run(self._rest(_api.get_run(run_id)))

    def cancel(self, run_id: str) -> Run:
        """Asks to cancel a run; it ends ``cancelled`` once its worker confirms (or the server's grace runs out)."""
        return self._run(self._rest(_api.cancel(run_id)))

    def submit_input(self, run_id: str, value: JSON, *, request_id: Optional[str] = None) -> Run:
        """Answers what a waiting run asks (its ``run.waiting`` request).

        Without ``request_id`` the run's open request is looked up; a run that
        waits for nothing raises a ``conflict`` :class:`TetherError`. A retry
        sends the same answer to the same request, which the server takes for
        the answer it already took, if it did. To repeat a call yourself after
        an error, pass the ``request_id`` it answered: without one, the run may
        be waiting on its next request by then, which this answer would answer.
        """
        return self._run(self._submit_input(run_id, value, request_id))

    def final_answer(self, thread_id: str, *, run_id: Optional[str] = None) -> FinalAnswer:
        """The whole text of the latest run's answer (or ``run_id``'s), however its stream went."""
        return self._run(self._rest(_api.final_answer(thread_id, run_id)))

    def list_agents(self) -> list[Agent]:
        """The agent names the server accepts runs for: in-process, declared, and claimed lately by workers."""
        return self._run(self._rest(_api.list_agents()))

    def declare_agent(self, name: str) -> Agent:
        """Declares an external agent name (admin), so runs of it are accepted before any worker claims."""
        return self._run(self._rest(_api.declare_agent(name)))

    def forget_agent(self, name: str) -> None:
        """Removes a declaration made with :meth:`declare_agent` (admin); a retry after a try whose
        outcome is unknown that finds none returns."""
        self._run(self._rest(_api.forget_agent(name)))

    # -- streams

    def subscribe(
        self,
        thread_id: Optional[str] = None,
        *,
        run_id: Optional[str] = None,
        message_id: Optional[str] = None,
        types: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        on_state: Optional[StateCallback] = None,
    ) -> Iterator[Update]:
        """Follows a thread, a run or a message and yields its updates in log order, each once.

        Without ``after`` the first update is a :class:`Snapshot`, then every
        later :class:`Event`; ``after="-1"`` gives the whole log, ``"now"``
        only new events, an offset every event after it. A snapshot with
        ``reset=True`` (the cursor was not in the log) replaces what the
        consumer had.

        It resumes by itself after any drop (end of stream, network error,
        5xx, a stream silent for 3 heartbeats) from the last offset it
        yielded, with backoff (and not before an answer's ``Retry-After``, up to
        ``max_backoff``); events at or before it are skipped. A run
        subscription ends after ``run.finished``, a message subscription
        after the message ends; a thread subscription goes on until the
        consumer stops. Answers that retrying cannot change (400, 401, 403,
        404…) raise :class:`TetherError`.
        """
        yield from self._drive(Stepper(self._subscribe(thread_id, run_id, message_id, types, after, on_state)))

    def follow(self, run_id: str, *, after: str = OFFSET_START, on_state: Optional[StateCallback] = None) -> Iterator[Event]:
        """The events of one run, from its start (or ``after`` an offset) to its ``run.finished``."""
        yield from self._drive(Stepper(self._subscribe(None, run_id, None, None, after, on_state, events_only=True)))
