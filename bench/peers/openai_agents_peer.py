"""OpenAI Agents SDK: an `Agent` driven by a custom `Model` that replays our scripts.

Tracing is disabled (the SDK would otherwise export spans over the network). Fan-out runs one
sub-agent per task with `asyncio.gather` inside a `fork` tool, as with Pydantic AI. Tool schemas
are the `FunctionTool.params_json_schema` the model receives. The SDK's default strict schemas
reject `dict[str, str]` parameters, so tools with one are built with `strict_mode=False`, as
its error message advises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Runner,
    UserError,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage
from pydantic import BaseModel

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
    "fanout": "sub-agents run with asyncio.gather inside a `fork` tool (handoffs are sequential)",
    "tokens": "tools with a dict[str, str] parameter need strict_mode=False",
}
set_tracing_disabled(True)
MODEL_OUTPUT = frozenset({"function_call", "assistant"})


class ScriptedModel(Model):
    """Replies from a ScriptBook; sleeps `latency` per call; records requests if asked."""

    def __init__(
        self,
        book: ScriptBook,
        latency: float = 0.0,
        clock: StepClock | None = None,
        requests: list[Request] | None = None,
    ) -> None:
        self.book = book
        self.latency = latency
        self.clock = clock
        self.requests = requests

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        began = self.clock.tick() if self.clock else 0.0
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        items = [i if isinstance(i, Mapping) else i.model_dump() for i in items]
        if self.requests is not None:
            self.requests.append(_request(system_instructions, items, tools))
        index = _replies(items)
        turn = self.book.turn(_first_prompt(items), index)
        if self.clock:
            self.clock.done(began)
        if self.latency:
            await asyncio.sleep(self.latency)
        output = [
            function_call(name, args, call_id=f"call_{index}_{k}")
            for k, (name, args) in enumerate(ScriptBook.calls(turn))
        ]
        if turn.get("content"):
            output.insert(0, assistant_message(turn["content"], item_id=f"msg_{index}"))
        inputs, outputs = REPORTED_USAGE
        usage = Usage(requests=1, input_tokens=inputs, output_tokens=outputs)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


def _kind(item: Mapping[str, Any]) -> str:
    return "assistant" if item.get("role") == "assistant" else str(item.get("type", ""))


def _replies(items: Sequence[Mapping[str, Any]]) -> int:
    """How many model replies the input holds: runs of output items (calls, assistant text)."""
    kinds = [_kind(i) in MODEL_OUTPUT for i in items]
    return sum(1 for k, now in enumerate(kinds) if now and (k == 0 or not kinds[k - 1]))


def _first_prompt(items: Sequence[Mapping[str, Any]]) -> str:
    return next(str(i["content"]) for i in items if i.get("role") == "user")


@function_tool
async def echo(n: int) -> str:
    """Return the number it was given."""
    return str(n)


@function_tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def loop_overhead(steps: int) -> dict[str, float]:
    clock = StepClock()
    model = ScriptedModel(ScriptBook(loop_bench.script(steps)), clock=clock)
    agent = Agent(name="agent", model=model, tools=[echo])
    began = time.perf_counter()
    result = asyncio.run(Runner.run(agent, "count", max_turns=steps + 1))
    total = time.perf_counter() - began
    if result.final_output != "done":
        raise RuntimeError("the OpenAI Agents loop did not finish its script")
    return clock.figures(total, steps)


class Task(BaseModel):
    id: str
    task: str


def fanout_agent(model: ScriptedModel) -> Agent[Any]:
    worker = Agent(name="worker", model=model, tools=[lookup])

    @function_tool
    async def fork(tasks: list[Task]) -> str:
        """Run tasks as sub-agents, concurrently.

        Args:
            tasks: the tasks; each needs an `id` and a `task`.
        """
        results = await asyncio.gather(*(Runner.run(worker, t.task) for t in tasks))
        return "\n".join(f"{t.id}: {r.final_output}" for t, r in zip(tasks, results, strict=True))

    return Agent(name="planner", model=model, tools=[fork])


def fanout(width: int, latency: float) -> float:
    book = ScriptBook(fanout_bench.script(width), fanout_bench.prompts(width))
    planner = fanout_agent(ScriptedModel(book, latency))
    began = time.perf_counter()
    result = asyncio.run(Runner.run(planner, fanout_bench.TASK))
    elapsed = time.perf_counter() - began
    outputs = [i.output for i in result.new_items if i.type == "tool_call_output_item"]
    if result.final_output != "all parts looked up" or str(outputs[0]).count(": done") != width:
        raise RuntimeError("the OpenAI Agents fan-out did not finish every task")
    return elapsed


def build_tools(catalog_root: Path) -> list[FunctionTool]:
    tools = []
    for name, fn in tool_functions(catalog_root):
        try:
            tools.append(function_tool(fn, name_override=name))
        except UserError:
            tools.append(function_tool(fn, name_override=name, strict_mode=False))
    return tools


def load_catalog(catalog_root: Path) -> int:
    return len(build_tools(catalog_root))


def tool_tokens(catalog_root: Path, job: Job) -> dict[str, Any]:
    tools = build_tools(catalog_root)
    script = job.eager_script()
    requests: list[Request] = []
    model = ScriptedModel(ScriptBook(script), requests=requests)
    agent = Agent(name="planner", model=model, tools=tools, instructions=PLANNER_SYSTEM)
    result = asyncio.run(Runner.run(agent, JOB_TASK))
    if result.final_output != script["*"][-1]["content"]:
        raise RuntimeError("the OpenAI Agents job did not finish its script")
    tokens = request_tokens(requests, [reply_message(turn) for turn in script["*"]])
    return {
        "tools": len(tools),
        "first_request_eager": tokens["first_request"],
        "job_eager": tokens["job"],
    }


def _request(
    system: str | None, items: Sequence[Mapping[str, Any]], tools: Sequence[Any]
) -> Request:
    messages = [Message.system(system)] if system else []
    for item in items:
        message = _message(item)
        if message.tool_calls and messages and messages[-1].tool_calls:
            message = Message.assistant(None, messages.pop().tool_calls + message.tool_calls)
        messages.append(message)
    specs = [spec(t.name, t.description, t.params_json_schema) for t in tools]
    return Request(messages, specs)


def _message(item: Mapping[str, Any]) -> Message:
    kind = _kind(item)
    if kind == "function_call":
        return Message.assistant(None, [call(item["call_id"], item["name"], item["arguments"])])
    if kind == "function_call_output":
        return Message.tool_result(call(item["call_id"], "", "{}"), str(item["output"]))
    content = item.get("content")
    if not isinstance(content, str):
        content = "".join(part.get("text", "") for part in content or ())
    return Message.assistant(content) if kind == "assistant" else Message.user(content)
