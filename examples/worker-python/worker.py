#!/usr/bin/env python3
"""A Tether worker in Python, with the tether-client package (pip install ./python).

It serves one agent (default "pyecho") that answers each run like
stdlib_worker.py does: a reasoning line, a tool call ("lookup"), then the
answer one word per text.delta. A prompt that contains "ask" makes it ask
which tone to use and wait for the answer. The package does the rest:
claims, leases, heartbeats, idempotent appends that survive server
restarts, cancel, and exactly one run.finished. See README.md.

    python3 examples/worker-python/worker.py --server http://127.0.0.1:8080
"""

import argparse
import asyncio
import logging
import os
import socket

from tether import Reasoning, Session, Worker
from tether.types import Run

FILLER = "This answer comes from an external worker. It claimed the run over HTTP, holds a lease that it renews with every append and with heartbeats, and streams each word as its own event. Every event is committed to the thread's durable log before any client sees it, so a client that drops, refreshes or comes late resumes from its last offset and misses nothing. If the server restarts in the middle, the worker retries its appends with the same producer sequence number until the server is back, and each event lands exactly once."


def echo_agent(delay: float):
    async def pyecho(run: Run, session: Session):
        logging.info("run %s: claimed (attempt %d)", run.id, run.attempt)
        prompt = session.prompt
        yield Reasoning(f"The user wrote {len(prompt)} characters; I will look them up, then echo them.")
        await session.tool_call("lookup", {"query": prompt}, {"words": len(prompt.split())})
        text = "You said: " + prompt.strip().rstrip(".!?") + ". "
        if "ask" in prompt.lower():
            tone = await session.ask({"question": "Which tone should the answer have?"}, kind="question")
            text += f"You asked for a {tone} tone. "
        words = (text + FILLER).split(" ")
        for i, word in enumerate(words):
            await asyncio.sleep(delay)
            yield word if i == len(words) - 1 else word + " "

    return pyecho


def main() -> None:
    p = argparse.ArgumentParser(description="A Tether worker with a fake agent (tether-client package).")
    p.add_argument("--server", default=os.environ.get("TETHER_SERVER", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("TETHER_TOKEN") or None)
    p.add_argument("--agent", default="pyecho", help="agent name to claim runs for")
    p.add_argument("--delay", type=float, default=0.05, help="seconds before each streamed word")
    p.add_argument("--id", default=f"{socket.gethostname()}-{os.getpid()}-py", help="worker ID")
    p.add_argument("--concurrency", type=int, default=4, help="runs at once")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per HTTP request
    logging.info("worker %s: claiming runs of %r from %s", args.id, args.agent, args.server)
    Worker(args.server, {args.agent: echo_agent(args.delay)}, token=args.token, id=args.id, concurrency=args.concurrency).run_forever()


if __name__ == "__main__":
    main()
