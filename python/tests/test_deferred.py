"""pydantic-ai's deferred tools, served by a Worker: a call that needs a person's approval, a question
the tool puts to the user, a call the app runs; each asks through the run (``run.waiting``) and the
same agent run goes on with the answer."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import log_events, run_answering
from tether import Client, Event

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, CallDeferred  # noqa: E402
from pydantic_ai.messages import ModelMessage, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel  # noqa: E402

from tether.adapters import pydantic_ai as tpa  # noqa: E402
from tether.adapters.pydantic_ai import approval  # noqa: E402


async def deleting_model(messages: list[ModelMessage], info: AgentInfo):
    """Calls delete_file, then says what the tool answered."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        yield "Tool said: " + "; ".join(str(p.content) for p in returns)
        return
    yield {0: DeltaToolCall(name="delete_file", json_args='{"path":', tool_call_id="call_del")}
    yield {0: DeltaToolCall(json_args='"/tmp/report.txt"}')}


deleting_agent = Agent(FunctionModel(stream_function=deleting_model))
deleted: list[str] = []


@deleting_agent.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    deleted.append(path)
    return f"deleted {path}"


def tool_part(c: Client, run_id: str) -> Any:
    rs = c.get_run(run_id)
    assert rs.run.status == "done", rs.run
    return next(p for p in rs.messages[-1].parts if p.type == "tool")


@pytest.mark.parametrize("answer", [True, "yes", {"approved": True}])
def test_a_call_that_needs_approval_asks_and_runs_once_approved(server, answer):
    """The run waits with an ``approval`` request that names the tool and its arguments; approved,
    the tool runs and the model gets its result, in the same run. The agent run failed before
    (pydantic-ai refuses deferred calls without a handler): the run ended ``error``."""
    deleted.clear()
    thread_id, run_id, evs = run_answering(server.url, {"files": tpa.serve(deleting_agent)}, "Clean up.", lambda _: answer)
    waiting = [e for e in evs if e.type == "run.waiting"]
    assert len(waiting) == 1
    rq = waiting[0].request
    assert rq.kind == "approval"
    assert rq.payload["tool"] == "delete_file" and rq.payload["args"] == {"path": "/tmp/report.txt"}
    assert rq.payload["call_id"] == "call_del" and "delete_file" in rq.payload["prompt"]
    assert deleted == ["/tmp/report.txt"]
    with Client(server.url) as c:
        call = tool_part(c, run_id)
        assert (call.call_id, call.status, call.output) == ("call_del", "done", "deleted /tmp/report.txt")
        assert c.final_answer(thread_id).content == "Tool said: deleted /tmp/report.txt"
    types = [e["type"] for e in log_events(server.url, thread_id)]
    assert types.count("tool.started") == 1 and types.count("run.finished") == 1


@pytest.mark.parametrize(
    "answer, told",
    [
        (False, "The tool call was denied."),
        ("no", "The tool call was denied."),
        ("Not that file, it is the only copy.", "Not that file, it is the only copy."),
        ({"approved": False, "message": "Ask me tomorrow."}, "Ask me tomorrow."),
        ({"unexpected": 1}, "The tool call was denied."),
    ],
)
def test_a_call_denied_never_runs_and_the_model_is_told_why(server, answer, told):
    """Anything but an approval denies: the tool never runs, its part ends ``error`` with the
    reason, which is what the model is told (a person's own words when they gave some)."""
    deleted.clear()
    thread_id, run_id, _ = run_answering(server.url, {"files": tpa.serve(deleting_agent)}, "Clean up.", lambda _: answer)
    assert deleted == []
    with Client(server.url) as c:
        call = tool_part(c, run_id)
        assert call.status == "error" and call.error == {"code": "denied", "message": told}
        assert c.final_answer(thread_id).content == "Tool said: " + told


async def asking_model(messages: list[ModelMessage], info: AgentInfo):
    """Asks the user a question through a tool, and calls a tool the app runs, then repeats the answers."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        yield " / ".join(f"{p.tool_name}={p.content}" for p in returns)
        return
    yield {0: DeltaToolCall(name="ask_user", json_args='{"question":"Which color?"}', tool_call_id="call_q")}
    yield {1: DeltaToolCall(name="locate", json_args='{"precision":"city"}', tool_call_id="call_loc")}


asking_agent = Agent(FunctionModel(stream_function=asking_model))


@asking_agent.tool_plain
def ask_user(question: str) -> str:
    raise CallDeferred(kind="question")


@asking_agent.tool_plain
def locate(precision: str) -> str:
    raise CallDeferred()


def test_questions_and_calls_the_app_runs_are_asked_through_the_run(server):
    """A question (``CallDeferred(kind="question")``) asks for ``input`` with the question as the
    prompt; a call the app runs (``CallDeferred()``) asks with the tool's name as the kind and its
    arguments as the payload, which is how an AI SDK app sees a client-side tool call. Each answer
    is the call's result."""

    def answer(ev: Event) -> Any:
        return {"input": "teal", "locate": {"city": "Lyon"}}[ev.request.kind]

    thread_id, run_id, evs = run_answering(server.url, {"asker": tpa.serve(asking_agent)}, "Hi", answer)
    asked = [(e.request.kind, e.request.payload) for e in evs if e.type == "run.waiting"]
    assert asked == [
        ("input", {"prompt": "Which color?", "tool": "ask_user", "args": {"question": "Which color?"}, "call_id": "call_q"}),
        ("locate", {"precision": "city"}),
    ]
    with Client(server.url) as c:
        parts = [p for p in c.get_run(run_id).messages[-1].parts if p.type == "tool"]
        assert [(p.name, p.status, p.output) for p in parts] == [("ask_user", "done", "teal"), ("locate", "done", {"city": "Lyon"})]
        assert c.final_answer(thread_id).content == "ask_user=teal / locate={'city': 'Lyon'}"


@pytest.mark.parametrize(
    "answer, approved",
    [
        (True, True),
        ("Yes", True),
        (" approve ", True),
        ({"approved": True}, True),
        (False, False),
        ("No", False),
        (None, False),
        (1, False),
        ("yes please delete it", False),
        ({"approved": "true"}, False),
    ],
)
def test_approval_reads_answers_strictly(answer, approved):
    """Only an explicit yes approves: a person's words otherwise are the reason of a denial."""
    from pydantic_ai import ToolApproved, ToolDenied

    got = approval(answer)
    assert isinstance(got, ToolApproved if approved else ToolDenied), got


def test_approval_may_change_the_arguments():
    from pydantic_ai import ToolApproved

    got = approval({"approved": True, "args": {"path": "/tmp/copy.txt"}})
    assert isinstance(got, ToolApproved) and got.override_args == {"path": "/tmp/copy.txt"}
