"""Writes whose outcome the client could not learn, against the real server.

``landed``: the server did the write and its answer is a 503 ``unavailable``
(as when a JetStream publish's ack timed out); ``lose``: the server did it
and the connection dropped before the answer. Either way a retry must not
act twice, nor report a failure for a write that was done.
"""

from __future__ import annotations

import httpx
import pytest

from helpers import Faults, log_events, wait_for
from tether import TetherError

ASK = {"demo": {"ask": True, "tool": False, "reasoning": False, "tokens": 3, "delay_ms": 0}}


@pytest.mark.parametrize("fault", ["landed", "lose"])
def test_a_thread_without_an_id_is_made_once(server, connect, fault):
    """The client names the thread (``thr_…``), so the retry is a create-if-absent: one thread.
    Before, the server named it and a 503 was sent again (two threads), or a lost answer raised."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        faults.inject(("POST", "/v1/threads", fault))
        th = c.create_thread(metadata={"k": 1})
        assert th.id.startswith("thr_") and th.metadata == {"k": 1}
        assert [t.id for t in c.list_threads().threads] == [th.id]
        assert faults.paths() == ["/v1/threads", "/v1/threads", "/v1/threads"]


@pytest.mark.parametrize("fault", ["landed", "lose"])
def test_an_answer_that_was_taken_is_not_a_failure(server, connect, fault):
    """The answer is sent again, the same, and the server knows it for the answer it took: the call
    returns the run, and the run got one ``run.input``. Before, a lost answer raised, and a 503 was
    sent again and refused 409 conflict, although the answer was taken."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        th = c.create_thread()
        run = c.create_run(th.id, "hi", metadata=ASK)
        req = wait_for(lambda: c.get_run(run.id).run.request, what="the run waiting")
        faults.inject(("POST", "/input", fault))
        got = c.submit_input(run.id, "streams", request_id=req.id)
        assert got.id == run.id
        assert [e["type"] for e in log_events(server.url, th.id)].count("run.input") == 1
        # Another answer to the request that was answered is still refused.
        with pytest.raises(TetherError) as e:
            c.submit_input(run.id, "other", request_id=req.id)
        assert e.value.code == "conflict"


@pytest.mark.parametrize("fault", ["landed", "lose"])
def test_a_delete_that_was_done_is_not_a_failure(server, connect, fault):
    """A retry that finds no thread after a try whose outcome is unknown returns: the thread is
    gone, as asked. Before, it raised ``not_found``. A delete of no thread, with no failure before,
    still raises ``not_found``."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        c.create_thread("t1")
        faults.inject(("DELETE", "/v1/threads/t1", fault))
        c.delete_thread("t1")
        with pytest.raises(TetherError) as e:
            c.snapshot("t1")
        assert e.value.code == "not_found"
        with pytest.raises(TetherError) as e:
            c.delete_thread("t1")
        assert e.value.code == "not_found"


def test_agents_declared_and_forgotten_once(start_server, connect):
    """Declaring an agent is a PUT (200 for one declared already); forgetting one that was
    forgotten by a try whose answer was lost returns, as a thread's delete does."""
    server = start_server("--token", "admin-token-0123456789")
    faults = Faults()
    with connect(server.url, transport=faults, token="admin-token-0123456789", min_backoff=0.001, max_backoff=0.01) as c:
        faults.inject(("PUT", "/v1/agents/ext", "landed"))
        assert c.declare_agent("ext").name == "ext"
        faults.inject(("DELETE", "/v1/agents/ext", "landed"))
        c.forget_agent("ext")
        assert "ext" not in [a.name for a in c.list_agents()]


def test_a_run_and_a_cancel_act_once(server, connect):
    """Sound before: create_run's one Idempotency-Key for all its tries, and a cancel that changes
    nothing the second time."""
    faults = Faults()
    with connect(server.url, transport=faults, min_backoff=0.001, max_backoff=0.01) as c:
        th = c.create_thread()
        faults.inject(("POST", "/runs", "landed"), ("POST", "/cancel", "landed"))
        run = c.create_run(th.id, "hi", metadata=ASK)
        c.cancel(run.id)
        types = [e["type"] for e in log_events(server.url, th.id)]
        assert types.count("run.created") == 1 and types.count("run.cancel_requested") <= 1
        assert httpx.get(f"{server.url}/v1/runs/{run.id}").json()["run"]["cancel_requested_at"] or "run.finished" in types
