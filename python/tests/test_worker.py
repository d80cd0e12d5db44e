"""The Worker against the real server: appends, coalescing, input, cancel, errors, exactly one end."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import time
from typing import AsyncIterator

import httpx
import pytest

from helpers import Faults, log_events, requests_in_log
from tether import AsyncClient, Reasoning, Session, TetherError, Worker
from tether.types import Run


@contextlib.asynccontextmanager
async def serving(url: str, agents, **kw) -> AsyncIterator[Worker]:
    w = Worker(url, agents, id=kw.pop("id", "py-test"), claim_wait=kw.pop("claim_wait", 5), **kw)
    task = asyncio.create_task(w.run())
    try:
        yield w
    finally:
        w.stop()
        await asyncio.wait_for(task, 30)


async def run_to_end(c: AsyncClient, agent: str, prompt: str = "hi", **kw) -> tuple[Run, list]:
    th = await c.create_thread()
    for _ in range(100):  # a run of an external agent is accepted once a worker asked for it
        try:
            run = await c.create_run(th.id, prompt, agent=agent, **kw)
            break
        except Exception:
            await asyncio.sleep(0.05)
    events = [ev async for ev in c.follow(run.id)]
    return run, events


def test_an_async_generator_agent_streams_and_ends_done_once(server):
    async def echo(run: Run, s: Session):
        yield Reasoning("The user said hi. ")
        await s.tool_call("lookup", {"q": s.prompt}, {"found": 1})
        for w in ["You ", "said: ", s.prompt]:
            yield w

    async def main():
        async with serving(server.url, {"echo": echo}), AsyncClient(server.url) as c:
            run, evs = await run_to_end(c, "echo", "hello")
            types = [e.type for e in evs]
            assert types.count("run.finished") == 1 and evs[-1].status == "done"
            fa = await c.final_answer(run.thread_id)
            assert fa.content == "You said: hello"
            msg = (await c.get_run(run.id)).messages[-1]
            assert [p.type for p in msg.parts] == ["reasoning", "tool", "text"]
            assert msg.parts[1].output == {"found": 1} and msg.parts[1].status == "done"

    asyncio.run(main())


def test_events_emitted_during_an_append_are_coalesced(server):
    n = 2000

    async def chatty(run: Run, s: Session):
        for i in range(n):
            await s.text(f"{i} ")  # never waits for the server

    async def main():
        async with serving(server.url, {"chatty": chatty}), AsyncClient(server.url) as c:
            run, evs = await run_to_end(c, "chatty")
            deltas = [e.delta for e in evs if e.type == "text.delta"]
            assert deltas == [f"{i} " for i in range(n)]
            return run

    run = asyncio.run(main())
    appends = requests_in_log(server.log.read_text(), "POST", f"/v1/runs/{run.id}/events")
    print(f"{n} text deltas in {appends} appends")
    assert appends <= 10, appends  # one request per token would be 2000


def test_input_and_a_heartbeat_while_waiting(start_server):
    server = start_server("--lease-ttl", "3s")  # the wait outlasts the lease: only heartbeats keep it

    async def asker(run: Run, s: Session):
        tone = await s.ask({"prompt": "Which tone?"})
        await s.text(f"In a {tone} tone.")

    async def main():
        async with serving(server.url, {"asker": asker}), AsyncClient(server.url) as c:
            th = await c.create_thread()
            while True:
                try:
                    run = await c.create_run(th.id, "hi", agent="asker")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            async for ev in c.follow(run.id):
                if ev.type == "run.waiting":
                    await asyncio.sleep(4)  # more than the lease TTL
                    await c.submit_input(run.id, "dry")
            fa = await c.final_answer(th.id)
            assert fa.status == "done" and fa.content == "In a dry tone."

    asyncio.run(main())


def test_cancel_stops_the_agent_and_ends_the_run_cancelled(server):
    stopped = asyncio.Event

    async def slow(run: Run, s: Session):
        try:
            for i in range(10_000):
                await s.text(f"{i} ")
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            slow.cancelled = True  # type: ignore[attr-defined]
            raise

    async def main():
        async with serving(server.url, {"slow": slow}), AsyncClient(server.url) as c:
            th = await c.create_thread()
            while True:
                try:
                    run = await c.create_run(th.id, "go", agent="slow")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            n = 0
            async for ev in c.follow(run.id):
                if ev.type == "text.delta":
                    n += 1
                    if n == 5:
                        await c.cancel(run.id)
            rs = await c.get_run(run.id)
            assert rs.run.status == "cancelled"
            assert getattr(slow, "cancelled", False)
            ends = [e for e in log_events(server.url, th.id) if e["type"] == "run.finished"]
            assert len(ends) == 1 and ends[0]["status"] == "cancelled"

    asyncio.run(main())


def test_an_agent_that_raises_ends_the_run_error(server):
    async def broken(run: Run, s: Session):
        await s.text("partial ")
        raise RuntimeError("secret provider detail")

    async def main():
        async with serving(server.url, {"broken": broken}), AsyncClient(server.url) as c:
            run, evs = await run_to_end(c, "broken")
            end = evs[-1]
            assert end.type == "run.finished" and end.status == "error"
            assert end.error_info.code == "agent_error" and "secret" not in end.error_info.message
            assert [e.delta for e in evs if e.type == "text.delta"] == ["partial "]

    asyncio.run(main())


@pytest.mark.parametrize("then", ["returns", "raises"])
def test_a_refused_last_append_ends_the_run_error(start_server, then):
    """The server refused the agent's last events (a tool's output over the body limit) and the agent
    then returned (or raised): the run ends ``error`` (``agent_error``) at once, those events not in
    the log. The refusal came out of the finish, which gave up: the run stayed running until its
    lease expired and ended ``aborted`` (``worker_lost``)."""
    server = start_server("--lease-ttl", "3s")

    async def big(run: Run, s: Session):
        await s.text("Fetched. ")
        await s.tool_call("fetch", {"url": "https://example.com"}, "x" * (5 << 20))
        if then == "raises":
            raise RuntimeError("gave up")

    async def main():
        async with serving(server.url, {"big": big}), AsyncClient(server.url) as c:
            run, evs = await run_to_end(c, "big")
            ends = [e for e in evs if e.type == "run.finished"]
            assert len(ends) == 1 and ends[0].status == "error", ends
            assert ends[0].error_info.code == "agent_error"
            assert "tool.finished" not in [e.type for e in evs]
            msg = (await c.get_run(run.id)).messages[-1]
            assert msg.status == "error" and msg.text == "Fetched. "
            assert [(p.name, p.status) for p in msg.parts if p.type == "tool"] == [("fetch", "error")]

    asyncio.run(main())


def test_an_agent_that_finishes_itself_is_not_finished_twice(server):
    async def polite(run: Run, s: Session):
        await s.text("bye")
        await s.finish("error", error={"code": "refused", "message": "Nope."})

    async def main():
        async with serving(server.url, {"polite": polite}), AsyncClient(server.url) as c:
            run, evs = await run_to_end(c, "polite")
            assert [e.type for e in evs].count("run.finished") == 1
            assert evs[-1].error_info.code == "refused"

    asyncio.run(main())


def test_runs_go_concurrently(server):
    started = 0
    all_in = asyncio.Event

    async def gate(run: Run, s: Session):
        nonlocal started
        started += 1
        while started < 3:
            await asyncio.sleep(0.01)  # returns only once three runs run at once
        await s.text("ok")

    async def main():
        async with serving(server.url, {"gate": gate}, concurrency=3), AsyncClient(server.url) as c:
            results = await asyncio.wait_for(asyncio.gather(*(run_to_end(c, "gate") for _ in range(3))), 30)
            assert all(evs[-1].status == "done" for _, evs in results)

    asyncio.run(main())


class HoldFirstAppend(Faults):
    """Faults whose first append waits for ``release`` before it goes to the server."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events") and request.method == "POST" and not self.holding.is_set():
            self.holding.set()
            await self.release.wait()
        return await super().handle_async_request(request)


def test_flush_after_the_lease_is_lost_raises_lease_lost(start_server):
    """Events still queued when the lease is lost are never appended: a flush after that (in the
    agent's clean-up, say) raises ``lease_lost``, as an emit does; it must not return as if they
    were committed."""
    server = start_server("--lease-ttl", "3s")  # a heartbeat after 1s
    faults = HoldFirstAppend()
    faults.inject(("POST", "/heartbeat", "lease_lost"))
    got: dict[str, object] = {}

    async def agent(run: Run, s: Session):
        await s.text("committed ")
        await faults.holding.wait()  # its append is in flight
        await s.text("queued")  # waits for the next append
        try:
            await asyncio.sleep(30)  # the heartbeat's 410 stops the agent
        except asyncio.CancelledError:
            faults.release.set()
            try:
                await s.flush()
                got["flush"] = "returned"
            except TetherError as e:
                got["flush"] = e.code
            raise

    async def main():
        http = httpx.AsyncClient(transport=faults)
        client = AsyncClient(server.url, http_client=http)
        async with serving(server.url, {"lossy": agent}, client=client), AsyncClient(server.url) as c:
            th = await c.create_thread()
            for _ in range(100):
                try:
                    await c.create_run(th.id, "hi", agent="lossy")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            for _ in range(600):
                if "flush" in got:
                    break
                await asyncio.sleep(0.05)
        await client.aclose()
        await http.aclose()
        assert got.get("flush") == "lease_lost"
        assert "queued" not in [e.get("delta") for e in log_events(server.url, th.id)]

    asyncio.run(main())


def test_an_event_json_cannot_hold_raises_at_its_emit(server):
    """A value JSON has no form for (a datetime, NaN) raises at the emit that carries it, with
    nothing of that call sent, and the run goes on; a string with half a character (a lone
    surrogate) is sent as U+FFFD. Both used to kill the worker's sender: the run hung, running,
    its lease renewed for ever."""
    raised: list[str] = []

    async def agent(run: Run, s: Session):
        await s.text("a ")
        await s.tool_started("c1", "clock")
        for bad in ({"now": datetime.datetime(2020, 1, 1)}, {"ratio": float("nan")}):
            try:
                await s.emit({"type": "custom", "name": "ok"}, {"type": "tool.finished", "message_id": s._message, "call_id": "c1", "output": bad})
            except (TypeError, ValueError) as e:
                raised.append(type(e).__name__)
        await s.tool_finished("c1", output={"now": "2020-01-01"})
        await s.text("b \ud83d c")

    async def main():
        async with serving(server.url, {"strict": agent}), AsyncClient(server.url) as c:
            run, evs = await asyncio.wait_for(run_to_end(c, "strict"), 30)
            assert evs[-1].type == "run.finished" and evs[-1].status == "done"
            assert raised == ["TypeError", "ValueError"]
            assert [e.type for e in evs].count("custom") == 0
            assert (await c.final_answer(run.thread_id)).content == "a b \ufffd c"

    asyncio.run(main())


def test_a_character_split_across_two_deltas_is_sent_whole(server):
    """A model's stream that splits a character of two UTF-16 halves across two deltas (a JSON
    ``"\\ud83d"`` then ``"\\ude00"``): the two halves are joined, in text, reasoning and a tool's
    input, not sent as two U+FFFD. A half whose other never comes is sent when its stream ends,
    as U+FFFD: nothing is lost."""

    async def agent(run: Run, s: Session):
        await s.reasoning("think \ud83e")
        await s.reasoning("\udd14 done")
        cid = s.new_id("call")
        await s.tool_started(cid, "echo")
        await s.tool_delta(cid, '{"q":"\ud83d')
        await s.tool_delta(cid, '\udc4d"}')
        await s.tool_finished(cid, output=None)
        await s.text("smile \ud83d")
        await s.text("\ude00")
        await s.text(" and a half \ud83d")

    async def main():
        async with serving(server.url, {"halves": agent}), AsyncClient(server.url) as c:
            run, evs = await asyncio.wait_for(run_to_end(c, "halves"), 30)
            assert evs[-1].type == "run.finished" and evs[-1].status == "done"
            msg = (await c.get_run(run.id)).messages[-1]
            assert [p.type for p in msg.parts] == ["reasoning", "tool", "text"]
            assert msg.parts[0].text == "think \U0001f914 done"
            assert msg.parts[1].input == {"q": "\U0001f44d"}
            assert msg.parts[2].text == "smile \U0001f600 and a half \ufffd"
            deltas = [e.delta for e in evs if e.type in ("text.delta", "reasoning.delta", "tool.delta")]
            assert not any("\ufffd" in d for d in deltas[:-1]), deltas

    asyncio.run(main())


class ClaimTimes(Faults):
    """Faults that note when each claim is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.claims: list[float] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/workers/claim":
            self.claims.append(time.monotonic())
        return await super().handle_async_request(request)


def test_a_refused_claim_waits_out_retry_after(server):
    """A claim answered 429 (the server's too-many-long-polls answer) or 503 with ``Retry-After`` is
    sent again no sooner than it says (up to max_backoff), as the client's calls and appends are."""
    faults = ClaimTimes()
    faults.inject(("POST", "/workers/claim", "limited"))

    async def echo(run: Run, s: Session):
        await s.text("ok")

    async def main():
        http = httpx.AsyncClient(transport=faults)
        client = AsyncClient(server.url, http_client=http, min_backoff=0.001, max_backoff=5)
        async with serving(server.url, {"echo": echo}, client=client), AsyncClient(server.url) as c:
            run, evs = await asyncio.wait_for(run_to_end(c, "echo"), 30)
            assert evs[-1].status == "done"
        await client.aclose()
        await http.aclose()
        assert len(faults.claims) >= 2 and faults.claims[1] - faults.claims[0] >= 1.0

    asyncio.run(main())


class Appends(HoldFirstAppend):
    """HoldFirstAppend that keeps the events of every append sent, one list per request."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[list[dict]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events") and request.method == "POST":
            self.bodies.append(json.loads(request.content))
        return await super().handle_async_request(request)


def test_the_events_of_one_emit_go_in_one_append(server):
    """Session.emit's events are appended atomically with each other, also when the queue before
    them fills most of a batch (1,000 events): the batch ends before them. It ended at 1,000 events,
    so a pair went in two appends, the second of which could be refused alone."""
    faults = Appends()

    async def agent(run: Run, s: Session):
        await s.custom("first")
        await faults.holding.wait()  # the first append is in flight: the rest queue
        for i in range(999):
            await s.custom(f"e{i}")
        await s.emit({"type": "custom", "name": "pair-a"}, {"type": "custom", "name": "pair-b"})
        faults.release.set()

    async def main():
        http = httpx.AsyncClient(transport=faults)
        client = AsyncClient(server.url, http_client=http)
        async with serving(server.url, {"pairs": agent}, client=client), AsyncClient(server.url) as c:
            run, evs = await asyncio.wait_for(run_to_end(c, "pairs"), 30)
            assert evs[-1].status == "done"
        await client.aclose()
        await http.aclose()
        names = [[ev.get("name") for ev in body] for body in faults.bodies]
        holding = [i for i, body in enumerate(names) if "pair-a" in body or "pair-b" in body]
        assert len(holding) == 1, [len(b) for b in names]
        assert sum(len(b) for b in names) == 1 + 999 + 2 + 1  # and run.finished

    asyncio.run(main())


def test_stop_before_run_makes_run_return(server):
    """``stop()`` called before ``run()`` (a signal that came while the program was still setting
    up): run returns without claiming, as it would had stop come a moment later. It ran for ever."""

    async def agent(run: Run, s: Session):
        yield "never"

    async def main():
        w = Worker(server.url, {"idle": agent}, id="py-early-stop", claim_wait=1)
        w.stop()
        await asyncio.wait_for(w.run(), 30)
        assert w.claimed == 0

    asyncio.run(main())


def test_a_worker_runs_again_after_it_stopped(server):
    """A worker that made its own client serves again after a stop, in the same event loop and in a
    new one (``run_forever`` twice, as after a restart of the program's main loop). Its second run
    used the client the first had closed, and failed at its first claim."""

    async def echo(run: Run, s: Session):
        yield "again: " + s.prompt

    w = Worker(server.url, {"again": echo}, id="py-again", claim_wait=1)

    async def serve_one(c: AsyncClient, prompt: str) -> None:
        task = asyncio.create_task(w.run())
        ran = asyncio.create_task(run_to_end(c, "again", prompt))
        await asyncio.wait({task, ran}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            ran.cancel()
            task.result()  # the worker's error
            raise AssertionError("the worker returned before its run ended")
        _, evs = await ran
        assert evs[-1].type == "run.finished" and evs[-1].status == "done"
        w.stop()
        await asyncio.wait_for(task, 30)

    async def twice_in_one_loop():
        async with AsyncClient(server.url) as c:
            await serve_one(c, "one")
            await serve_one(c, "two")

    async def once_more():
        async with AsyncClient(server.url) as c:
            await serve_one(c, "three")

    asyncio.run(twice_in_one_loop())
    asyncio.run(once_more())  # a new event loop, as run_forever makes
    assert w.claimed == 3
