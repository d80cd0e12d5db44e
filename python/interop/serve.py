"""Serves a real AG-UI agent on 127.0.0.1 for Tether's interop tests.

    python serve.py pydantic|langgraph

Binds a free port, prints "listening http://127.0.0.1:PORT/agent" on one
line, then serves until stopped. The agents run offline: pydantic-ai with a
FunctionModel, LangGraph with a fake chat model from langchain_core. What
they answer depends on the last user message (see the two modules).
"""

import socket
import sys

import uvicorn


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "pydantic"
    if kind == "pydantic":
        from pydantic_agent import app
    elif kind == "langgraph":
        from langgraph_agent import app
    else:
        raise SystemExit(f"unknown agent {kind!r}: pydantic or langgraph")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # Listen before saying so: uvicorn listens only once its server has
    # started, and a client told the URL earlier is refused.
    sock.listen(2048)
    print(f"listening http://127.0.0.1:{port}/agent", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
