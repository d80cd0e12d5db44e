"""pydantic-ai → Tether: reasoning, text, tool calls and their results, as they stream.

Serve a pydantic-ai agent with a worker::

    from pydantic_ai import Agent
    from tether import Worker
    from tether.adapters.pydantic_ai import serve

    agent = Agent("openai:gpt-4o", tools=[...])
    Worker("http://127.0.0.1:8080", {"assistant": serve(agent)}).run_forever()

or stream any run into a session from your own agent function with
:func:`run_agent` (``agent.run_stream_events``) or :func:`stream_events`
(any iterable of pydantic-ai's ``AgentStreamEvent``, e.g. from ``iter``'s
nodes).
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterable, Optional, Sequence

from pydantic_ai import Agent
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai.run import AgentRunResultEvent

from ..session import Session
from ..types import Message
from ..worker import AgentFunction


def _args_text(args: Any) -> str:
    if args is None:
        return ""
    if isinstance(args, str):
        return args
    return json.dumps(args, separators=(",", ":"))


class _Stream:
    """The state of one agent run's mapping: the tool call each part index stands for."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.calls: dict[int, str] = {}  # part index → Tether call id, in the current model response
        self.open: dict[str, str] = {}  # Tether call id → tool name, until its result
        self.ids: dict[str, str] = {}  # pydantic-ai tool_call_id → Tether call id

    def start(self, tool_call_id: Optional[str]) -> str:
        """The Tether call id of a call starting now: the model's id if Tether takes it (see
        :meth:`Session.call_id`); a model that gives every turn's call the same id gets new ones."""
        cid = self.s.call_id(tool_call_id)
        if tool_call_id:
            self.ids[tool_call_id] = cid
        return cid

    def running(self, tool_call_id: Optional[str]) -> Optional[str]:
        """The Tether call id of the model's call, while it runs."""
        cid = self.ids.get(tool_call_id) if tool_call_id else None
        return cid if cid in self.open else None

    async def event(self, ev: Any) -> None:
        s = self.s
        if isinstance(ev, PartStartEvent):
            p = ev.part
            if isinstance(p, TextPart):
                await s.text(p.content)
            elif isinstance(p, ThinkingPart):
                await s.reasoning(p.content)
            elif isinstance(p, ToolCallPart):
                cid = self.start(p.tool_call_id)
                self.calls[ev.index] = cid
                self.open[cid] = p.tool_name
                await s.tool_started(cid, p.tool_name)
                await s.tool_delta(cid, _args_text(p.args))
        elif isinstance(ev, PartDeltaEvent):
            d = ev.delta
            if isinstance(d, TextPartDelta):
                await s.text(d.content_delta)
            elif isinstance(d, ThinkingPartDelta):
                if d.content_delta:
                    await s.reasoning(d.content_delta)
            elif isinstance(d, ToolCallPartDelta):
                delta_call = self.calls.get(ev.index)
                if delta_call is not None and isinstance(d.args_delta, str):
                    await s.tool_delta(delta_call, d.args_delta)
        elif isinstance(ev, FunctionToolCallEvent):
            # The call as the model finished it: known before its result, so a
            # call the model did not stream still shows as started.
            if self.running(ev.part.tool_call_id) is None:
                cid = self.start(ev.part.tool_call_id)
                self.open[cid] = ev.part.tool_name
                await s.tool_started(cid, ev.part.tool_name)
                await s.tool_delta(cid, _args_text(ev.part.args))
        elif isinstance(ev, FunctionToolResultEvent):
            r = ev.result if hasattr(ev, "result") else ev.part
            rcid = self.running(r.tool_call_id)
            if rcid is None:
                return
            cid = rcid
            del self.open[cid]
            if isinstance(r, ToolReturnPart) and getattr(r, "outcome", "success") in ("failed", "retried"):
                # Went wrong (ModelRetry, arguments that failed validation, ToolFailed): the
                # content is the feedback the model gets, an error rather than an output.
                await s.tool_finished(cid, error={"message": r.content if isinstance(r.content, str) else json.dumps(_jsonable(r.content))})
            elif isinstance(r, ToolReturnPart):
                await s.tool_finished(cid, output=_jsonable(r.content))
            elif isinstance(r, RetryPromptPart):
                await s.tool_finished(cid, error={"message": r.model_response() if hasattr(r, "model_response") else str(r.content)})
        if isinstance(ev, PartStartEvent) and not isinstance(ev.part, ToolCallPart):
            self.calls.pop(ev.index, None)

    async def close(self) -> None:
        """Ends the calls that never got a result (output tools): their input is all they have."""
        for cid in list(self.open):
            del self.open[cid]
            await self.s.tool_finished(cid)


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return str(v)


async def stream_events(session: Session, events: AsyncIterable[Any]) -> None:
    """Emits a pydantic-ai event stream into the session: text, reasoning, tool calls and results.

    Other events (the final result, ``AgentRunResultEvent``) are skipped.
    """
    st = _Stream(session)
    async for ev in events:
        await st.event(ev)
    await st.close()


def history(messages: Sequence[Message]) -> list[ModelMessage]:
    """A Tether conversation as pydantic-ai message history (user and assistant text)."""
    out: list[ModelMessage] = []
    for m in messages:
        text = m.text
        if not text:
            continue
        if m.role == "user":
            out.append(ModelRequest(parts=[UserPromptPart(content=text)]))
        elif m.role == "assistant":
            out.append(ModelResponse(parts=[TextPart(content=text)]))
    return out


async def run_agent(session: Session, agent: Agent[Any, Any], prompt: Optional[str] = None, **kwargs: Any) -> Any:
    """Runs ``agent`` on the session's prompt (or ``prompt``) with ``agent.run_stream_events``,
    streaming everything into the session, and returns the run's output.

    Without ``message_history`` in ``kwargs``, the thread's conversation
    but the prompt is passed as the history: also the prompts of earlier
    runs that got no answer.
    """
    if prompt is None:
        prompt = session.prompt
        if "message_history" not in kwargs:
            msgs = list(session.messages)
            last = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)
            if last is not None:
                del msgs[last]  # the prompt, which goes as the prompt
            kwargs["message_history"] = history(msgs) or None
    st = _Stream(session)
    output: Any = None
    async with agent.run_stream_events(prompt, **kwargs) as events:
        async for ev in events:
            if isinstance(ev, AgentRunResultEvent):
                output = ev.result.output
                continue
            await st.event(ev)
    await st.close()
    return output


def serve(agent: Agent[Any, Any], **kwargs: Any) -> AgentFunction:
    """A Tether agent function that answers each run with ``agent`` (see :func:`run_agent`)."""

    async def run(_run: Any, session: Session) -> None:
        await run_agent(session, agent, **kwargs)

    return run
