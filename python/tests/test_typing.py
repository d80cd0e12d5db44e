"""The package is typed (py.typed): mypy --strict passes on it, adapters included."""

import subprocess
import sys

from test_install import PKG


def test_mypy_strict():
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.10", "--no-incremental", "--cache-dir", "/dev/null", str(PKG / "tether")],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
