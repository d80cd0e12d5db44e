"""The worker: claims runs of named agents and runs them (docs/protocol.md §6)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import socket
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, Optional, Union

import httpx

from . import _api
from ._lease import CANCEL_REQUESTED, RUN_ENDED, SHUTDOWN, RunTransport
from .aio import AsyncClient
from .client import DEFAULT_URL
from .errors import BAD_REQUEST, CONFLICT, FORBIDDEN, PROTOCOL, UNAUTHORIZED, TetherError
from .session import Reasoning, Session
from .types import Message, Run

AgentFunction = Callable[[Run, Session], Union[Awaitable[None], AsyncIterator[Any]]]
"""An agent: ``async def agent(run, session)``, or an async generator that yields its answer.

A generator may yield ``str`` (answer text), :class:`tether.Reasoning`
(reasoning) or ``dict`` (a raw event, see :meth:`Session.emit`). Either
way it may use ``session`` for anything else: tool calls, questions,
custom events.
"""

AGENT_ERROR = "agent_error"
"""The code of a run whose agent raised. Clients see a generic message; the error is logged by the worker."""

log = logging.getLogger("tether.worker")


class Worker:
    """Claims runs of its agents from a Tether server and runs them, like the server's own runner.

    ``Worker("http://127.0.0.1:8080", {"echo": echo}).run_forever()``, or
    ``await worker.run()`` in an event loop. Claims are long polls for up to
    ``concurrency`` runs at once. For each run it appends what the agent
    emits under the run's lease (idempotently, see ``tether._lease``),
    heartbeats while the agent is quiet, follows the run for input and
    cancel requests, and ends it exactly once: ``done`` when the agent
    returns, ``error`` (code ``agent_error``) when it raises or the server
    refused events it emitted (they are not in the log), ``cancelled``
    when a client cancelled it; unless the agent ended it itself. A server
    restart is waited out: claims retry with backoff, appends and
    heartbeats retry with the same sequence numbers until the server is
    back (the lease survives the restart) or the lease has certainly
    expired.

    Args:
        base_url: the server; or pass ``client``.
        agents: agent functions by agent name.
        token: a ``worker`` (or ``admin``) token.
        id: the worker's id, in its claims and its runs' ``worker_id``, and
            the ``Producer-Id`` of its appends. Defaults to ``<host>-<pid>``.
        concurrency: runs at once. Defaults to 4.
        resumable: the agents can resume a run from its log: a run whose
            worker is lost then waits for another worker instead of ending
            ``aborted``.
        claim_wait: seconds one claim waits for a run (the server caps it at 30).
        stop_wait: seconds :meth:`run` waits, once stopped, for running agents to return.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        agents: Optional[Mapping[str, AgentFunction]] = None,
        *,
        token: Optional[str] = None,
        id: Optional[str] = None,
        concurrency: int = 4,
        resumable: bool = False,
        claim_wait: float = 30.0,
        stop_wait: float = 10.0,
        client: Optional[AsyncClient] = None,
    ) -> None:
        if not agents:
            raise ValueError("a worker needs at least one agent")
        for name, fn in agents.items():
            if not name or not callable(fn):
                raise ValueError(f"worker agent {name!r}: a name and a function are needed")
        self.agents = dict(agents)
        self.id = id or f"{socket.gethostname() or 'worker'}-{os.getpid()}"
        if len(self.id.encode()) > 255:
            raise ValueError("a worker id must be at most 255 bytes")
        self.concurrency = max(1, concurrency)
        self.resumable = resumable
        self.claim_wait = claim_wait
        self.stop_wait = stop_wait
        self._client = client or AsyncClient(base_url, token)
        self._own_client = client is None
        # A client the worker made is closed when run returns (its connections belong to that
        # run's event loop); the next run makes a new one from these.
        self._base_url, self._token = base_url, token
        self._client_closed = False
        self._stopping: Optional[asyncio.Event] = None
        self._stop_asked = False  # stop() came: also before run() made _stopping, which run() then sets
        self._running = False
        self.claimed = 0
        """How many runs this worker has claimed (for tests and metrics)."""

    def stop(self) -> None:
        """Stops claiming; :meth:`run` cancels the running agents and returns (their runs are left to the server).

        Called before :meth:`run` (a signal while the program is still starting), it makes run
        return at once, without claiming.
        """
        self._stop_asked = True
        if self._stopping is not None:
            self._stopping.set()

    def run_forever(self) -> None:
        """Runs the worker in a new event loop until SIGINT or SIGTERM."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, self.stop)
                except (NotImplementedError, RuntimeError):
                    pass
            await self.run()

        asyncio.run(main())

    async def run(self) -> None:
        """Claims runs and runs them until :meth:`stop` (or until cancelled).

        Claims that fail (the server is down or restarting) are retried with
        backoff, forever, not sooner than a 429's or 503's ``Retry-After``; a claim the server refuses for good (400, 401, 403:
        a bad worker id or token) raises :class:`TetherError`.

        Once it returned it may be called again (also in another event loop, as a second
        :meth:`run_forever` does): a worker that made its own client closes it when run returns
        and makes a new one for the next.
        """
        if self._running:
            raise RuntimeError("the worker is already running")
        self._running = True
        if self._client_closed:
            self._client = AsyncClient(self._base_url, self._token)
            self._client_closed = False
        self._stopping = asyncio.Event()
        if self._stop_asked:
            self._stopping.set()
        sem = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        try:
            await self._claim_loop(sem, tasks)
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                done, pending = await asyncio.wait(tasks, timeout=self.stop_wait)
                if pending:
                    log.warning("tether worker: %d agents did not return after %.0fs; leaving them", len(pending), self.stop_wait)
            self._running = False
            self._stop_asked = False  # a stop ends one run
            if self._own_client:
                self._client_closed = True
                await self._client.aclose()

    async def _claim_loop(self, sem: asyncio.Semaphore, tasks: set[asyncio.Task[None]]) -> None:
        assert self._stopping is not None
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            attempt = 0
            while not self._stopping.is_set():
                await sem.acquire()
                claim = asyncio.create_task(self._claim())
                await asyncio.wait({claim, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not claim.done():
                    claim.cancel()
                    await asyncio.gather(claim, return_exceptions=True)
                    sem.release()
                    return
                try:
                    got = claim.result()
                except (httpx.TransportError, TetherError) as e:
                    sem.release()
                    if isinstance(e, TetherError) and e.code in (BAD_REQUEST, UNAUTHORIZED, FORBIDDEN):
                        log.error("tether worker: the server refused the claim; stopping: %s", e)
                        raise
                    # A 429 or 503 says when to come back (Retry-After): not sooner, up to max_backoff.
                    wait = _api.retry_after(e.headers) if isinstance(e, TetherError) else 0.0
                    d = max(self._client._backoff(attempt), min(wait, self._client._max))
                    attempt += 1
                    log.warning("tether worker: claim failed (%s); retrying in %.1fs", e, d)
                    try:
                        await asyncio.wait_for(asyncio.shield(stopping), d)
                    except asyncio.TimeoutError:
                        pass
                    continue
                attempt = 0
                if got is None:
                    sem.release()
                    continue
                self.claimed += 1
                t = asyncio.create_task(self._execute(*got), name=f"tether run {got[0].id}")
                tasks.add(t)

                def done(t: asyncio.Task[None]) -> None:
                    tasks.discard(t)
                    sem.release()

                t.add_done_callback(done)
        finally:
            stopping.cancel()

    async def _claim(self) -> Optional[tuple[Run, tuple[Message, ...], str, float, str]]:
        body: dict[str, Any] = {"worker_id": self.id, "agents": sorted(self.agents), "wait_ms": int(self.claim_wait * 1000)}
        if self.resumable:
            body["resumable"] = True
        # The server holds a claim up to claim_wait; past that and a margin the connection is dead.
        r = await self._client._post("/v1/workers/claim", _api.encode(body), {}, timeout=self.claim_wait + 30)
        if r.status_code == 204:
            return None
        if r.status_code != 200:
            raise TetherError.from_response(r.status_code, r.content, r.headers)
        try:
            v = r.json()
            run = Run.from_json(v["run"])
            lease = v["lease"]
            token, ttl = str(lease["token"]), float(lease.get("ttl_ms") or 30000) / 1000
            msgs = tuple(Message.from_json(m) for m in v.get("messages") or ())
            offset = str(v.get("offset") or "")
        except (ValueError, KeyError, TypeError):
            raise TetherError(PROTOCOL, "claim: the answer is not a claimed run")
        if not run.id or not token:
            raise TetherError(PROTOCOL, "claim: the answer is not a claimed run")
        return run, msgs, token, ttl, offset

    async def _execute(self, run: Run, messages: tuple[Message, ...], token: str, ttl: float, offset: str) -> None:
        agent_task: Optional[asyncio.Task[None]] = None

        def stop(cause: str) -> None:
            if agent_task is not None and not agent_task.done():
                agent_task.cancel()

        t = RunTransport(self._client, run, token, ttl, offset, self.id, stop, log)
        session = Session(run, messages, t)
        t.start()
        helpers = [asyncio.create_task(t.follow()), asyncio.create_task(t.heartbeat())]
        agent_task = asyncio.create_task(self._call(self.agents.get(run.agent), run, session))
        err: Optional[BaseException] = None
        try:
            try:
                await asyncio.wait({agent_task})
            except asyncio.CancelledError:
                # The worker is stopping: the agent too; the run is left to the server.
                t.stop(SHUTDOWN)
                agent_task.cancel()
                await asyncio.gather(agent_task, return_exceptions=True)
                raise
            err = None if agent_task.cancelled() else agent_task.exception()
            await self._conclude(t, session, err)
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await t.close()

    async def _call(self, fn: Optional[AgentFunction], run: Run, session: Session) -> None:
        if fn is None:
            raise LookupError(f"no agent {run.agent!r}")
        out = fn(run, session)
        if inspect.isasyncgen(out):
            async for item in out:
                if isinstance(item, str):
                    await session.text(item)
                elif isinstance(item, Reasoning):
                    await session.reasoning(item.delta)
                elif isinstance(item, dict):
                    await session.emit(item)
                elif item is not None:
                    raise TypeError(f"an agent generator yields str, tether.Reasoning or dict, not {type(item).__name__}")
        elif inspect.isawaitable(out):
            await out

    async def _conclude(self, t: RunTransport, s: Session, err: Optional[BaseException]) -> None:
        """Finishes the run after its agent returned, unless the agent did or the run is not ours."""
        cause = t.cause
        try:
            if s.finished:
                await s.flush()  # its run.finished: make sure it landed
                return
            if cause not in (None, CANCEL_REQUESTED):
                log.info("tether worker: run %s left to the server: %s (agent error: %s)", t.run.id, cause, err)
                return
            if cause == CANCEL_REQUESTED:
                await s.finish("cancelled")
                return
            failed = {"code": AGENT_ERROR, "message": "The agent failed."}
            if err is not None:
                log.warning("tether worker: agent %r failed on run %s", t.run.agent, t.run.id, exc_info=err)
            try:
                await self._finish_or_cancel(s, "error" if err is not None else "done", failed if err is not None else None)
            except TetherError as e:
                if e.code == CONFLICT or t.lost:
                    raise
                # The finish's flush raised the refusal of an append of the agent's (an event
                # over the limits, malformed): those events are not in the log, so the run ends
                # error now rather than stay running until its lease expires (aborted).
                log.warning("tether worker: run %s: the server refused events of the agent %r: %s", t.run.id, t.run.agent, e)
                await self._finish_or_cancel(s, "error", failed)
        except TetherError as e:
            if e.code != CONFLICT and not t.lost:
                log.warning("tether worker: finish run %s: %s", t.run.id, e)

    async def _finish_or_cancel(self, s: Session, status: str, error: Optional[dict[str, str]]) -> None:
        try:
            await s.finish(status, error=error)
        except TetherError as e:
            # A cancel came after the worker last looked: the server refuses any
            # end but cancelled, so end it so rather than wait out the grace.
            if e.code != CONFLICT:
                raise
            await s.finish("cancelled")
