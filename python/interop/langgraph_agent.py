"""A LangGraph graph served by ag-ui-langgraph (FastAPI), offline.

Two nodes: `plan` writes the graph state (a list of steps, a counter), then
`answer` calls a fake chat model from langchain_core that streams a fixed
answer token by token, 20 ms apart. The graph keeps its state in a checkpointer, and
ag-ui-langgraph emits it as STATE_SNAPSHOT, with STEP_* per node,
MESSAGES_SNAPSHOT and RAW events. "story N" makes the answer N words long.
"""

import asyncio
from typing import Annotated

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

WORD_DELAY = 0.02


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    steps: list[str]
    count: int


def story(n: int) -> str:
    return " ".join(f"word{i}" for i in range(n))


def last_user_text(state: State) -> str:
    for m in reversed(state["messages"]):
        if m.type == "human":
            return m.content if isinstance(m.content, str) else ""
    return ""


def plan(state: State) -> dict:
    return {"steps": [*state.get("steps", []), "plan"], "count": state.get("count", 0) + 1}


async def answer(state: State) -> dict:
    words = last_user_text(state).split()
    n = int(words[1]) if len(words) > 1 and words[0] == "story" and words[1].isdigit() else 40
    model = GenericFakeChatModel(messages=iter([AIMessage(content=story(n))]))
    # Streamed at a pace, so that a client has time to drop mid-answer.
    reply = None
    async for chunk in model.astream(state["messages"]):
        await asyncio.sleep(WORD_DELAY)
        reply = chunk if reply is None else reply + chunk
    return {"messages": [AIMessage(content=reply.content, id=reply.id)], "steps": [*state.get("steps", []), "answer"]}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("answer", answer)
builder.add_edge(START, "plan")
builder.add_edge("plan", "answer")
builder.add_edge("answer", END)
graph = builder.compile(checkpointer=MemorySaver())

app = FastAPI()
add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="research", graph=graph), "/agent")
