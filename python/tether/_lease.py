"""A claimed run's way to the server: appends, heartbeats, input and cancel (docs/protocol.md §6).

One :class:`RunTransport` per claimed run. Its sender task sends what the
session queued, a batch at a time, under the run's lease, with the
idempotent producer headers (``Producer-Id`` the worker's id,
``Producer-Epoch`` the attempt − 1, ``Producer-Seq`` 0, 1, 2…): a batch
whose answer is lost (a timeout, a cut connection, a 5xx, the server
killed) is sent again with the same sequence number until the server
answers, so it lands once (a repeat of a committed batch is answered
204). Events queued meanwhile wait and go in the next batch together.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

import httpx

from . import _api
from .errors import CONFLICT, GONE, LEASE_LOST, NOT_FOUND, FORBIDDEN, UNAUTHORIZED, TetherError
from .types import JSON, Event, Run, Snapshot

if TYPE_CHECKING:
    from .aio import AsyncClient

MAX_BATCH_EVENTS = 1000
"""Most events in one append."""
MAX_BATCH_BYTES = 1 << 20
"""Most bytes (encoded) in one append, well under the server's 4 MiB body limit."""
MAX_QUEUED = 20000
"""Events queued beyond this make the agent's emits wait for the appends to catch up."""

CANCEL_REQUESTED = "a client asked to cancel the run"
RUN_ENDED = "the run ended"
LEASE_GONE = "the lease on the run is lost"
SHUTDOWN = "the worker is stopping"


def _encode_event(ev: dict[str, Any]) -> bytes:
    """An event as UTF-8 JSON. A string holding surrogates (half of a character that a model's
    stream split, JSON-escaped, across two chunks, which the session could not join) has no
    UTF-8 form: it is sent escaped, as JSON allows, and the server reads a lone half as U+FFFD. A value JSON cannot hold raises
    ``TypeError`` or ``ValueError``."""
    try:
        return json.dumps(ev, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except UnicodeEncodeError:
        return json.dumps(ev, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


class RunTransport:
    def __init__(
        self,
        client: "AsyncClient",
        run: Run,
        token: str,
        ttl: float,
        offset: str,
        producer: str,
        stop: Callable[[str], None],
        log: logging.Logger,
    ) -> None:
        self.c = client
        self.run = run
        self.token = token
        self.ttl = ttl
        self.offset = offset
        self.producer = producer
        self.epoch = max(run.attempt - 1, 0)
        self.seq = 0
        self._stop = stop
        self.log = log
        self.renewed = time.monotonic()
        self.cancel_requested = False
        self.cause: Optional[str] = None

        self._queue: list[list[bytes]] = []  # the events to send, each encoded, by emit: one emit's go in one append
        self._queued = 0  # events in _queue
        self._busy = False  # a batch is being sent
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._error: Optional[BaseException] = None  # a refused append, raised once
        self._dropped = False  # events emitted were dropped once the run was lost: never committed
        self._inputs: dict[str, JSON] = {}
        self._input_arrived = asyncio.Event()
        self._sender: Optional[asyncio.Task[None]] = None

    # -- lifecycle

    def stop(self, cause: str) -> None:
        """Ends the agent's part: the first cause wins."""
        if self.cause is None:
            self.cause = cause
        if cause == CANCEL_REQUESTED:
            self.cancel_requested = True
        self._stop(cause)

    @property
    def lost(self) -> bool:
        """The run is not ours to append to any more."""
        return self.cause in (RUN_ENDED, LEASE_GONE)

    def start(self) -> None:
        self._sender = asyncio.create_task(self._send_loop(), name=f"tether append {self.run.id}")

    async def close(self) -> None:
        if self._sender:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)

    # -- appends

    def put(self, events: list[dict[str, Any]]) -> None:
        """Queues events for the sender, all or none. They are encoded here, so one that cannot be
        (a value JSON has no form for: an object, NaN) raises ``TypeError`` or ``ValueError`` to the
        agent's emit with nothing of the call queued, and the sender only handles bytes it can send."""
        self._raise()
        if self.lost:
            raise TetherError(LEASE_LOST, f"the run {self.run.id} is not this worker's any more ({self.cause})")
        encoded = [_encode_event(ev) for ev in events]
        if not encoded:
            return
        self._queue.append(encoded)
        self._queued += len(encoded)
        self._idle.clear()
        self._wake.set()

    async def room(self) -> None:
        """Waits while the queue is over its bound, for the appends to catch up."""
        while self._queued > MAX_QUEUED and not self.lost:
            await self._wait_idle()

    async def flush(self) -> None:
        """Waits until the queue is sent. Events dropped because the run was lost will never be
        committed, so every flush after that raises ``lease_lost``, as every emit does."""
        await self._wait_idle()
        self._raise()
        if self._dropped:
            raise TetherError(LEASE_LOST, f"the run {self.run.id} is not this worker's any more ({self.cause}): events emitted were not appended")

    async def _wait_idle(self) -> None:
        # The loop runs on one thread: when there is work, the sender has it
        # (woken, or busy) and sets _idle once done, so clearing here is safe.
        while self._queue or self._busy:
            self._idle.clear()
            await self._idle.wait()

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    async def _send_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue and not self.lost:
                batch = self._take()
                self._busy = True
                try:
                    await self._append(batch)
                except asyncio.CancelledError:
                    raise
                except BaseException as e:  # refused: the events of the batch are not in the log
                    self._error = e
                    self._queue.clear()
                    self._queued = 0
                    self._dropped = self._dropped or self.lost
                finally:
                    self._busy = False
            if self.lost and self._queue:
                self._queue.clear()
                self._queued = 0
                self._dropped = True
            self._idle.set()

    def _take(self) -> list[bytes]:
        """The next batch: whole emits, as many as fit the limits (an emit over them goes alone)."""
        g, n, size = 0, 0, 2
        for group in self._queue:
            gn, gsize = len(group), sum(len(ev) + 1 for ev in group)
            if g > 0 and (n + gn > MAX_BATCH_EVENTS or size + gsize > MAX_BATCH_BYTES):
                break
            g, n, size = g + 1, n + gn, size + gsize
        groups, self._queue = self._queue[:g], self._queue[g:]
        self._queued -= n
        return [ev for group in groups for ev in group]

    async def _append(self, batch: list[bytes]) -> None:
        body = b"[" + b",".join(batch) + b"]"
        headers = {
            "Tether-Lease": self.token,
            "Producer-Id": self.producer,
            "Producer-Epoch": str(self.epoch),
            "Producer-Seq": str(self.seq),
        }
        r = await self.leased("/v1/runs/" + _api.seg(self.run.id) + "/events", body, headers)
        if r.status_code // 100 == 2:
            self.seq += 1
            if r.status_code != 204:  # 204: committed by an earlier try whose answer was lost
                self._note_result(r)
            return
        err = TetherError.from_response(r.status_code, r.content, r.headers)
        self._refused(err)
        raise err

    def _note_result(self, r: httpx.Response) -> None:
        try:
            if r.json().get("cancel_requested"):
                self.stop(CANCEL_REQUESTED)
        except (ValueError, AttributeError):
            pass

    def _refused(self, err: TetherError) -> None:
        """An answer retrying cannot change: the lease or the run is gone, or the producer state is off."""
        if err.code == NOT_FOUND:
            self.stop(RUN_ENDED)
        elif err.code in (LEASE_LOST, GONE, UNAUTHORIZED, FORBIDDEN):
            self.stop(LEASE_GONE)
        elif err.code == CONFLICT and err.headers.get("producer-expected-seq"):
            # The server's sequence is not ours: it lost appends it had acknowledged
            # (a crash that lost committed data). The run's log has a hole the worker cannot fill.
            self.log.error("tether worker: the server lost appends of run %s (expected seq %s, ours %d)", self.run.id, err.headers.get("producer-expected-seq"), self.seq)
            self.stop(LEASE_GONE)

    async def leased(self, path: str, body: Optional[bytes], headers: dict[str, str]) -> httpx.Response:
        """Sends a request under the run's lease, again with the same body and headers after transport
        errors, 408, 429 and 5xx, until another answer; gives up (lease_lost) two TTLs after the last
        renewal, when the lease has certainly expired: one TTL is the lease, the second covers renewals
        whose answers were lost."""
        attempt = 0
        while True:
            answer: Optional[httpx.Response] = None
            try:
                r = await self.c._post(path, body, headers, timeout=max(self.ttl / 2, 5.0))
            except httpx.TransportError as e:
                err: BaseException = e
            else:
                if r.status_code // 100 == 2:
                    if r.status_code != 204:
                        self.renewed = time.monotonic()
                    return r
                if not _api.retryable(r.status_code):
                    return r
                err = TetherError.from_response(r.status_code, r.content, r.headers)
                answer = r
            if time.monotonic() > self.renewed + 2 * self.ttl:
                self.stop(LEASE_GONE)
                raise TetherError(LEASE_LOST, "the lease expired while the server could not be reached")
            d = self.c._retry_delay(attempt, answer)
            attempt += 1
            self.log.warning("tether worker: %s failed (%s); retrying in %.1fs", path, err, d)
            await asyncio.sleep(d)

    # -- heartbeats

    async def heartbeat(self) -> None:
        """Renews the lease every TTL/3 while no append did."""
        every = self.ttl / 3
        path = "/v1/runs/" + _api.seg(self.run.id) + "/heartbeat"
        while not self.lost:
            await asyncio.sleep(max(0.0, self.renewed + every - time.monotonic()))
            if time.monotonic() - self.renewed < every:
                continue  # an append renewed it meanwhile
            try:
                r = await self.leased(path, None, {"Tether-Lease": self.token})
            except TetherError:
                return  # the lease expired: the agent is stopped
            if r.status_code // 100 == 2:
                self._note_result(r)
                continue
            err = TetherError.from_response(r.status_code, r.content, r.headers)
            self.log.info("tether worker: heartbeat of run %s refused: %s", self.run.id, err)
            if err.code == CONFLICT:
                self.stop(RUN_ENDED)  # the run is finished
            else:
                self._refused(err)
            return

    # -- following the run: input and cancel

    async def follow(self) -> None:
        """Follows the run from its run.started: input goes to wait_input; a cancel request or the
        end of the run stops the agent. The subscription resumes by itself across server restarts."""
        attempt = 0
        while not self.lost:
            try:
                async for u in self.c.subscribe(run_id=self.run.id, after=self.offset):
                    if isinstance(u, Snapshot):
                        self.offset = u.offset
                        self._note_snapshot(u)
                    else:
                        self.offset = u.offset or self.offset
                        self._note_event(u)
                self.stop(RUN_ENDED)
                return
            except TetherError as e:
                if e.code == NOT_FOUND:
                    self.stop(RUN_ENDED)
                    return
                # A refusal (a token that may not read the run): keep trying, slowly.
                d = self.c._backoff(attempt)
                attempt += 1
                self.log.warning("tether worker: following run %s failed (%s); retrying in %.1fs", self.run.id, e, d)
                await asyncio.sleep(d)

    def _note_event(self, ev: Event) -> None:
        if ev.type == "run.cancel_requested":
            self.stop(CANCEL_REQUESTED)
        elif ev.type == "run.finished":
            self.stop(RUN_ENDED)
        elif ev.type == "run.input" and ev.request_id:
            self._inputs[ev.request_id] = ev.value
            self._input_arrived.set()

    def _note_snapshot(self, s: Snapshot) -> None:
        r = s.run(self.run.id)
        if r is None:
            return
        if r.terminal:
            self.stop(RUN_ENDED)
        elif r.cancel_requested_at:
            self.stop(CANCEL_REQUESTED)

    async def wait_input(self, request_id: str) -> JSON:
        while request_id not in self._inputs:
            self._input_arrived.clear()
            await self._input_arrived.wait()
        return self._inputs[request_id]
