"""LangGraph: the prebuilt ReAct agent on a scripted chat model; fan-out with `Send`.

The chat model is a `BaseChatModel` whose `bind_tools` converts tools with
`convert_to_openai_tool`, exactly as `ChatOpenAI` does, so the schemas it receives are the ones
LangGraph would send. The fan-out is LangGraph's own map-reduce: the planner node's `fork` call
becomes one `Send` per task to a worker node (each a ReAct sub-agent), all in one super-step,
and a collect node hands the results back to the planner as the tool message.
"""

from __future__ import annotations

import asyncio
import operator
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent as _create_react_agent
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict

from orchestrator import Message

from .. import fanout as fanout_bench
from .. import loop_overhead as loop_bench
from ..common import (
    JOB_TASK,
    PLANNER_SYSTEM,
    REPORTED_USAGE,
    Job,
    Request,
    ScriptBook,
    StepClock,
    call,
    reply_message,
    request_tokens,
    spec,
    tool_functions,
)

NOTES = {
    "agent": "langgraph.prebuilt.create_react_agent (deprecated in favour of "
    "langchain.agents.create_agent, which builds the same graph with middleware on top)",
}


def create_react_agent(model: Any, tools: Sequence[Any], **options: Any) -> Any:
    """LangGraph's prebuilt ReAct agent, without its deprecation warning (see NOTES)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _create_react_agent(model, tools, **options)


class ScriptedChatModel(BaseChatModel):
    """Replies from a ScriptBook; sleeps `latency` per call; records requests if asked."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    book: Any
    latency: float = 0.0
    clock: Any = None
    requests: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("the benchmark only calls the model asynchronously")

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        began = self.clock.tick() if self.clock else 0.0
        if self.requests is not None:
            self.requests.append(_request(messages, kwargs.get("tools", [])))
        prompt = next(m.content for m in messages if isinstance(m, HumanMessage))
        index = sum(isinstance(m, AIMessage) for m in messages)
        turn = self.book.turn(prompt, index)
        if self.clock:
            self.clock.done(began)
        if self.latency:
            await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=_ai_message(turn, index))])


def _ai_message(turn: Any, index: int) -> AIMessage:
    calls = [
        {"name": name, "args": args, "id": f"call_{index}_{k}", "type": "tool_call"}
        for k, (name, args) in enumerate(ScriptBook.calls(turn))
    ]
    inputs, outputs = REPORTED_USAGE
    usage = {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}
    return AIMessage(content=turn.get("content") or "", tool_calls=calls, usage_metadata=usage)


@tool
async def echo(n: int) -> str:
    """Return the number it was given."""
    return str(n)


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def loop_overhead(steps: int) -> dict[str, float]:
    clock = StepClock()
    model = ScriptedChatModel(book=ScriptBook(loop_bench.script(steps)), clock=clock)
    agent = create_react_agent(model, [echo])
    began = time.perf_counter()
    result = asyncio.run(
        agent.ainvoke({"messages": [HumanMessage("count")]}, {"recursion_limit": 2 * steps + 5})
    )
    total = time.perf_counter() - began
    if result["messages"][-1].content != "done":
        raise RuntimeError("the LangGraph loop did not finish its script")
    return clock.figures(total, steps)


# --- fan-out: Send to one ReAct sub-agent per task ------------------------------------------


class Task(BaseModel):
    id: str
    task: str


@tool
def fork(tasks: list[Task]) -> str:
    """Run tasks as sub-agents, concurrently.

    Args:
        tasks: the tasks; each needs an `id` and a `task`.
    """
    raise NotImplementedError("the graph runs forks itself, through Send")


class PlanState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    results: Annotated[list[str], operator.add]


class WorkerInput(TypedDict):
    id: str
    task: str


def fanout_graph(model: ScriptedChatModel) -> Any:
    worker_agent = create_react_agent(model, [lookup])
    planner_model = model.bind_tools([fork])

    async def planner(state: PlanState) -> dict[str, Any]:
        return {"messages": [await planner_model.ainvoke(state["messages"])]}

    def route(state: PlanState) -> Any:
        last = state["messages"][-1]
        if not last.tool_calls:
            return END
        return [Send("worker", dict(task)) for task in last.tool_calls[0]["args"]["tasks"]]

    async def worker(task: WorkerInput) -> dict[str, Any]:
        out = await worker_agent.ainvoke({"messages": [HumanMessage(task["task"])]})
        return {"results": [f"{task['id']}: {out['messages'][-1].content}"]}

    def collect(state: PlanState) -> dict[str, Any]:
        call_id = state["messages"][-1].tool_calls[0]["id"]
        return {"messages": [ToolMessage("\n".join(state["results"]), tool_call_id=call_id)]}

    graph = StateGraph(PlanState)
    graph.add_node("planner", planner)
    graph.add_node("worker", worker)
    graph.add_node("collect", collect)
    graph.add_edge(START, "planner")
    graph.add_conditional_edges("planner", route, ["worker", END])
    graph.add_edge("worker", "collect")
    graph.add_edge("collect", "planner")
    return graph.compile()


def fanout(width: int, latency: float) -> float:
    book = ScriptBook(fanout_bench.script(width), fanout_bench.prompts(width))
    graph = fanout_graph(ScriptedChatModel(book=book, latency=latency))
    began = time.perf_counter()
    result = asyncio.run(graph.ainvoke({"messages": [HumanMessage(fanout_bench.TASK)]}))
    elapsed = time.perf_counter() - began
    if len(result["results"]) != width or result["messages"][-1].tool_calls:
        raise RuntimeError("the LangGraph fan-out did not finish every task")
    return elapsed


# --- tool schemas: every tool up front -----------------------------------------------------


def build_tools(catalog_root: Path) -> list[BaseTool]:
    return [
        StructuredTool.from_function(fn, name=name, parse_docstring=True)
        for name, fn in tool_functions(catalog_root)
    ]


def load_catalog(catalog_root: Path) -> int:
    return len(build_tools(catalog_root))


def tool_tokens(catalog_root: Path, job: Job) -> dict[str, Any]:
    tools = build_tools(catalog_root)
    script = job.eager_script()
    requests: list[Request] = []
    model = ScriptedChatModel(book=ScriptBook(script), requests=requests)
    agent = create_react_agent(model, tools, prompt=PLANNER_SYSTEM)
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage(JOB_TASK)]}))
    if result["messages"][-1].content != script["*"][-1]["content"]:
        raise RuntimeError("the LangGraph job did not finish its script")
    replies = [reply_message(turn) for turn in script["*"]]
    return {"tools": len(tools), **_eager(request_tokens(requests, replies))}


def _eager(tokens: dict[str, int]) -> dict[str, int]:
    return {"first_request_eager": tokens["first_request"], "job_eager": tokens["job"]}


def _request(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> Request:
    functions = [t["function"] for t in tools]
    specs = [spec(f["name"], f.get("description"), f["parameters"]) for f in functions]
    return Request([_message(m) for m in messages], specs)


def _message(message: BaseMessage) -> Message:
    text = message.content if isinstance(message.content, str) else str(message.content)
    if isinstance(message, SystemMessage):
        return Message.system(text)
    if isinstance(message, HumanMessage):
        return Message.user(text)
    if isinstance(message, ToolMessage):
        return Message.tool_result(call(message.tool_call_id, message.name or "", "{}"), text)
    calls = [call(c["id"] or "", c["name"], c["args"]) for c in getattr(message, "tool_calls", [])]
    return Message.assistant(text or None, calls)
