"""Fixtures: the real ``tether serve`` binary, one fresh server (data directory, port) per test.

The binary is ``$TETHER_BIN`` (scripts/test builds it), else built here
with ``go build`` from the repository this folder is in.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import httpx
import pytest

# The package is imported from this checkout (also by the helpers).
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from helpers import Blocking, Faults  # noqa: E402


@pytest.fixture(scope="session")
def tether_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    b = os.environ.get("TETHER_BIN")
    if b:
        return b
    out = tmp_path_factory.mktemp("bin") / "tether"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/tether"], cwd=ROOT, check=True)
    return str(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``tether serve`` process on 127.0.0.1 with its own data directory; kill -9 and restart keep both."""

    def __init__(self, binary: str, data: Path, flags: list[str]) -> None:
        self.binary = binary
        self.data = data
        self.flags = flags
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data / "server.log"
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> "Server":
        env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--addr", f"127.0.0.1:{self.port}", "--data", str(self.data), *self.flags],
                stdout=logf, stderr=logf, env=env,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tether serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError("tether serve did not become ready")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def start_server(tether_bin: str, tmp_path: Path) -> Iterator:
    servers: list[Server] = []

    def start(*flags: str) -> Server:
        data = tmp_path / f"data{len(servers)}"
        data.mkdir()
        s = Server(tether_bin, data, list(flags)).start()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def server(start_server) -> Server:
    return start_server()


@pytest.fixture(params=["sync", "async"])
def connect(request: pytest.FixtureRequest) -> Iterator:
    """Makes a client of either kind, the test running once with each: a Client, or an AsyncClient
    called through helpers.Blocking. A ``transport`` (helpers.Faults) goes under its httpx client."""
    from tether import AsyncClient, Client

    closers: list = []

    def connect(url: str, transport: Optional[Faults] = None, **kw):
        if request.param == "sync":
            http = httpx.Client(transport=transport) if transport else None
            c = Client(url, http_client=http, **kw)
            closers.extend([c.close] + ([http.close] if http else []))
            return c
        ahttp = httpx.AsyncClient(transport=transport) if transport else None
        b = Blocking(AsyncClient(url, http_client=ahttp, **kw), ahttp)
        closers.append(b.close)
        return b

    connect.kind = request.param
    yield connect
    for close in closers:
        close()
