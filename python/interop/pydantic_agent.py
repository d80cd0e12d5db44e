"""A pydantic-ai agent served by pydantic-ai's own AG-UI adapter, offline.

The model is a FunctionModel that answers from the last user message:
- "weather ..." calls the tool `lookup` (a normal tool), then answers with
  its result;
- "delete ..." calls the tool `delete_file`, which needs approval: the run
  ends with an interrupt, and the answer to it (resume[]) continues;
- "fail ..." raises in the model: the run ends with RUN_ERROR;
- anything else streams a long answer, word by word, with reasoning first
  ("story N" makes it N words long).
"""

import asyncio
import json

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

WORD_DELAY = 0.02


def story(n: int) -> list[str]:
    """The words of the long answer, the same every time."""
    return [f"word{i}" for i in range(n)]


def last_user_text(messages: list[ModelMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            for p in reversed(m.parts):
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ""


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    last = messages[-1]
    if isinstance(last, ModelRequest):
        return [p for p in last.parts if isinstance(p, ToolReturnPart)]
    return []


async def model(messages: list[ModelMessage], info: AgentInfo):
    prompt = last_user_text(messages)
    returns = tool_returns(messages)
    if prompt.startswith("fail"):
        raise RuntimeError("the model is down")
    if returns:
        r = returns[0]
        for w in f"Done: {r.tool_name} said {r.content}.".split(" "):
            yield w + " "
        return
    if prompt.startswith("weather"):
        yield {0: DeltaToolCall(name="lookup", json_args='{"city": ', tool_call_id="call_lookup_1")}
        yield {0: DeltaToolCall(json_args='"Paris"}')}
        return
    if prompt.startswith("delete"):
        yield {0: DeltaToolCall(name="delete_file", json_args='{"path": "notes.txt"}', tool_call_id="call_delete_1")}
        return
    n = 60
    parts = prompt.split()
    if len(parts) > 1 and parts[0] == "story" and parts[1].isdigit():
        n = int(parts[1])
    words = story(n)
    yield {0: DeltaThinkingPart(content="The user wants ")}
    yield {0: DeltaThinkingPart(content="a story.")}
    for i, w in enumerate(words):
        await asyncio.sleep(WORD_DELAY)
        yield w if i == len(words) - 1 else w + " "


agent = Agent(FunctionModel(stream_function=model), output_type=[str, DeferredToolRequests])


@agent.tool_plain
def lookup(city: str) -> str:
    """Looks up the weather of a city."""
    return f"sunny in {city}"


@agent.tool_plain(requires_approval=True)
def delete_file(path: str) -> str:
    """Deletes a file."""
    return f"deleted {path}"


async def run_agent(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = Starlette(routes=[Route("/agent", run_agent, methods=["POST"])])
