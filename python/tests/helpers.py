"""Helpers of the tests: reading a thread's whole log as the server has it; the asyncio client
called as the sync one is; faults injected into a client's requests to the real server; a proxy
that hands the server's bytes over cut inside their characters."""

from __future__ import annotations

import asyncio
import inspect
import socket
import threading
import time
from typing import Any, Callable, Iterator, Optional

import httpx
from tether import AsyncClient, Worker


def log_events(url: str, thread_id: str) -> list[dict[str, Any]]:
    """Every event of a thread's log (JSON catch-up, page after page)."""
    out: list[dict[str, Any]] = []
    after = "-1"
    while True:
        r = httpx.get(f"{url}/v1/threads/{thread_id}/events", params={"after": after}, headers={"Accept": "application/json"}, timeout=30)
        r.raise_for_status()
        v = r.json()
        out.extend(v["events"])
        after = v["next_offset"]
        if v["up_to_date"]:
            return out


def wait_for(cond: Callable[[], Any], timeout: float = 30, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def requests_in_log(server_log: str, method: str, path: str) -> int:
    """How many requests the server logged for a method and path."""
    return sum(1 for line in server_log.splitlines() if f"method={method} path={path} " in line)


class Blocking:
    """An :class:`tether.AsyncClient` called as a :class:`tether.Client` is: each call awaited on an
    event loop of its own, each stream's items too; so one test runs the same steps through both."""

    def __init__(self, client: Any, http: Any = None) -> None:
        self.client = client
        self.http = http  # an httpx.AsyncClient given to the client, closed with it
        self.loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            if inspect.isasyncgen(out):
                return self._iterate(out)
            return self.loop.run_until_complete(out)

        return call if callable(attr) else attr

    def _iterate(self, agen: Any) -> Iterator[Any]:
        try:
            while True:
                try:
                    yield self.loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self.loop.run_until_complete(agen.aclose())

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.run_until_complete(self.client.aclose())
            if self.http is not None:
                self.loop.run_until_complete(self.http.aclose())
            self.loop.close()

    def __enter__(self) -> "Blocking":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FAULT_BODY = {"error": {"code": "unavailable", "message": "injected"}}
LANDED_BODY = {"error": {"code": "unavailable", "message": "the request timed out; its outcome is unknown, retry it"}}


class Faults(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Passes requests to the real server, but injects a fault into the next request matching each
    ``(method, path suffix, fault)`` injected, in order: ``lose``, the server acts and its answer
    is lost (as a cut connection would lose it); ``landed``, the server acts and its answer is a
    503 ``unavailable`` (a write that landed whose outcome the server could not learn); ``busy``, a 503 with ``Retry-After: 0`` instead of
    the server's answer; ``limited``, a 429 with ``Retry-After: 1`` (``limited 12``: with that); ``cut``, a stream that ends
    right after its ``connected`` frame; ``lease_lost``, a 410 ``lease_lost``; ``page``, a 200 with a proxy's HTML page (``page 405``: with
    that status); ``empty``, a 200 with no body.
    ``seen`` holds every request's method, path and ``Idempotency-Key``."""

    def __init__(self) -> None:
        self.faults: list[tuple[str, str, str]] = []
        self.seen: list[tuple[str, str, Optional[str]]] = []
        self.sync = httpx.HTTPTransport()
        self.aio = httpx.AsyncHTTPTransport()

    def inject(self, *faults: tuple[str, str, str]) -> None:
        self.faults.extend(faults)

    def paths(self, since: int = 0) -> list[str]:
        """The paths of the requests seen, from the ``since``-th."""
        return [p for _, p, _ in self.seen[since:]]

    def _fault(self, request: httpx.Request) -> Optional[str]:
        self.seen.append((request.method, request.url.path, request.headers.get("idempotency-key")))
        for i, (method, suffix, fault) in enumerate(self.faults):
            if request.method == method and request.url.path.endswith(suffix):
                del self.faults[i]
                return fault
        return None

    @staticmethod
    def _instead(fault: Optional[str]) -> Optional[httpx.Response]:
        if fault == "busy":
            return httpx.Response(503, json=FAULT_BODY, headers={"Retry-After": "0"})
        if fault == "limited":
            return httpx.Response(429, json={"error": {"code": "rate_limited", "message": "injected"}}, headers={"Retry-After": "1"})
        if fault == "lease_lost":
            return httpx.Response(410, json={"error": {"code": "lease_lost", "message": "injected"}})
        if fault == "page":
            return httpx.Response(200, headers={"Content-Type": "text/html"}, content=b"<html>welcome to db01.internal</html>")
        if fault == "empty":
            return httpx.Response(200)
        if fault and fault.startswith("limited "):  # "limited 12": a 429 with Retry-After: 12
            return httpx.Response(429, json={"error": {"code": "rate_limited", "message": "injected"}}, headers={"Retry-After": fault[8:]})
        if fault and fault.startswith("page "):  # "page 405": a proxy's HTML page with that status
            return httpx.Response(int(fault[5:]), headers={"Content-Type": "text/html"}, content=b"<html>db01.internal</html>")
        if fault == "cut":
            return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=b'event: connected\ndata: {"offset":"-1"}\n\n')
        return None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        fault = self._fault(request)
        instead = self._instead(fault)
        if instead is not None:
            return instead
        resp = self.sync.handle_request(request)
        if fault in ("lose", "landed"):
            resp.read()
            resp.close()
            if fault == "landed":
                return httpx.Response(503, json=LANDED_BODY)
            raise httpx.ReadError("the answer was lost", request=request)
        return resp

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fault = self._fault(request)
        instead = self._instead(fault)
        if instead is not None:
            return instead
        resp = await self.aio.handle_async_request(request)
        if fault in ("lose", "landed"):
            await resp.aread()
            await resp.aclose()
            if fault == "landed":
                return httpx.Response(503, json=LANDED_BODY)
            raise httpx.ReadError("the answer was lost", request=request)
        return resp

    def close(self) -> None:
        self.sync.close()

    async def aclose(self) -> None:
        await self.aio.aclose()


class SplittingProxy:
    """A TCP proxy to the real server that sends each chunk of the server's answers on in pieces
    cut inside every multi-byte UTF-8 character (before each continuation byte), each piece sent
    alone and a moment after the one before, so the client's reads split the characters.
    ``split`` counts the characters cut. Closed by :meth:`close`."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.split = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.socks: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks += [client, server]
            for args in ((client, server, False), (server, client, True)):
                t = threading.Thread(target=self._pump, args=args, daemon=True)
                self.threads.append(t)
                t.start()

    def _pump(self, src: socket.socket, dst: socket.socket, split: bool) -> None:
        try:
            while data := src.recv(65536):
                if not split:
                    dst.sendall(data)
                    continue
                start = 0
                for i in range(1, len(data)):
                    if 0x80 <= data[i] < 0xC0 and data[i - 1] >= 0xC0:  # a lead byte, then its continuation
                        dst.sendall(data[start:i])
                        self.split += 1
                        start = i
                        time.sleep(0.005)
                dst.sendall(data[start:])
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for t in self.threads:
            t.join(5)


def run_answering(
    url: str, agents: dict[str, Any], prompt: str, answer: Optional[Callable[[Any], Any]] = None
) -> tuple[str, str, list[Any]]:
    """Serves ``agents`` with a Worker, runs the prompt on a new thread with the first of them (once
    the worker has asked for it), to its end, answering each request of the run with ``answer(the
    run.waiting event)``; returns the thread's id, the run's id and the events its follower read."""

    async def main() -> tuple[str, str, list[Any]]:
        w = Worker(url, agents, id="py-answering", claim_wait=5)
        wt = asyncio.create_task(w.run())
        try:
            async with AsyncClient(url) as c:
                th = await c.create_thread()
                while True:
                    try:
                        run = await c.create_run(th.id, prompt, agent=next(iter(agents)))
                        break
                    except Exception:
                        await asyncio.sleep(0.05)
                evs: list[Any] = []
                async for ev in c.follow(run.id):
                    evs.append(ev)
                    if ev.type == "run.waiting" and answer is not None:
                        await c.submit_input(run.id, answer(ev), request_id=ev.request.id)
                return th.id, run.id, evs
        finally:
            w.stop()
            await asyncio.wait_for(wt, 30)

    return asyncio.run(main())
