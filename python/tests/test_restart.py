"""A server killed with kill -9 and restarted under a running Python Worker: zero lost, zero doubled."""

from __future__ import annotations

import asyncio
import time

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
    print(f"{len(words)} words committed of {N}: {lost} lost, {doubled} doubled")
    assert lost == 0 and doubled == 0 and words == want
    ends = [e for e in events if e["type"] == "run.finished"]
    assert len(ends) == 1 and ends[0]["status"] == "done"
    assert [e.delta for e in seen if e.type == "text.delta"] == want
    assert Client(server.url).final_answer(thread_id).content == "".join(want)
