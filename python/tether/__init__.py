"""Tether's Python client and worker.

Tether keeps every event of an agent run in a durable, ordered log before
any client sees it; clients resume from their last offset with nothing
lost and nothing twice; every run ends with exactly one terminal event.

- :class:`Client` (sync) and :class:`AsyncClient` (asyncio): threads,
  runs, cancel, input, the final answer, snapshots, and subscriptions that
  resume by themselves after any drop.
- :class:`Worker`: serves your agents (async functions or generators) to
  the server: claims, leases, heartbeats, idempotent appends, cancel and
  input, exactly one ``run.finished``, and server restarts waited out.
- ``tether.adapters.pydantic_ai`` and ``tether.adapters.langgraph`` turn a
  framework's stream into Tether events.

Start with ``Client("http://127.0.0.1:8080")``; see README.md.
"""

from .aio import AsyncClient
from .client import DEFAULT_URL, Client
from .errors import StreamError, TetherError
from .session import Finished, Reasoning, Session
from .types import (
    OFFSET_NOW,
    OFFSET_START,
    Agent,
    ErrorInfo,
    Event,
    FinalAnswer,
    Message,
    Part,
    Request,
    Run,
    RunSnapshot,
    Snapshot,
    Thread,
    ThreadPage,
    Update,
)
from .worker import AGENT_ERROR, AgentFunction, Worker

__version__ = "0.1.0"

__all__ = [
    "AGENT_ERROR",
    "Agent",
    "AgentFunction",
    "AsyncClient",
    "Client",
    "DEFAULT_URL",
    "ErrorInfo",
    "Event",
    "FinalAnswer",
    "Finished",
    "Message",
    "OFFSET_NOW",
    "OFFSET_START",
    "Part",
    "Reasoning",
    "Request",
    "Run",
    "RunSnapshot",
    "Session",
    "Snapshot",
    "StreamError",
    "TetherError",
    "Thread",
    "ThreadPage",
    "Update",
    "Worker",
]
