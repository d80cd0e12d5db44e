"""The sync and asyncio clients against the real server."""

from __future__ import annotations

import asyncio

import pytest

from helpers import log_events
from tether import OFFSET_START, AsyncClient, Client, Event, Snapshot, TetherError

QUICK = {"demo": {"tokens": 30, "delay_ms": 2}}


def test_threads_runs_and_final_answer(server):
    with Client(server.url) as c:
        th = c.create_thread("t1", metadata={"title": "first"})
        assert th.id == "t1" and th.metadata == {"title": "first"}
        assert c.create_thread("t1", metadata={"title": "first"}).id == "t1"  # same again: the same thread
        with pytest.raises(TetherError) as e:
            c.create_thread("t1", metadata={"title": "other"})
        assert e.value.code == "conflict" and e.value.status == 409

        run = c.create_run("t1", "hello", metadata=QUICK)
        assert run.agent == "demo" and run.thread_id == "t1"
        events = list(c.follow(run.id))
        assert events[0].type == "run.created" and events[-1].type == "run.finished" and events[-1].status == "done"
        text = "".join(e.delta or "" for e in events if e.type == "text.delta")
        fa = c.final_answer("t1")
        assert fa.complete and fa.status == "done" and fa.content == text and text.endswith(".")

        snap = c.snapshot("t1")
        assert snap.thread.status == "idle" and snap.run(run.id).status == "done"
        assert [m.role for m in snap.messages] == ["user", "assistant"] and snap.messages[1].text == text
        assert [t.id for t in c.threads()] == ["t1"]
        c.delete_thread("t1")
        with pytest.raises(TetherError) as e:
            c.snapshot("t1")
        assert e.value.code == "not_found"


def test_an_idempotency_key_starts_one_run(server):
    with Client(server.url) as c:
        c.create_thread("t1")
        a = c.create_run("t1", "hi", metadata=QUICK, idempotency_key="k1")
        b = c.create_run("t1", "hi again", metadata=QUICK, idempotency_key="k1")
        assert a.id == b.id
        assert sum(1 for e in log_events(server.url, "t1") if e["type"] == "run.created") == 1


def test_input_finds_the_open_request(server):
    with Client(server.url) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "why?", metadata={"demo": {"tokens": 10, "delay_ms": 1, "ask": True}})
        for ev in c.follow(run.id):
            if ev.type == "run.waiting":
                assert ev.request is not None and ev.request.payload["prompt"]
                r = c.submit_input(run.id, "brevity")  # no request_id: the client looks it up
                assert r.status in ("running", "waiting")
        fa = c.final_answer(th.id)
        assert fa.status == "done" and "brevity" in fa.content
        with pytest.raises(TetherError) as e:
            c.submit_input(run.id, "again")
        assert e.value.code == "conflict"


def test_cancel(server):
    with Client(server.url) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "long", metadata={"demo": {"tokens": 500, "delay_ms": 20}})
        seen = []
        for ev in c.follow(run.id):
            seen.append(ev.type)
            if ev.type == "text.delta" and seen.count("text.delta") == 3:
                c.cancel(run.id)
        assert seen[-1] == "run.finished" and "run.cancel_requested" in seen
        assert c.get_run(run.id).run.status == "cancelled"


def test_subscribe_starts_with_a_snapshot_and_resumes_from_its_cursor(server):
    with Client(server.url) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "one", metadata=QUICK)
        list(c.follow(run.id))
        states = []
        sub = c.subscribe(th.id, on_state=lambda s, cur: states.append(s))
        first = next(sub)
        assert isinstance(first, Snapshot) and first.offset == first.thread.last_offset
        run2 = c.create_run(th.id, "two", metadata=QUICK)
        got = []
        for u in sub:
            assert isinstance(u, Event) and u.offset > first.offset
            got.append(u)
            if u.type == "run.finished":
                break
        sub.close()
        assert got[0].type == "run.created" and got[0].run.id == run2.id
        assert states[:2] == ["connecting", "open"] and states[-1] == "closed"


def test_a_refused_subscription_raises(server):
    with Client(server.url) as c:
        with pytest.raises(TetherError) as e:
            next(c.subscribe("nope"))
        assert e.value.code == "not_found"


def test_async_client(server):
    async def main():
        async with AsyncClient(server.url) as c:
            th = await c.create_thread()
            run = await c.create_run(th.id, "async hello", metadata=QUICK)
            text = ""
            async for ev in c.follow(run.id, after=OFFSET_START):
                if ev.type == "text.delta":
                    text += ev.delta
            fa = await c.final_answer(th.id, run_id=run.id)
            assert fa.content == text and fa.complete
            assert [t.id async for t in c.threads()] == [th.id]
            page = await c.list_threads(status="idle", limit=1)
            assert [t.id for t in page.threads] == [th.id] and page.next_cursor is None

    asyncio.run(main())


def test_declared_agents(start_server):
    server = start_server("--agents", "configured")
    with Client(server.url) as c:
        c.create_thread("t1")
        with pytest.raises(TetherError) as e:
            c.create_run("t1", "hi", agent="mine")
        assert e.value.code == "bad_request"  # unknown: no worker asked, nobody declared it
        a = c.declare_agent("mine")
        assert (a.name, a.declared) == ("mine", "api")
        c.create_run("t1", "hi", agent="mine", multitask="enqueue")
        c.create_run("t1", "hi", agent="configured", multitask="enqueue")
        agents = {a.name: a for a in c.list_agents()}
        assert agents["demo"].in_process and agents["configured"].declared == "config" and agents["mine"].declared == "api"
        c.forget_agent("mine")
        assert "mine" not in {a.name for a in c.list_agents()}
