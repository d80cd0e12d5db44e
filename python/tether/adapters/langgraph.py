"""LangGraph → Tether: a graph's ``astream(..., stream_mode="messages")`` as Tether events.

Model tokens become text (and reasoning, from ``reasoning``/``thinking``
content blocks or ``additional_kwargs["reasoning_content"]``), streamed
tool call chunks become ``tool.started``/``tool.delta``, the graph's
``ToolMessage`` results end those calls, and an ``interrupt(value)`` asks
the run's clients (``run.waiting`` with ``value`` as its payload) and
resumes the graph with their answer::

    from tether import Worker
    from tether.adapters.langgraph import serve

    Worker("http://127.0.0.1:8080", {"assistant": serve(graph)}).run_forever()

or, in your own agent function, ``await stream_graph(session, graph, input)``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from ..session import Session
from ..types import Message, Run
from ..worker import AgentFunction


class _Stream:
    def __init__(self, session: Session) -> None:
        self.s = session
        self.calls: dict[tuple[str, int], str] = {}  # (message id, chunk index) → Tether call id
        self.open: dict[str, str] = {}  # Tether call id → name, until its ToolMessage
        self.ids: dict[str, str] = {}  # LangChain tool call id → Tether call id
        self.early: dict[tuple[str, int], str] = {}  # arguments streamed before their call's name

    async def chunk(self, msg: BaseMessage) -> None:
        s = self.s
        if isinstance(msg, ToolMessage):
            rcid = self.running(msg.tool_call_id)
            if rcid is None:
                return
            cid = rcid
            del self.open[cid]
            if getattr(msg, "status", "success") == "error":
                await s.tool_finished(cid, error={"message": _text(msg.content)})
            else:
                await s.tool_finished(cid, output=_output(msg))
            return
        if not isinstance(msg, (AIMessageChunk, AIMessage)):
            return
        rc = (msg.additional_kwargs or {}).get("reasoning_content")
        if isinstance(rc, str):
            await s.reasoning(rc)
        content = msg.content
        if isinstance(content, str):
            await s.text(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, str):
                    await s.text(block)
                elif isinstance(block, dict):
                    kind = block.get("type")
                    if kind == "text":
                        await s.text(str(block.get("text", "")))
                    elif kind in ("reasoning", "thinking"):
                        await s.reasoning(str(block.get("reasoning") or block.get("thinking") or block.get("text") or ""))
        chunks = getattr(msg, "tool_call_chunks", None)
        if chunks:
            for i, tc in enumerate(chunks):
                await self.tool_chunk(msg.id or "", tc.get("index", i) if tc.get("index") is not None else i, tc)
        elif isinstance(msg, AIMessage) and not isinstance(msg, AIMessageChunk):
            for tc in msg.tool_calls:  # a model that did not stream: whole calls
                if self.running(tc.get("id")) is None:
                    cid = self.start(tc.get("id"))
                    self.open[cid] = tc["name"]
                    await s.tool_started(cid, tc["name"])
                    await s.tool_delta(cid, json.dumps(tc.get("args") or {}, separators=(",", ":")))

    def start(self, lc_id: Optional[str]) -> str:
        """The Tether call id of a call starting now: the model's id if Tether takes it (see
        :meth:`Session.call_id`); a model that gives every turn's call the same id gets new ones."""
        cid = self.s.call_id(lc_id)
        if lc_id:
            self.ids[lc_id] = cid
        return cid

    def running(self, lc_id: Optional[str]) -> Optional[str]:
        """The Tether call id of the model's call, while it runs."""
        cid = self.ids.get(lc_id) if lc_id else None
        return cid if cid in self.open else None

    async def tool_chunk(self, mid: str, index: int, tc: Any) -> None:
        key = (mid, index)
        cid = self.calls.get(key)
        args = tc.get("args")
        args = args if isinstance(args, str) else ""
        if cid is None:
            name = tc.get("name")
            if not name:
                # Arguments before the name: held until the call can be started with it.
                self.early[key] = self.early.get(key, "") + args
                return
            cid = self.start(tc.get("id"))
            self.calls[key] = cid
            self.open[cid] = name
            await self.s.tool_started(cid, name)
            args = self.early.pop(key, "") + args
        if args:
            await self.s.tool_delta(cid, args)

    async def close(self) -> None:
        for cid in list(self.open):
            del self.open[cid]
            await self.s.tool_finished(cid)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict)))
    return str(content)


def _output(msg: ToolMessage) -> Any:
    text = _text(msg.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return str(v)


async def stream_graph(session: Session, graph: Any, input: Any, config: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
    """Runs ``graph.astream(input, config, stream_mode=["messages", "updates"])`` and emits the messages it streams.

    A graph that stops at an ``interrupt(value)`` (human in the loop; the graph needs a
    checkpointer) asks for input with ``value`` as the request's payload (:meth:`Session.ask`: the
    run waits) and resumes with ``Command(resume=<the answer>)``, until the graph ends. Several
    interrupts at once are asked one after the other and resumed together, by interrupt id.
    """
    st = _Stream(session)
    while True:
        interrupts: list[Any] = []
        async for item in graph.astream(input, config, stream_mode=["messages", "updates"], **kwargs):
            mode, data = item[-2], item[-1]  # (mode, data), or (namespace, mode, data) with subgraphs
            if mode == "messages":
                msg = data[0] if isinstance(data, tuple) else data
                if isinstance(msg, BaseMessage):
                    await st.chunk(msg)
            elif mode == "updates" and isinstance(data, dict):
                interrupts.extend(data.get("__interrupt__") or ())
        if not interrupts:
            break
        # The graph is paused, not ended: its open tool calls stay open across the wait.
        answers = {i.id: await session.ask(_jsonable(i.value)) for i in interrupts}
        input = Command(resume=answers if len(answers) > 1 else next(iter(answers.values())))
    await st.close()


def messages(conversation: tuple[Message, ...]) -> list[BaseMessage]:
    """A Tether conversation as LangChain messages (user and assistant text)."""
    out: list[BaseMessage] = []
    for m in conversation:
        if m.role == "user" and m.text:
            out.append(HumanMessage(content=m.text))
        elif m.role == "assistant" and m.text:
            out.append(AIMessage(content=m.text))
    return out


def serve(graph: Any, make_input: Optional[Callable[[Run, Session], Any]] = None, config: Optional[dict[str, Any]] = None) -> AgentFunction:
    """A Tether agent function that runs ``graph`` for each run.

    The graph's input is ``{"messages": [...]}`` (a ``MessagesState``
    graph): the thread's conversation, or only the new prompt when the graph
    has a checkpointer (which keeps the rest); or what
    ``make_input(run, session)`` returns. ``config`` defaults to ``{"configurable": {"thread_id": <the
    Tether thread id>}}``, so a checkpointer keeps one LangGraph thread per
    Tether thread.
    """

    async def run(r: Run, session: Session) -> None:
        if make_input is not None:
            inp = make_input(r, session)
        elif getattr(graph, "checkpointer", None):
            inp = {"messages": [HumanMessage(content=session.prompt)]}
        else:
            inp = {"messages": messages(session.messages)}
        cfg = config if config is not None else {"configurable": {"thread_id": r.thread_id}}
        await stream_graph(session, graph, inp, cfg)

    return run
