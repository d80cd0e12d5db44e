"""The package installs with pip, from its folder and from a built wheel, and the README's quick start and agent run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

from helpers import wait_for
from tether import Client, TetherError

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "python"


def quick_start() -> str:
    """The first Python block under "## Quick start" in python/README.md."""
    readme = (PKG / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block in the quick start"
    return m.group(1)


def test_the_readmes_show_the_same_quick_start():
    """The repository's README shows the quick start too: the same code, which the test below runs."""
    root = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", root, re.S)
    assert quick_start() in blocks


def fresh_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def pip(py: Path, *args: str) -> None:
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], check=True)


def test_pip_install_and_the_quick_start(server, tmp_path):
    py = fresh_venv(tmp_path / "venv")
    pip(py, str(PKG))
    code = quick_start().replace("http://127.0.0.1:8080", server.url)
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1].startswith("done ") and lines[-1].endswith(" characters"), out.stdout
    assert lines[0].startswith("Here is what I found about"), out.stdout


def test_built_wheel_installs_typed(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(PKG)], check=True, capture_output=True)
    wheels = list(dist.glob("tether_client-*.whl"))
    assert len(wheels) == 1, wheels
    py = fresh_venv(tmp_path / "venv")
    pip(py, str(wheels[0]))
    check = "import tether, pathlib; p = pathlib.Path(tether.__file__).parent; assert (p / 'py.typed').exists(); print(tether.__version__, sorted(tether.__all__)[:3])"
    out = subprocess.run([str(py), "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def own_agent() -> str:
    """The Python block under "## Your own agent" in python/README.md."""
    section = (PKG / "README.md").read_text().split("## Your own agent", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "no python block under Your own agent"
    return m.group(1)


def test_the_readmes_own_agent(server, tmp_path):
    """The README's agent, as written, serves the run its next line starts (tether run --agent echo "hello")."""
    code = own_agent().replace("http://127.0.0.1:8080", server.url)
    (tmp_path / "agent.py").write_text(code)
    w = subprocess.Popen([sys.executable, str(tmp_path / "agent.py")], env={**os.environ, "PYTHONPATH": str(PKG)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with Client(server.url) as c:
            th = c.create_thread()

            def create():
                try:
                    return c.create_run(th.id, "hello", agent="echo")
                except TetherError:
                    return None  # not known until the worker's first claim

            run = wait_for(create, what="the worker's claim")
            list(c.follow(run.id))
            fa = c.final_answer(th.id)
            assert (fa.status, fa.content) == ("done", "You said: hello")
            tool = c.get_run(run.id).messages[-1].parts[1]
            assert (tool.name, tool.output) == ("lookup", {"results": 0})
    finally:
        w.kill()
        w.wait()
