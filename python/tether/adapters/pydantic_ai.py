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

Deferred tools ask through the run, which waits (``run.waiting``) and goes on
with the answer, in the same agent run (:func:`run_agent`): a tool with
``requires_approval=True`` asks for an ``approval`` (see :func:`approval` for
the answers it takes), a tool that raises ``CallDeferred(kind="question")``
asks for ``input`` with its question as the prompt, and one that raises
``CallDeferred()`` (a call the app runs) asks with the tool's name as the
kind and its arguments as the payload, the answer being its result.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterable, Optional, Sequence

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.capabilities import HandleDeferredToolCalls
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
            if isinstance(r, ToolReturnPart) and getattr(r, "outcome", "success") == "denied":
                # Not run: a person said no; the content is the reason the model is told.
                await s.tool_finished(cid, error={"code": "denied", "message": _text(r.content)})
            elif isinstance(r, ToolReturnPart) and getattr(r, "outcome", "success") in ("failed", "retried"):
                # Went wrong (ModelRetry, arguments that failed validation, ToolFailed): the
                # content is the feedback the model gets, an error rather than an output.
                await s.tool_finished(cid, error={"message": _text(r.content)})
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


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(_jsonable(content))


_YES = frozenset({"yes", "y", "approve", "approved", "allow", "ok", "true"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "false"})


def approval(answer: Any) -> ToolApproved | ToolDenied:
    """What an answer to an ``approval`` request decides. Only an explicit yes approves: ``true``,
    ``{"approved": true}`` (with ``"args"``, the arguments the tool runs with instead), or one of
    the words yes, y, approve, approved, allow, ok, true as the whole answer (so that a person can
    answer in any text box: the page, ``tether run``). Anything else denies, and the model is told
    why: ``{"approved": false, "message": ...}``'s message, or a person's own words, else
    pydantic-ai's "The tool call was denied."."""
    if answer is True or isinstance(answer, str) and answer.strip().lower() in _YES:
        return ToolApproved()
    if isinstance(answer, dict):
        if answer.get("approved") is True:
            args = answer.get("args")
            return ToolApproved(override_args=args if isinstance(args, dict) else None)
        msg = answer.get("message")
        return ToolDenied(msg) if isinstance(msg, str) and msg.strip() else ToolDenied()
    if isinstance(answer, str) and answer.strip() and answer.strip().lower() not in _NO:
        return ToolDenied(answer.strip())
    return ToolDenied()


class _Asker:
    """Resolves a run's deferred tool calls by asking through the Tether run, one after the other
    (a run has one open request at a time); the calls stay open in the log meanwhile."""

    def __init__(self, stream: _Stream) -> None:
        self.st = stream

    async def __call__(self, _ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        s = self.st.s
        out = DeferredToolResults()
        for call in requests.approvals:
            prompt = f"Allow {_call_text(call)}?"
            out.approvals[call.tool_call_id] = approval(await s.ask(self.payload(call, prompt, requests), kind="approval"))
        for call in requests.calls:
            if requests.kind(call.tool_call_id) == "question":
                out.calls[call.tool_call_id] = await s.ask(self.payload(call, _question(call), requests), kind="input")
            else:
                # A call the app runs: as a client-side tool call (the AI SDK's toolName is the kind).
                out.calls[call.tool_call_id] = await s.ask(_jsonable(call.args_as_dict()), kind=call.tool_name)
        return out

    def payload(self, call: ToolCallPart, prompt: str, requests: DeferredToolRequests) -> dict[str, Any]:
        p: dict[str, Any] = {
            "prompt": prompt,
            "tool": call.tool_name,
            "args": _jsonable(call.args_as_dict()),
            "call_id": self.st.ids.get(call.tool_call_id, call.tool_call_id),
        }
        meta = requests.metadata.get(call.tool_call_id)
        if meta:
            p["metadata"] = _jsonable(meta)
        return p


def _question(call: ToolCallPart) -> str:
    """A question call's words: its one string argument, else the call as it was made."""
    args = call.args_as_dict()
    if len(args) == 1:
        (v,) = args.values()
        if isinstance(v, str) and v.strip():
            return v
    return _call_text(call)


def _call_text(call: ToolCallPart) -> str:
    """The call as it was made: ``name({"arg":...})``."""
    return f"{call.tool_name}({json.dumps(_jsonable(call.args_as_dict()), separators=(',', ':'))})"


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


async def run_agent(
    session: Session, agent: Agent[Any, Any], prompt: Optional[str] = None, *, ask_deferred: bool = True, **kwargs: Any
) -> Any:
    """Runs ``agent`` on the session's prompt (or ``prompt``) with ``agent.run_stream_events``,
    streaming everything into the session, and returns the run's output.

    Deferred tool calls ask through the run (see the module's documentation) unless
    ``ask_deferred`` is false; a ``HandleDeferredToolCalls`` of the agent's own, or in
    ``capabilities``, is asked first.

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
    if ask_deferred:
        kwargs["capabilities"] = [*(kwargs.get("capabilities") or ()), HandleDeferredToolCalls(handler=_Asker(st))]
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
