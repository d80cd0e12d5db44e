#!/usr/bin/env python3
"""A Tether worker in Python, with the standard library only.

It claims runs of one agent (default "pyecho") from a Tether server and
answers each with a fake agent that streams a reasoning line, a tool call
and an answer, one text.delta per word. A prompt that contains "ask" makes
it ask a question first and wait for the answer. See README.md.

    python3 stdlib_worker.py --server http://127.0.0.1:8080
"""
import argparse
import http.client
import itertools
import json
import os
import random
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

FILLER = "This answer comes from an external worker. It claimed the run over HTTP, holds a lease that it renews with every append and with heartbeats, and streams each word as its own event. Every event is committed to the thread's durable log before any client sees it, so a client that drops, refreshes or comes late resumes from its last offset and misses nothing. If the server restarts in the middle, the worker retries its appends with the same producer sequence number until the server is back, and each event lands exactly once."

TRANSPORT_ERRORS = (OSError, http.client.HTTPException)  # URLError, timeouts and resets are OSErrors


class LeaseLost(Exception):
    """The run is no longer ours (lease lost, run finished or gone): abandon it."""


class Cancelled(Exception):
    """A client asked to cancel the run."""


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def backoff(attempt):
    """Exponential backoff with full jitter: 0.2 s doubling, capped at 5 s."""
    return random.uniform(0, min(5.0, 0.2 * 2 ** attempt))


class Server:
    def __init__(self, url, token):
        self.url, self.token = url.rstrip("/"), token

    def call(self, method, path, body=None, headers=None, timeout=60):
        """One request: returns (status, JSON body or None, headers). Transport errors raise."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw, hdrs = resp.status, resp.read(), resp.headers
        except urllib.error.HTTPError as e:  # a non-2xx answer
            status, raw, hdrs = e.code, e.read(), e.headers
        try:
            return status, (json.loads(raw) if raw else None), hdrs
        except ValueError:
            return status, None, hdrs


class Run:
    """One claimed run: appends and heartbeats under its lease."""

    def __init__(self, server, worker_id, claim):
        self.server = server
        self.id = claim["run"]["id"]
        self.token = claim["lease"]["token"]
        self.ttl = claim["lease"]["ttl_ms"] / 1000
        self.offset = claim["offset"]  # of run.started: where following the run starts
        self.epoch = str(max(claim["run"]["attempt"] - 1, 0))
        self.worker_id = worker_id
        self.seq = 0  # Producer-Seq of the next append
        self.renewed = time.monotonic()  # when an answer last renewed the lease

    def post(self, path, body, headers):
        """POST under the lease. Transport errors, 408, 429 and 5xx are retried with the
        same body and headers until another answer comes, or until the lease has
        certainly expired: two TTLs after the last renewal (the server can only have
        renewed it, in an answer we lost, while it was still valid)."""
        for attempt in itertools.count():
            try:
                status, data, _ = self.server.call("POST", path, body, headers, timeout=max(self.ttl / 2, 5))
                if status < 300:
                    if status != 204:  # a duplicate renews nothing
                        self.renewed = time.monotonic()
                    return data or {}
                if status < 500 and status not in (408, 429):
                    err = (data or {}).get("error", {})
                    problem = f"{status} {err.get('code')}: {err.get('message')}"
                    if status in (401, 403, 404, 409, 410):  # the lease or the run is gone
                        raise LeaseLost(problem)
                    raise RuntimeError(problem)  # a bad event: the agent's bug
                problem = f"status {status}"
            except TRANSPORT_ERRORS as e:
                problem = repr(e)
            if time.monotonic() > self.renewed + 2 * self.ttl:
                raise LeaseLost("the lease expired while the server could not be reached")
            delay = backoff(attempt)
            log(f"run {self.id}: {problem}; retrying in {delay:.2f}s")
            time.sleep(delay)

    def append(self, *events, finishing=False):
        # The same Producer-Seq on every retry: if the server committed an append
        # whose answer was lost, the retry is a duplicate (204), not a second copy.
        data = self.post(f"/v1/runs/{self.id}/events", list(events), {
            "Tether-Lease": self.token, "Producer-Id": self.worker_id,
            "Producer-Epoch": self.epoch, "Producer-Seq": str(self.seq)})
        self.seq += 1
        if data.get("cancel_requested") and not finishing:
            raise Cancelled()

    def heartbeat_if_due(self):
        if time.monotonic() - self.renewed > self.ttl / 3:
            data = self.post(f"/v1/runs/{self.id}/heartbeat", None, {"Tether-Lease": self.token})
            if data.get("cancel_requested"):
                raise Cancelled()

    def pause(self, seconds):
        """Sleeps, heartbeating whenever a third of the TTL passed without renewal."""
        end = time.monotonic() + seconds
        while True:
            self.heartbeat_if_due()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.ttl / 6))

    def wait_input(self, request_id):
        """Long-polls the run's events (JSON) for the run.input that answers request_id."""
        after, wait_ms = self.offset, int(min(self.ttl / 3, 25) * 1000)
        while True:
            self.heartbeat_if_due()  # raises LeaseLost once the server is away too long
            q = urllib.parse.urlencode({"after": after, "wait": wait_ms})
            try:
                status, data, _ = self.server.call("GET", f"/v1/runs/{self.id}/events?{q}", timeout=wait_ms / 1000 + 30)
            except TRANSPORT_ERRORS:
                status, data = None, None
            if status != 200 or not data:
                if status in (401, 403, 404, 410):
                    raise LeaseLost(f"following the run: status {status}")
                time.sleep(1)
                continue
            for ev in data["events"]:
                if ev["type"] == "run.input" and ev.get("request_id") == request_id:
                    return ev.get("value")
                if ev["type"] == "run.cancel_requested":
                    raise Cancelled()
                if ev["type"] == "run.finished":
                    raise LeaseLost("the run ended")
            after = data["next_offset"]


def prompt_of(messages):
    """The text of the last user message."""
    for m in reversed(messages):
        if m["role"] == "user":
            return "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text")
    return ""


def answer(run, prompt, delay):
    """The fake agent: one assistant message, then run.finished done."""
    msg, call = run.id + "-m1", run.id + "-m1-lookup"
    run.append({"type": "message.started", "message_id": msg, "role": "assistant"})
    run.append({"type": "reasoning.delta", "message_id": msg,
                "delta": f"The user wrote {len(prompt)} characters; I will look them up, then echo them."})
    run.append({"type": "tool.started", "message_id": msg, "call_id": call, "name": "lookup"},
               {"type": "tool.delta", "message_id": msg, "call_id": call, "delta": json.dumps({"query": prompt})})
    run.pause(delay)
    run.append({"type": "tool.finished", "message_id": msg, "call_id": call,
                "output": {"words": len(prompt.split())}})
    text = "You said: " + prompt.strip().rstrip(".!?") + ". "
    if "ask" in prompt.lower():
        request_id = run.id + "-r1"
        run.append({"type": "run.waiting", "request": {
            "id": request_id, "kind": "question", "payload": {"question": "Which tone should the answer have?"}}})
        tone = run.wait_input(request_id)
        text += f"You asked for a {tone if isinstance(tone, str) else json.dumps(tone)} tone. "
    words = (text + FILLER).split(" ")
    for i, word in enumerate(words):
        run.pause(delay)
        run.append({"type": "text.delta", "message_id": msg, "delta": word if i == len(words) - 1 else word + " "})
    run.append({"type": "message.finished", "message_id": msg, "status": "done"},
               {"type": "run.finished", "status": "done"}, finishing=True)


def work(server, worker_id, claim, delay):
    run = Run(server, worker_id, claim)
    log(f"run {run.id}: claimed (attempt {claim['run']['attempt']})")
    try:
        answer(run, prompt_of(claim["messages"]), delay)
        log(f"run {run.id}: done")
    except Cancelled:
        try:
            run.append({"type": "run.finished", "status": "cancelled"}, finishing=True)
            log(f"run {run.id}: cancelled")
        except LeaseLost as e:
            log(f"run {run.id}: abandoned: {e}")
    except LeaseLost as e:
        log(f"run {run.id}: abandoned: {e}")
    except Exception as e:  # the agent failed: clients get a generic message
        log(f"run {run.id}: agent failed: {e!r}")
        try:
            run.append({"type": "run.finished", "status": "error", "error": {
                "code": "agent_error", "message": "The agent failed."}}, finishing=True)
        except LeaseLost:
            pass


def main():
    p = argparse.ArgumentParser(description="A Tether worker with a fake agent (standard library only).")
    p.add_argument("--server", default=os.environ.get("TETHER_SERVER", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("TETHER_TOKEN", ""))
    p.add_argument("--agent", default="pyecho", help="agent name to claim runs for")
    p.add_argument("--delay", type=float, default=0.05, help="seconds before each streamed word")
    p.add_argument("--id", default=f"{socket.gethostname()}-{os.getpid()}-py", help="worker ID")
    args = p.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM):  # both stop cleanly (SIGINT may start ignored)
        signal.signal(sig, signal.default_int_handler)
    server = Server(args.server, args.token)
    log(f"worker {args.id}: claiming runs of {args.agent!r} from {args.server}")
    attempt = 0
    try:
        while True:
            try:
                status, data, _ = server.call("POST", "/v1/workers/claim", {
                    "worker_id": args.id, "agents": [args.agent], "wait_ms": 30000}, timeout=60)
            except TRANSPORT_ERRORS as e:
                status, data = None, repr(e)
            if status in (200, 204):
                attempt = 0
                if status == 200:
                    work(server, args.id, data, args.delay)
                continue
            if status in (400, 401, 403):
                log(f"the server refused the claim: {data}")
                return 1
            delay = backoff(attempt)
            attempt += 1
            log(f"claim failed ({status or data}); retrying in {delay:.2f}s")
            time.sleep(delay)
    except KeyboardInterrupt:
        # A run in progress is abandoned: the server ends it when its lease expires.
        log("stopping")
        return 0


if __name__ == "__main__":
    sys.exit(main())
