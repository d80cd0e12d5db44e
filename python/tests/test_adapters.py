"""The adapters, driven offline: pydantic-ai's FunctionModel and a scripted LangChain chat model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers import log_events, run_answering
from tether import AsyncClient, Client, Event, Worker

pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AIMessageChunk  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402
from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.messages import ModelMessage, ToolReturnPart, UserPromptPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel  # noqa: E402

from tether.adapters import langgraph as tlg  # noqa: E402
from tether.adapters import pydantic_ai as tpa  # noqa: E402

ANSWER = "The weather in Paris is sunny, with a light breeze from the west."


async def model_stream(messages: list[ModelMessage], info: AgentInfo):
    """A model that thinks, calls the weather tool, then answers word by word."""
    if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
        words = ANSWER.split(" ")
        for i, w in enumerate(words):
            yield w + (" " if i < len(words) - 1 else "")
        return
    yield {0: DeltaThinkingPart(content="The user wants the weather. ")}
    yield {0: DeltaThinkingPart(content="I should call the tool.")}
    yield {1: DeltaToolCall(name="weather", json_args='{"city":', tool_call_id="call_1")}
    yield {1: DeltaToolCall(json_args='"Paris"}')}


weather_agent = Agent(FunctionModel(stream_function=model_stream))


@weather_agent.tool_plain
def weather(city: str) -> dict[str, Any]:
    return {"city": city, "sky": "sunny"}


def serve_and_run(url: str, agents: dict, prompt: str) -> tuple[str, str]:
    thread_id, run_id, _ = run_answering(url, agents, prompt)
    return thread_id, run_id


def read_resuming(c: Client, run_id: str, drops: int) -> tuple[str, int]:
    """Reads a run's text over SSE, cutting the connection `drops` times and resuming from its last offset."""
    text, cursor, resumed = "", "-1", 0
    total = len([1 for _ in c.follow(run_id)])
    per = max(1, total // (drops + 1))
    while True:
        n = 0
        sub = c.subscribe(run_id=run_id, after=cursor)
        finished = False
        for u in sub:
            assert isinstance(u, Event)
            cursor = u.offset
            if u.type == "text.delta":
                text += u.delta
            if u.type == "run.finished":
                finished = True
                break
            n += 1
            if n == per and resumed < drops:
                break
        sub.close()
        if finished:
            return text, resumed
        resumed += 1


def test_pydantic_ai_agent_streams_reasoning_a_tool_call_and_text(server):
    thread_id, run_id = serve_and_run(server.url, {"weather": tpa.serve(weather_agent)}, "What is the weather in Paris?")
    with Client(server.url) as c:
        msg = c.get_run(run_id).messages[-1]
        assert msg.role == "assistant"
        kinds = [p.type for p in msg.parts]
        assert kinds == ["reasoning", "tool", "text"], kinds
        assert msg.parts[0].text == "The user wants the weather. I should call the tool."
        call = msg.parts[1]
        assert (call.name, call.call_id, call.status) == ("weather", "call_1", "done")
        assert call.input == {"city": "Paris"} and call.output == {"city": "Paris", "sky": "sunny"}
        fa = c.final_answer(thread_id)
        assert fa.content == ANSWER and fa.status == "done"

        text, resumed = read_resuming(c, run_id, drops=5)
        assert resumed == 5 and text == fa.content
    types = [e["type"] for e in log_events(server.url, thread_id)]
    assert types.count("run.finished") == 1 and "reasoning.delta" in types and "tool.delta" in types


def run_prompts(server, name: str, agent, prompts) -> None:
    """Serves the pydantic-ai agent as ``name`` with a Worker and runs each prompt in turn on one
    thread, each to its end (a run is made once the worker has asked for the agent)."""

    async def main():
        w = Worker(server.url, {name: tpa.serve(agent)}, id=f"py-{name}", claim_wait=5)
        wt = asyncio.create_task(w.run())
        async with AsyncClient(server.url) as c:
            th = await c.create_thread()
            for prompt in prompts:
                while True:
                    try:
                        run = await c.create_run(th.id, prompt, agent=name)
                        break
                    except Exception:
                        await asyncio.sleep(0.05)
                async for _ in c.follow(run.id):
                    pass
        w.stop()
        await wt

    asyncio.run(main())


def test_pydantic_ai_gets_the_conversation_as_history(server):
    seen: list[int] = []

    async def count_history(messages: list[ModelMessage], info: AgentInfo):
        seen.append(len(messages))
        yield "ok"

    agent = Agent(FunctionModel(stream_function=count_history))

    run_prompts(server, "hist", agent, ("one", "two"))
    assert seen == [1, 3]  # the second run sees the first exchange, then its prompt


class ScriptedChatModel(BaseChatModel):
    """A fake chat model that streams scripted chunks, one turn per call."""

    turns: list[list[AIMessageChunk]]
    i: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _next(self) -> list[AIMessageChunk]:
        t = self.turns[self.i]
        self.i += 1
        return t

    def _generate(self, messages, stop=None, run_manager=None, **kw) -> ChatResult:
        msg: Any = None
        for c in self._next():
            msg = c if msg is None else msg + c
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=msg.content, tool_calls=msg.tool_calls))])

    def _stream(self, messages, stop=None, run_manager=None, **kw):
        for c in self._next():
            yield ChatGenerationChunk(message=c)


@tool
def forecast(city: str) -> str:
    """The forecast of a city."""
    return '{"sky": "sunny"}'


def graph_of(model: ScriptedChatModel):
    """An agent node on model and a ToolNode of forecast, in a loop until the model calls no tool."""
    async def agent(state: MessagesState):
        return {"messages": [await model.ainvoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([forecast]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile()


def weather_graph():
    model = ScriptedChatModel(
        turns=[
            [
                AIMessageChunk(content=[{"type": "reasoning", "reasoning": "Look it up "}]),
                AIMessageChunk(content=[{"type": "reasoning", "reasoning": "first."}]),
                AIMessageChunk(content="", tool_call_chunks=[{"name": "forecast", "args": '{"city":', "id": "lc_1", "index": 0}]),
                AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '"Paris"}', "id": None, "index": 0}]),
            ],
            [AIMessageChunk(content=w + " ") for w in ANSWER.split(" ")[:-1]] + [AIMessageChunk(content=ANSWER.split(" ")[-1])],
        ]
    )
    return graph_of(model)


def test_langgraph_messages_stream(server):
    thread_id, run_id = serve_and_run(server.url, {"graph": tlg.serve(weather_graph())}, "Weather in Paris?")
    with Client(server.url) as c:
        msg = c.get_run(run_id).messages[-1]
        assert [p.type for p in msg.parts] == ["reasoning", "tool", "text"]
        assert msg.parts[0].text == "Look it up first."
        call = msg.parts[1]
        assert (call.name, call.call_id, call.status, call.input, call.output) == ("forecast", "lc_1", "done", {"city": "Paris"}, {"sky": "sunny"})
        assert c.final_answer(thread_id).content == ANSWER


async def same_id_model(messages: list[ModelMessage], info: AgentInfo):
    """A model whose call ids are not Tether ids and repeat in every turn, as some providers' are."""
    turn = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
    if turn == 2:
        yield "Sunny, then rainy."
        return
    city = ["Paris", "Oslo"][turn]
    yield {1: DeltaToolCall(name="weather", json_args='{"city":', tool_call_id="functions.weather:0")}
    yield {1: DeltaToolCall(json_args=f'"{city}"}}')}


same_id_agent = Agent(FunctionModel(stream_function=same_id_model), tools=[weather])


def same_id_graph():
    def turn(city: str) -> list[AIMessageChunk]:
        return [
            AIMessageChunk(content="", tool_call_chunks=[{"name": "forecast", "args": '{"city":', "id": "functions.forecast:0", "index": 0}]),
            AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": f'"{city}"}}', "id": None, "index": 0}]),
        ]

    return graph_of(ScriptedChatModel(turns=[turn("Paris"), turn("Oslo"), [AIMessageChunk(content="Sunny, then rainy.")]]))


@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph"])
def test_model_call_ids_that_are_not_tether_ids_or_repeat(server, framework):
    """A model's tool call id that Tether does not take (``functions.weather:0``: a ``:``), the same
    in every turn, is replaced by an id of the run's own; each call still gets its result. The
    model's id was used as it was: the append was refused and the run ended ``error``."""
    agent = tpa.serve(same_id_agent) if framework == "pydantic-ai" else tlg.serve(same_id_graph())
    thread_id, run_id = serve_and_run(server.url, {"ids": agent}, "Paris, then Oslo?")
    with Client(server.url) as c:
        rs = c.get_run(run_id)
        assert rs.run.status == "done"
        calls = [p for p in rs.messages[-1].parts if p.type == "tool"]
        assert [(p.status, p.input) for p in calls] == [("done", {"city": "Paris"}), ("done", {"city": "Oslo"})]
        assert all(p.output is not None for p in calls) and len({p.call_id for p in calls}) == 2
        assert c.final_answer(thread_id).content == "Sunny, then rainy."


def test_langgraph_tool_arguments_streamed_before_the_name(server):
    """A model whose stream gives a call's first arguments before its name and id: they go into the
    call's input once it starts. They were dropped: the input was the rest, ``ty":"Paris"}``."""
    model = ScriptedChatModel(
        turns=[
            [
                AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '{"ci', "id": None, "index": 0}]),
                AIMessageChunk(content="", tool_call_chunks=[{"name": "forecast", "args": 'ty":', "id": "lc_1", "index": 0}]),
                AIMessageChunk(content="", tool_call_chunks=[{"name": None, "args": '"Paris"}', "id": None, "index": 0}]),
            ],
            [AIMessageChunk(content="Sunny.")],
        ]
    )
    thread_id, run_id = serve_and_run(server.url, {"early": tlg.serve(graph_of(model))}, "Weather in Paris?")
    with Client(server.url) as c:
        call = c.get_run(run_id).messages[-1].parts[0]
        assert (call.name, call.call_id, call.status, call.input, call.output) == ("forecast", "lc_1", "done", {"city": "Paris"}, {"sky": "sunny"})


def test_pydantic_ai_history_keeps_the_prompt_of_a_run_that_failed(server):
    """A run that failed before its answer leaves its prompt without one: the next run's history
    still has it. Every user message at the end of the conversation was taken for the prompt and
    dropped: the model saw only ``two``."""
    seen: list[list[str]] = []

    async def fails_first(messages: list[ModelMessage], info: AgentInfo):
        seen.append([str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart)])
        if len(seen) == 1:
            raise RuntimeError("the provider is down")
        yield "ok"

    agent = Agent(FunctionModel(stream_function=fails_first))

    run_prompts(server, "retry", agent, ("one", "two"))
    assert seen == [["one"], ["one", "two"]]


def test_langgraph_interrupt_asks_and_resumes_with_the_answer(server):
    """A graph that stops at ``interrupt(...)`` makes the run wait for input (``run.waiting`` with
    the interrupt's value as its payload) and resumes with the answer. The graph's stream just ended
    at the interrupt: the run ended ``done`` with no answer and the question never asked."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END
    from langgraph.types import interrupt

    def ask(state: MessagesState):
        tone = interrupt({"prompt": "Which tone?"})
        return {"messages": [AIMessage(content=f"In a {tone} tone.")]}

    g = StateGraph(MessagesState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    graph = g.compile(checkpointer=InMemorySaver())

    thread_id, _, evs = run_answering(server.url, {"asker": tlg.serve(graph)}, "Write it.", lambda _: "dry")
    with Client(server.url) as c:
        fa = c.final_answer(thread_id)
        assert (fa.status, fa.content) == ("done", "In a dry tone.")
    waiting = [e for e in evs if e.type == "run.waiting"]
    assert len(waiting) == 1 and waiting[0].request.payload == {"prompt": "Which tone?"}
    assert [e.type for e in evs].count("run.finished") == 1


async def retrying_model(messages: list[ModelMessage], info: AgentInfo):
    """Calls the tool with arguments that fail validation, then with a city it refuses, then a good one."""
    calls = sum(1 for m in messages for p in m.parts if isinstance(p, ToolReturnPart))
    if calls == 3:
        yield "Sunny in Paris."
        return
    args = ['{"town":1}', '{"city":"Atlantis"}', '{"city":"Paris"}'][calls]
    yield {1: DeltaToolCall(name="checked_weather", json_args=args, tool_call_id=f"try_{calls}")}


retrying_agent = Agent(FunctionModel(stream_function=retrying_model))


@retrying_agent.tool_plain(retries=3)
def checked_weather(city: str) -> str:
    if city == "Atlantis":
        raise ModelRetry("There is no such city.")
    return "sunny"


def test_pydantic_ai_tool_calls_it_retried_end_error(server):
    """A call pydantic-ai answered with a retry (arguments that failed validation, the tool's
    ``ModelRetry``) ends ``error`` with the feedback the model got as its message; a good call ends
    ``done``. Both retried calls ended ``done``, the feedback as their output."""
    thread_id, run_id = serve_and_run(server.url, {"retry": tpa.serve(retrying_agent)}, "Weather?")
    with Client(server.url) as c:
        rs = c.get_run(run_id)
        assert rs.run.status == "done"
        calls = [p for p in rs.messages[-1].parts if p.type == "tool"]
        assert [(p.call_id, p.status) for p in calls] == [("try_0", "error"), ("try_1", "error"), ("try_2", "done")]
        assert calls[1].error == {"message": "There is no such city."} and calls[1].output is None
        assert "city" in calls[0].error["message"] and calls[2].output == "sunny"
