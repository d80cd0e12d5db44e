"""Tokens that are callables: refreshed before a JWT's ``exp`` and on ``token_expired``.

Against a small real HTTP server that plays Tether's side of the contract:
a log of events, streams that resume after ``Last-Event-ID``, and tokens the
test expires (their streams end with ``event: reconnect`` ``token_expired``;
requests with them get a 401 ``token_expired``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Optional

import pytest

from tether import AsyncClient, Client, Event, TetherError
from tether._token import TokenKeeper, jwt_expiry

SECRET = b"test-secret-of-at-least-32-bytes!!"


def mint(sub: str, exp: float, **extra: Any) -> str:
    def b64(o: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()

    head, body = b64({"alg": "HS256", "typ": "JWT"}), b64({"sub": sub, "exp": int(exp), **extra})
    sig = base64.urlsafe_b64encode(hmac.new(SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()).rstrip(b"=").decode()
    return f"{head}.{body}.{sig}"


def event(i: int) -> dict[str, Any]:
    return {"offset": f"0000000001_{i:016d}", "type": "text.delta", "thread_id": "t1", "run_id": "r1", "message_id": "m1", "delta": f"w{i} "}


class AuthServer:
    def __init__(self) -> None:
        self.log: list[dict[str, Any]] = []
        self.expired: set[str] = set()
        self.seen: list[str] = []  # "token last-event-id" of each stream request
        self.cond = threading.Condition()
        self.open = 0
        srv = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                srv.handle(self)

            do_POST = do_GET

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        with self.cond:
            self.log.append({"stop": True})
            self.cond.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
        n = int(h.headers.get("Content-Length") or 0)
        if n:
            h.rfile.read(n)
        if not token or token in self.expired:
            code = "token_expired" if token else "unauthorized"
            body = json.dumps({"error": {"code": code, "message": code}}).encode()
            h.send_response(401)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        if not h.path.split("?")[0].endswith("/events"):
            body = json.dumps({"thread": {"id": "t1"}, "runs": [], "messages": [], "offset": "-1"}).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        last = h.headers.get("Last-Event-ID")
        with self.cond:
            self.seen.append(f"{token} {last or '-'}")
            self.open += 1
            self.cond.notify_all()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True
        sent = next((i + 1 for i, e in enumerate(self.log) if e.get("offset") == last), 0)
        try:
            h.wfile.write(b'event: connected\ndata: {"thread_id":"t1","offset":"-1","heartbeat_ms":60000}\n\n')
            h.wfile.flush()
            while True:
                with self.cond:
                    while sent >= len(self.log) and token not in self.expired:
                        self.cond.wait()
                    if token in self.expired:
                        h.wfile.write(b'event: reconnect\ndata: {"reason":"token_expired"}\n\n')
                        return
                    batch = self.log[sent:]
                    sent = len(self.log)
                if any("stop" in e for e in batch):
                    return
                for e in batch:
                    h.wfile.write(f"id: {e['offset']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
                h.wfile.flush()
        finally:
            with self.cond:
                self.open -= 1
                self.cond.notify_all()

    def append(self, *events: dict[str, Any]) -> None:
        with self.cond:
            self.log.extend(events)
            self.cond.notify_all()

    def expire(self, token: str) -> None:
        with self.cond:
            self.expired.add(token)
            self.cond.notify_all()

    def wait(self, cond: Any) -> None:
        with self.cond:
            assert self.cond.wait_for(cond, timeout=10), "the server did not get there"


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    s = AuthServer()
    yield s
    s.stop()


class Minter:
    """A token callable: a JWT for alice living an hour from each call."""

    def __init__(self) -> None:
        self.issued: list[str] = []

    def __call__(self) -> str:
        self.issued.append(mint("alice", time.time() + 3600, n=len(self.issued)))
        return self.issued[-1]


def test_jwt_expiry_reads_exp_without_verifying() -> None:
    assert jwt_expiry(mint("a", 1_900_000_000)) == 1_900_000_000
    assert jwt_expiry(mint("ü→", 1_900_000_001, pad="??>>")) == 1_900_000_001
    assert jwt_expiry("a-static-client-token-of-32-chars") is None
    assert jwt_expiry("a.b.c") is None
    assert jwt_expiry("x.!!!.y") is None


def test_a_jwt_is_kept_until_shortly_before_exp() -> None:
    now = [1000.0]
    issued: list[str] = []

    def fn() -> str:
        issued.append(mint("alice", now[0] + 600, n=len(issued)))
        return issued[-1]

    k = TokenKeeper(fn, clock=lambda: now[0])
    assert k.get() == k.get() == issued[0]
    now[0] += 570 - 0.001  # 30 s before exp, less a little
    assert k.get() == issued[0]
    now[0] += 0.001
    assert k.get() == issued[1]
    # A short-lived token is refreshed at half its life, not at once.
    short: list[str] = []
    k2 = TokenKeeper(lambda: short.append(mint("a", now[0] + 20)) or short[-1], clock=lambda: now[0])
    k2.get()
    now[0] += 9
    k2.get()
    assert len(short) == 1
    now[0] += 1
    k2.get()
    assert len(short) == 2
    # Not a JWT with an exp: asked at each request.
    n = [0]
    k3 = TokenKeeper(lambda: f"opaque-{n.__setitem__(0, n[0] + 1) or n[0]}")
    assert [k3.get(), k3.get()] == ["opaque-1", "opaque-2"]


def test_a_callable_that_fails_ahead_of_exp_keeps_the_held_token() -> None:
    """The callable's endpoint down for a moment while the held token is still
    valid: that token is sent and the callable asked again halfway to the exp;
    past the exp, the failure is the request's (token_unavailable)."""
    now = [1000.0]
    issued: list[str] = []
    down = [False]

    def fn() -> str:
        if down[0]:
            raise OSError("auth endpoint down")
        issued.append(mint("alice", now[0] + 600, n=len(issued)))
        return issued[-1]

    for name, get in (("sync", lambda k: k.get()), ("async", lambda k: asyncio.run(k.aget()))):
        now[0], issued[:], down[0] = 1000.0, [], False
        k = TokenKeeper(fn, clock=lambda: now[0])
        assert get(k) == issued[0], name
        down[0] = True
        now[0] += 580  # 20 s before exp
        assert get(k) == issued[0], name
        now[0] += 5  # 15 s before: not asked again yet (halfway to the exp is 10 s before)
        assert get(k) == issued[0], name
        down[0] = False
        now[0] += 10  # 5 s before: asked again
        assert get(k) == issued[1], name
        down[0] = True
        now[0] += 700  # past the new token's exp
        with pytest.raises(TetherError) as e:
            get(k)
        assert e.value.code == "token_unavailable", name


def test_rest_refreshes_once_on_401_token_expired(auth_server: AuthServer, connect: Any) -> None:
    m = Minter()
    with connect(auth_server.url, token=m) as c:
        c.snapshot("t1")
        auth_server.expire(m.issued[0])
        c.snapshot("t1")  # refused, then sent again with a new token
        assert len(m.issued) == 2
        auth_server.expire(m.issued[1])

        # A callable that keeps giving expired tokens: one refresh per call, then the error.
        def stale() -> str:
            return m.issued[1]

    with connect(auth_server.url, token=stale) as c2:
        with pytest.raises(TetherError) as e:
            c2.snapshot("t1")
        assert e.value.code == "token_expired" and e.value.status == 401
    with connect(auth_server.url, token=m.issued[1]) as c3:
        with pytest.raises(TetherError) as e:
            c3.snapshot("t1")
        assert e.value.code == "token_expired"


class Enough(BaseException):
    """Ends the test's subscription from inside the token callable."""


def test_a_callable_that_raises_is_a_clear_error_and_streams_back_off(auth_server: AuthServer, connect: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]

    def broken() -> str:
        calls[0] += 1
        if calls[0] > 4:
            raise Enough()
        raise RuntimeError("login service unreachable")

    sleeps: list[float] = []
    if connect.kind == "sync":
        monkeypatch.setattr("tether.client.time.sleep", sleeps.append)
    else:

        async def sleep(d: float) -> None:
            sleeps.append(d)

        monkeypatch.setattr("tether.aio.asyncio.sleep", sleep)
    with connect(auth_server.url, token=broken) as c:
        with pytest.raises(TetherError) as e:
            c.snapshot("t1")
        assert e.value.code == "token_unavailable" and e.value.status == 0
        assert str(e.value) == "token_unavailable: the token callable failed: login service unreachable"
        assert calls[0] == 1 and sleeps == []  # a REST call is not retried for it
        states: list[str] = []
        with pytest.raises(Enough):
            next(c.subscribe("t1", after="-1", on_state=lambda s, _: states.append(s)))
        # A wait with the backoff before each new try: no tight loop.
        assert calls[0] == 5 and len(sleeps) == 3
        assert states == ["connecting", "reconnecting", "closed"]
        assert auth_server.seen == []


def until(cond: Any) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.005)


def followed(c: Client, got: list[Event]) -> threading.Thread:
    def run() -> None:
        for u in c.subscribe("t1", after="-1"):
            if isinstance(u, Event):
                got.append(u)
                if len(got) == 6:
                    return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_stream_ended_for_token_expired_resumes_with_a_new_token_nothing_lost_nothing_twice(auth_server: AuthServer) -> None:
    m = Minter()
    got: list[Event] = []
    with Client(auth_server.url, token=m) as c:
        t = followed(c, got)
        auth_server.append(event(1), event(2))
        until(lambda: len(got) == 2)
        auth_server.expire(m.issued[0])
        auth_server.wait(lambda: len(auth_server.seen) == 2 and auth_server.open == 1)
        auth_server.append(event(3), event(4))
        until(lambda: len(got) == 4)
        # A request refused for an expired token, then the stream's own end.
        auth_server.expired.add(m.issued[1])
        c.snapshot("t1")
        auth_server.expire(m.issued[1])
        auth_server.wait(lambda: len(auth_server.seen) == 3 and auth_server.open == 1)
        auth_server.append(event(5), event(6))
        t.join(10)
    assert [e.offset for e in got] == [event(i)["offset"] for i in range(1, 7)]
    assert len(m.issued) == 3
    # Resumed from the last event each time, with the newest token.
    assert auth_server.seen == [f"{m.issued[0]} -", f"{m.issued[1]} {event(2)['offset']}", f"{m.issued[2]} {event(4)['offset']}"]


def test_async_client_with_an_async_callable(auth_server: AuthServer) -> None:
    issued: list[str] = []

    async def fn() -> str:
        await asyncio.sleep(0)
        issued.append(mint("alice", time.time() + 3600, n=len(issued)))
        return issued[-1]

    async def main() -> list[Optional[str]]:
        got: list[Optional[str]] = []
        async with AsyncClient(auth_server.url, token=fn) as c:
            await c.snapshot("t1")
            auth_server.expire(issued[0])
            await c.snapshot("t1")

            async def follow() -> None:
                async for u in c.subscribe("t1", after="-1"):
                    if isinstance(u, Event):
                        got.append(u.offset)
                        if len(got) == 4:
                            return

            task = asyncio.create_task(follow())
            auth_server.append(event(1), event(2))
            await asyncio.to_thread(auth_server.wait, lambda: auth_server.open == 1)
            auth_server.expire(issued[1])
            await asyncio.to_thread(auth_server.wait, lambda: len(auth_server.seen) == 2 and auth_server.open == 1)
            auth_server.append(event(3), event(4))
            await asyncio.wait_for(task, 10)
        return got

    got = asyncio.run(main())
    assert got == [event(i)["offset"] for i in range(1, 5)]
    assert len(issued) == 3
    assert auth_server.seen[1].startswith(issued[2])


def test_a_run_followed_through_expiring_tokens_on_the_real_server(start_server: Any, tmp_path: Any) -> None:
    """The real binary with --jwt-secret-file: 3-second tokens for alice, a
    run of about 6 s; the subscription is ended at each token's exp and
    resumes with the next, and yields the whole answer once."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    server = start_server("--jwt-secret-file", str(secret))
    used: list[str] = []

    def token() -> str:
        used.append(mint("alice", time.time() + 3))
        return used[-1]

    with Client(server.url, token=token) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "a long one", metadata={"demo": {"tokens": 60, "delay_ms": 100}})
        events = list(c.follow(run.id))
        fa = c.final_answer(th.id)
    text = "".join(e.delta or "" for e in events if e.type == "text.delta")
    assert fa.complete and fa.content == text
    offsets = [e.offset for e in events]
    assert offsets == sorted(set(offsets))  # nothing twice, in order
    assert events[-1].type == "run.finished" and events[-1].status == "done"
    assert len(used) >= 3  # refreshed mid-answer
