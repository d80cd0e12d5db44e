#!/usr/bin/env python3
"""How fast one Python Worker streams a run's tokens into Tether, and how well it batches.

Starts `tether serve` (a fresh data directory, 127.0.0.1), serves an agent
that emits N text deltas as fast as it can (no model, no sleeps), follows
the run with the sync client, and prints the committed tokens per second,
the appends the worker made and the events per append. Usage, from the
repository's root:

    go build -o bin/tether ./cmd/tether
    $(bash scripts/pyenv) bench/python_worker.py --tokens 20000 [--bin bin/tether] [--batch 1]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))

from conftest import Server  # noqa: E402
from tether import Client, Session, Worker  # noqa: E402
from tether.types import Run  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=20000)
    p.add_argument("--bin", default=str(ROOT / "bin" / "tether"))
    p.add_argument("--batch", type=int, default=0, help="most events per append (default: the worker's, 1000); 1 is one request per token")
    args = p.parse_args()
    if args.batch:
        import tether._lease

        tether._lease.MAX_BATCH_EVENTS = args.batch
    n = args.tokens

    async def fast(run: Run, s: Session) -> None:
        for i in range(n):
            await s.text(f"t{i} ")

    with tempfile.TemporaryDirectory() as d:
        server = Server(args.bin, Path(d), ["--log-level", "info"]).start()
        w = Worker(server.url, {"fast": fast}, id="bench", claim_wait=5)
        loop = asyncio.new_event_loop()

        def serve() -> None:
            loop.run_until_complete(w.run())
            loop.run_until_complete(loop.shutdown_asyncgens())

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            with Client(server.url) as c:
                th = c.create_thread()
                while True:
                    try:
                        start = time.monotonic()
                        run = c.create_run(th.id, "go", agent="fast")
                        break
                    except Exception:
                        time.sleep(0.05)
                got = sum(1 for e in c.follow(run.id) if e.type == "text.delta")
                took = time.monotonic() - start
            appends = sum(1 for line in server.log.read_text().splitlines() if f"path=/v1/runs/{run.id}/events " in line and "method=POST" in line)
            print(f"{got} tokens in {took:.2f}s: {got / took:,.0f} tokens/s committed and read back; {appends} appends, {got / max(appends, 1):,.0f} events per append")
        finally:
            loop.call_soon_threadsafe(w.stop)
            t.join(30)
            server.stop()


if __name__ == "__main__":
    main()
