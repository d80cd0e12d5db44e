"""A server killed with kill -9 and restarted under a running Python Worker: zero lost, zero doubled."""

from __future__ import annotations

import asyncio
import time

import httpx

from helpers import log_events
from tether import AsyncClient, Client, Session, Worker
from tether.types import Run

N = 400


def test_kill9_and_restart_under_a_running_worker(server):
    async def counter(run: Run, s: Session):
        for i in range(N):
            await s.text(f"w{i:04d} ")
            await asyncio.sleep(0.01)

    async def main():
        w = Worker(server.url, {"counter": counter}, id="py-kill9", claim_wait=5)
        wt = asyncio.create_task(w.run())
        async with AsyncClient(server.url) as c:
            th = await c.create_thread("k9")
            while True:
                try:
                    run = await c.create_run(th.id, "count", agent="counter")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            # Kill the server once about a quarter of the words are committed.
            while sum(1 for e in log_events(server.url, th.id) if e["type"] == "text.delta") < N // 4:
                await asyncio.sleep(0.05)
            server.kill9()
            killed_at = time.monotonic()
            await asyncio.sleep(1.5)  # the worker keeps emitting; its appends fail and wait
            server.restart()
            print(f"server down {time.monotonic() - killed_at:.1f}s")
            # A client that followed along from the start resumes across the restart too.
            seen = [ev async for ev in c.follow(run.id)]
        w.stop()
        await asyncio.wait_for(wt, 30)
        return th.id, run.id, seen

    thread_id, run_id, seen = asyncio.run(main())
    events = [e for e in log_events(server.url, thread_id) if e.get("run_id") == run_id]
    words = [e["delta"] for e in events if e["type"] == "text.delta"]
    want = [f"w{i:04d} " for i in range(N)]
    lost = len(set(want) - set(words))
    doubled = len(words) - len(set(words))
    log = server.log.read_text()
    retried = sum(1 for line in log.splitlines() if f"path=/v1/runs/{run_id}/events status=204" in line)
    print(f"{len(words)} words committed of {N}: {lost} lost, {doubled} doubled ({retried} appends answered 204: a retry of one committed before the kill)")
    assert lost == 0 and doubled == 0 and words == want
    ends = [e for e in events if e["type"] == "run.finished"]
    assert len(ends) == 1 and ends[0]["status"] == "done"
    assert [e.delta for e in seen if e.type == "text.delta"] == want
    assert Client(server.url).final_answer(thread_id).content == "".join(want)


class LoseAnswers(httpx.AsyncBaseTransport):
    """Delivers appends to the server but loses the answers of some (as a cut connection or a
    server killed right after its commit would): the worker cannot tell whether they landed."""

    def __init__(self, lose: set[int]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lose = lose
        self.appends = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/events"):
            self.appends += 1
            if self.appends in self.lose:
                await resp.aread()
                await resp.aclose()
                raise httpx.ReadError("the answer was lost", request=request)
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_an_append_whose_answer_is_lost_is_sent_again_and_lands_once(server):
    n = 60

    async def slow(run: Run, s: Session):
        for i in range(n):
            await s.text(f"w{i:02d} ")
            await asyncio.sleep(0.005)

    async def main():
        lossy = LoseAnswers({2, 3, 5})
        client = AsyncClient(server.url, http_client=httpx.AsyncClient(transport=lossy), min_backoff=0.01, max_backoff=0.05)
        w = Worker(agents={"slow": slow}, id="py-lossy", claim_wait=5, client=client)
        wt = asyncio.create_task(w.run())
        async with AsyncClient(server.url) as c:
            th = await c.create_thread()
            while True:
                try:
                    run = await c.create_run(th.id, "go", agent="slow")
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            async for _ in c.follow(run.id):
                pass
        w.stop()
        await asyncio.wait_for(wt, 30)
        await client._http.aclose()
        return th.id, run.id

    thread_id, run_id = asyncio.run(main())
    words = [e["delta"] for e in log_events(server.url, thread_id) if e["type"] == "text.delta"]
    assert words == [f"w{i:02d} " for i in range(n)]
    retried = sum(1 for line in server.log.read_text().splitlines() if f"path=/v1/runs/{run_id}/events status=204" in line)
    assert retried == 3, retried  # each lost answer's retry was a duplicate, answered 204, appended nothing
