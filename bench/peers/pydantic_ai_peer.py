"""Pydantic AI: an `Agent` on a `FunctionModel` that replays our scripts.

Fan-out is done the way its docs suggest for agent delegation: a `fork` tool on the planner
runs one sub-agent per task with `asyncio.gather`. Tool schemas are the `ToolDefinition`s the
model receives (`AgentInfo.function_tools`), as its OpenAI model would send them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

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
    "fanout": "sub-agents run with asyncio.gather inside a `fork` tool (no built-in fan-out)",
}
NO_LIMITS = UsageLimits(request_limit=None)


def scripted_model(
    book: ScriptBook,
    latency: float = 0.0,
    clock: StepClock | None = None,
    requests: list[Request] | None = None,
) -> FunctionModel:
    """A FunctionModel that replies from `book`, reporting usage as a provider would."""

    async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        began = clock.tick() if clock else 0.0
        if requests is not None:
            requests.append(_request(messages, info))
        index = sum(isinstance(m, ModelResponse) for m in messages)
        turn = book.turn(_first_prompt(messages), index)
        if clock:
            clock.done(began)
        if latency:
            await asyncio.sleep(latency)
        parts: list[Any] = [ToolCallPart(n, a) for n, a in ScriptBook.calls(turn)]
        if turn.get("content"):
            parts.insert(0, TextPart(turn["content"]))
        inputs, outputs = REPORTED_USAGE
        return ModelResponse(
            parts=parts, usage=RequestUsage(input_tokens=inputs, output_tokens=outputs)
        )

    return FunctionModel(reply)


def _first_prompt(messages: Sequence[ModelMessage]) -> str:
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart):
                return str(part.content)
    raise RuntimeError("no user prompt in the request")


async def echo(n: int) -> str:
    """Return the number it was given."""
    return str(n)


async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def loop_overhead(steps: int) -> dict[str, float]:
    clock = StepClock()
    agent = Agent(scripted_model(ScriptBook(loop_bench.script(steps)), clock=clock), tools=[echo])
    began = time.perf_counter()
    result = asyncio.run(agent.run("count", usage_limits=NO_LIMITS))
    total = time.perf_counter() - began
    if result.output != "done":
        raise RuntimeError("the Pydantic AI loop did not finish its script")
    return clock.figures(total, steps)


class Task(BaseModel):
    id: str
    task: str


def fanout_agent(model: FunctionModel) -> Agent[None, str]:
    worker = Agent(model, tools=[lookup])

    async def fork(tasks: list[Task]) -> str:
        """Run tasks as sub-agents, concurrently.

        Args:
            tasks: the tasks; each needs an `id` and a `task`.
        """
        results = await asyncio.gather(*(worker.run(t.task) for t in tasks))
        return "\n".join(f"{t.id}: {r.output}" for t, r in zip(tasks, results, strict=True))

    return Agent(model, tools=[fork])


def fanout(width: int, latency: float) -> float:
    book = ScriptBook(fanout_bench.script(width), fanout_bench.prompts(width))
    planner = fanout_agent(scripted_model(book, latency))
    began = time.perf_counter()
    result = asyncio.run(planner.run(fanout_bench.TASK))
    elapsed = time.perf_counter() - began
    returned = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    if result.output != "all parts looked up" or returned[0].content.count(": done") != width:
        raise RuntimeError("the Pydantic AI fan-out did not finish every task")
    return elapsed


def build_tools(catalog_root: Path) -> list[Tool[None]]:
    return [Tool(fn, name=name) for name, fn in tool_functions(catalog_root)]


def load_catalog(catalog_root: Path) -> int:
    return len(build_tools(catalog_root))


def tool_tokens(catalog_root: Path, job: Job) -> dict[str, Any]:
    tools = build_tools(catalog_root)
    script = job.eager_script()
    requests: list[Request] = []
    model = scripted_model(ScriptBook(script), requests=requests)
    agent = Agent(model, tools=tools, instructions=PLANNER_SYSTEM)
    result = asyncio.run(agent.run(JOB_TASK))
    if result.output != script["*"][-1]["content"]:
        raise RuntimeError("the Pydantic AI job did not finish its script")
    tokens = request_tokens(requests, [reply_message(turn) for turn in script["*"]])
    return {
        "tools": len(tools),
        "first_request_eager": tokens["first_request"],
        "job_eager": tokens["job"],
    }


def _request(messages: Sequence[ModelMessage], info: AgentInfo) -> Request:
    converted = [Message.system(info.instructions)] if info.instructions else []
    for message in messages:
        converted.extend(_messages(message))
    tools = [spec(t.name, t.description, t.parameters_json_schema) for t in info.function_tools]
    return Request(converted, tools)


def _messages(message: ModelMessage) -> list[Message]:
    if isinstance(message, ModelResponse):
        text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
        calls = [
            call(p.tool_call_id, p.tool_name, p.args_as_json_str())
            for p in message.parts
            if isinstance(p, ToolCallPart)
        ]
        return [Message.assistant(text or None, calls)]
    converted = []
    for part in message.parts if isinstance(message, ModelRequest) else ():
        if isinstance(part, SystemPromptPart):
            converted.append(Message.system(part.content))
        elif isinstance(part, UserPromptPart):
            converted.append(Message.user(str(part.content)))
        elif isinstance(part, ToolReturnPart):
            tool_call = call(part.tool_call_id, part.tool_name, "{}")
            converted.append(Message.tool_result(tool_call, part.model_response_str()))
    return converted
