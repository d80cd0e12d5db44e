#!/usr/bin/env python3
"""How long the Python client's SSE parser takes to read one large frame.

A thread's snapshot (a stream's reset frame) can be megabytes, and the
network hands it over in chunks of tens of KiB. The parser must read such a
frame in time linear in its size. Usage, from the repository's root:

    $(bash scripts/pyenv) bench/python_sse.py [--chunk 65536] [--mib 4 16 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from tether._sse import SSEParser  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunk", type=int, default=64 << 10, help="bytes per chunk fed")
    ap.add_argument("--mib", type=int, nargs="+", default=[4, 16, 32], help="frame sizes, MiB")
    args = ap.parse_args()
    for mib in args.mib:
        frame = b"event: reset\ndata: " + b"x" * (mib << 20) + b"\n\n"
        p = SSEParser()
        t0 = time.perf_counter()
        got = 0
        for i in range(0, len(frame), args.chunk):
            got += len(p.feed(frame[i : i + args.chunk]))
        took = time.perf_counter() - t0
        assert got == 1, got
        print(f"{mib:4d} MiB frame in {args.chunk >> 10} KiB chunks: {took:7.3f} s ({mib / took:6.1f} MiB/s)")


if __name__ == "__main__":
    main()
