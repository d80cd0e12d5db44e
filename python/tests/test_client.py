"""The sync and asyncio clients against the real server.

A test with ``connect`` runs twice: with a Client, and with an AsyncClient
(called through helpers.Blocking), as the two share every step but their I/O.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from helpers import Faults, SplittingProxy, log_events
from tether import OFFSET_START, AsyncClient, Client, Event, Snapshot, StreamError, TetherError

QUICK = {"demo": {"tokens": 30, "delay_ms": 2}}


def test_threads_runs_and_final_answer(server, connect):
    with connect(server.url) as c:
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


def test_an_idempotency_key_starts_one_run(server, connect):
    with connect(server.url) as c:
        c.create_thread("t1")
        a = c.create_run("t1", "hi", metadata=QUICK, idempotency_key="k1")
        b = c.create_run("t1", "hi again", metadata=QUICK, idempotency_key="k1")
        assert a.id == b.id
        assert sum(1 for e in log_events(server.url, "t1") if e["type"] == "run.created") == 1


def test_input_finds_the_open_request(server, connect):
    with connect(server.url) as c:
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


def test_cancel(server, connect):
    with connect(server.url) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "long", metadata={"demo": {"tokens": 500, "delay_ms": 20}})
        seen = []
        for ev in c.follow(run.id):
            seen.append(ev.type)
            if ev.type == "text.delta" and seen.count("text.delta") == 3:
                c.cancel(run.id)
        assert seen[-1] == "run.finished" and "run.cancel_requested" in seen
        assert c.get_run(run.id).run.status == "cancelled"


def test_subscribe_starts_with_a_snapshot_and_resumes_from_its_cursor(server, connect):
    with connect(server.url) as c:
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


def test_a_refused_subscription_raises(server, connect):
    with connect(server.url) as c:
        with pytest.raises(TetherError) as e:
            next(c.subscribe("nope"))
        assert e.value.code == "not_found"


def test_calls_are_retried_where_it_is_safe_and_a_run_starts_once(server, connect):
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        c.create_thread("t1")
        # Two answers lost: create_run is sent three times with one key, and starts one run.
        faults.inject(("POST", "/runs", "lose"), ("POST", "/runs", "lose"))
        run = c.create_run("t1", "hi", metadata=QUICK)
        keys = [k for _, p, k in faults.seen if p == "/v1/threads/t1/runs"]
        assert len(keys) == 3 and keys[0] and len(set(keys)) == 1
        assert sum(1 for e in log_events(server.url, "t1") if e["type"] == "run.created") == 1
        # A 503, then a lost answer: a read is sent again until it is answered.
        n = len(faults.seen)
        faults.inject(("GET", "/v1/threads/t1", "busy"), ("GET", "/v1/threads/t1", "lose"))
        assert c.snapshot("t1").run(run.id) is not None
        assert faults.paths(n) == ["/v1/threads/t1"] * 3
        # Five 503s: the first try and four retries, then the error with its code.
        n = len(faults.seen)
        faults.inject(*[("GET", "/v1/runs/" + run.id, "busy")] * 5)
        with pytest.raises(TetherError) as e:
            c.get_run(run.id)
        assert (e.value.code, e.value.status) == ("unavailable", 503) and faults.paths(n) == ["/v1/runs/" + run.id] * 5
        # A thread without an id is named by the client: a lost answer is sent again, and makes one.
        n = len(faults.seen)
        faults.inject(("POST", "/v1/threads", "lose"))
        th = c.create_thread()
        assert faults.paths(n) == ["/v1/threads"] * 2 and th.id.startswith("thr_")
        # An answer that retrying cannot change: at once.
        n = len(faults.seen)
        with pytest.raises(TetherError) as e:
            c.get_run("nope")
        assert e.value.code == "not_found" and faults.paths(n) == ["/v1/runs/nope"]


@pytest.mark.parametrize("fault", ["page", "empty"])
def test_a_2xx_that_is_not_json_is_an_error_with_a_code(server, connect, fault):
    """A 2xx whose body is not the JSON the call expects (a proxy's page, nothing) is a TetherError
    with the clients' code ``protocol`` (the Go and TypeScript clients give the same): never a raw
    decode error, nor a made-up empty thread. Its message does not carry the body."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        c.create_thread("t1")
        for method, path, call in (("GET", "/v1/threads/t1", lambda: c.snapshot("t1")), ("POST", "/v1/threads", lambda: c.create_thread("t1"))):
            n = len(faults.seen)
            faults.inject((method, path, fault))
            with pytest.raises(TetherError) as e:
                call()
            assert (e.value.code, e.value.status) == ("protocol", 200), e.value
            assert "db01" not in str(e.value)
            assert faults.paths(n) == [path]


@pytest.mark.parametrize("status,code", [(405, "protocol"), (418, "protocol"), (422, "protocol"), (404, "not_found"), (413, "too_large")])
def test_an_error_answer_not_of_the_protocol_has_the_code_its_status_means(server, connect, status, code):
    """An error answer without the protocol's error body (a proxy's page) has the code its status
    means, and a 4xx status without a code of its own (405, 418, 422) the clients' ``protocol``, as
    in the Go and TypeScript clients (docs/protocol.md §1): it was ``bad_request``, a refusal by the
    server that it never made. The status is kept on the error; the page is not in its message."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        faults.inject(("POST", "/v1/threads", f"page {status}"))
        with pytest.raises(TetherError) as e:
            c.create_thread("t1")
        assert (e.value.code, e.value.status) == (code, status), e.value
        assert "db01" not in str(e.value)


def test_an_error_keeps_the_answers_retry_after(server, connect):
    """A 429 still answered when the retries are spent raises a TetherError whose ``retry_after``
    is the answer's ``Retry-After`` in seconds, so that the caller can say how long to wait (as the
    Go and TypeScript clients' errors do); an answer without one leaves it None."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        faults.inject(*[("POST", "/v1/threads", "limited 12")] * 10)
        with pytest.raises(TetherError) as e:
            c.create_thread("t1")
        assert (e.value.code, e.value.status, e.value.retry_after) == ("rate_limited", 429, 12.0), e.value
        faults.faults.clear()
        with pytest.raises(TetherError) as e:
            c.get_run("nope")
        assert (e.value.code, e.value.retry_after) == ("not_found", None)


def test_a_stream_that_is_not_an_event_stream_ends_with_code_protocol(server, connect):
    """A subscription answered 200 with a proxy's page instead of an event stream raises a
    StreamError with code ``protocol``, as the Go and TypeScript clients do, without the page."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        c.create_thread("t1")
        faults.inject(("GET", "/events", "page"))
        with pytest.raises(StreamError) as e:
            list(c.subscribe("t1", after=OFFSET_START))
        assert e.value.code == "protocol" and "db01" not in str(e.value)


def test_a_refused_stream_waits_out_retry_after(server, connect):
    """A 429 (the server's too-many-streams answer) or a 503 with ``Retry-After`` is tried again no
    sooner than it says (up to max_backoff), as a REST call is, not after the first short backoff."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=5) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "hi", metadata=QUICK)
        events = list(c.follow(run.id))
        n = len(faults.seen)
        faults.inject(("GET", "/events", "limited"))
        start = time.monotonic()
        assert [e.offset for e in c.follow(run.id)] == [e.offset for e in events]
        assert time.monotonic() - start >= 1.0
        assert faults.paths(n) == [f"/v1/runs/{run.id}/events"] * 2


def test_a_stream_cut_after_connected_asks_the_server_whether_it_ended(server, connect):
    """A run or message stream that ends right after ``connected`` (as a server's did when its run
    had ended before the cursor) is not followed again: the client asks for the run, or the thread."""
    faults = Faults()
    with connect(server.url, transport=faults) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "hi", metadata=QUICK)
        events = list(c.follow(run.id))
        assert events[-1].type == "run.finished"
        n = len(faults.seen)
        faults.inject(("GET", "/events", "cut"))
        assert list(c.follow(run.id, after=events[-1].offset)) == []
        assert faults.paths(n) == [f"/v1/runs/{run.id}/events", f"/v1/runs/{run.id}"]
        mid = next(e.message_id for e in events if e.type == "message.started")
        n = len(faults.seen)
        faults.inject(("GET", "/events", "cut"))
        assert list(c.subscribe(th.id, message_id=mid, after=events[-1].offset)) == []
        assert faults.paths(n) == [f"/v1/threads/{th.id}/events", f"/v1/threads/{th.id}"]


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


def test_declared_agents(start_server, connect):
    server = start_server("--agents", "configured")
    with connect(server.url) as c:
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
        # When it was declared through the API (docs/protocol.md §4, "Agents").
        assert agents["mine"].declared_at == a.declared_at and a.declared_at and agents["demo"].declared_at is None
        c.forget_agent("mine")
        assert "mine" not in {a.name for a in c.list_agents()}


def test_a_character_cut_across_reads_arrives_whole(server, connect):
    """An answer's text with characters of 2, 3 and 4 bytes, read back through a proxy that cuts
    every one of them between two reads: each arrives whole, never as U+FFFD."""
    answer = "é 中文 😀👍🏽"
    with connect(server.url) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "why?", metadata={"demo": {"tokens": 3, "delay_ms": 0, "ask": True}})
        for ev in c.follow(run.id):
            if ev.type == "run.waiting":
                c.submit_input(run.id, answer)
    proxy = SplittingProxy(server.url)
    try:
        with connect(proxy.url) as c:
            events = list(c.follow(run.id))
    finally:
        proxy.close()
    text = "".join(e.delta or "" for e in events if e.type == "text.delta")
    assert f"\u201c{answer}\u201d" in text and "\ufffd" not in text
    assert proxy.split >= len(answer.replace(" ", "")) + 2  # the characters were cut (the quotes too)
    assert events[-1].type == "run.finished" and events[-1].status == "done"
