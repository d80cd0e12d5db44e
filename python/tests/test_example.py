"""examples/worker-python/worker.py, the package's example worker, as a process against the real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from helpers import wait_for
from tether import Client, TetherError
from test_install import ROOT

FILLER_START = "This answer comes from an external worker."


def test_example_worker(server):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    w = subprocess.Popen(
        [sys.executable, str(ROOT / "examples/worker-python/worker.py"), "--server", server.url, "--delay", "0", "--id", "example"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        with Client(server.url) as c:
            th = c.create_thread()

            def create(prompt: str):
                try:
                    return c.create_run(th.id, prompt, agent="pyecho", multitask="enqueue")
                except TetherError:
                    return None  # not known until the worker's first claim

            run = wait_for(lambda: create("Hello there!"), what="the worker's claim")
            list(c.follow(run.id))
            fa = c.final_answer(th.id)
            assert fa.status == "done" and fa.content.startswith("You said: Hello there. " + FILLER_START)
            tool = c.get_run(run.id).messages[-1].parts[1]
            assert (tool.name, tool.output) == ("lookup", {"words": 2})

            run = c.create_run(th.id, "please ask me", agent="pyecho")
            for ev in c.follow(run.id):
                if ev.type == "run.waiting":
                    assert ev.request.payload == {"question": "Which tone should the answer have?"}
                    c.submit_input(run.id, "dry")
            assert "You asked for a dry tone." in c.final_answer(th.id).content
        w.send_signal(signal.SIGTERM)
        assert w.wait(timeout=20) == 0
        # Its log says what it serves, one line a run, not one per HTTP request.
        log = w.stdout.read().decode() if w.stdout else ""
        assert f"run {run.id}: claimed (attempt 1)" in log, log
        assert "HTTP Request:" not in log, log
    finally:
        if w.poll() is None:
            w.kill()
        out = w.stdout.read().decode() if w.stdout else ""
        print(out[-2000:])
