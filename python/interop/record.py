"""Records what real AG-UI agents stream, for the Go tests that replay it.

    python record.py OUTDIR

Starts the pydantic-ai and ag-ui-langgraph servers of serve.py, sends each
scenario's RunAgentInput, and writes each answer's bytes, exactly as
received, to OUTDIR/<agent>_<scenario>.sse. Re-run it after changing the
pinned versions (python/requirements-test.txt) and commit the files.
"""

import json
import os
import subprocess
import sys

import httpx

HERE = os.path.dirname(os.path.abspath(__file__))


def start(kind: str):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "serve.py"), kind], stdout=subprocess.PIPE, text=True, cwd=HERE)
    line = p.stdout.readline().strip()
    if not line.startswith("listening "):
        p.kill()
        raise SystemExit(f"{kind}: {line!r}")
    return p, line.split(" ", 1)[1]


def body(text: str, run_id: str, messages=None, resume=None, state=None) -> dict:
    b = {
        "threadId": "thread-rec",
        "runId": run_id,
        "protocolVersion": "1.0",
        "state": state if state is not None else {},
        "messages": messages if messages is not None else [{"id": "msg-user-1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        b["resume"] = resume
    return b


def post(url: str, b: dict) -> bytes:
    with httpx.Client(timeout=60) as c:
        r = c.post(url, json=b, headers={"Accept": "text/event-stream"})
        r.raise_for_status()
        return r.content


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    p, url = start("pydantic")
    try:
        for name, text in [("story", "story 5"), ("tool", "weather in Paris"), ("interrupt", "delete notes"), ("error", "fail now")]:
            data = post(url, body(text, "run-" + name))
            open(os.path.join(out, f"pydantic_{name}.sse"), "wb").write(data)
        # The answer to the interrupt: the history holds the call.
        history = [
            {"id": "msg-user-1", "role": "user", "content": "delete notes"},
            {"id": "msg-a-1", "role": "assistant", "content": "", "toolCalls": [
                {"id": "call_delete_1", "type": "function", "function": {"name": "delete_file", "arguments": "{\"path\": \"notes.txt\"}"}}]},
        ]
        resume = [{"interruptId": "int-call_delete_1", "status": "resolved", "payload": {"approved": True}}]
        data = post(url, body("", "run-resume", messages=history, resume=resume))
        open(os.path.join(out, "pydantic_resume.sse"), "wb").write(data)
    finally:
        p.terminate()
        p.wait()
    p, url = start("langgraph")
    try:
        data = post(url, body("story 3", "run-story"))
        open(os.path.join(out, "langgraph_story.sse"), "wb").write(data)
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
