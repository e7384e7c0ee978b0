"""The function model: replies written by a Python function, safe under concurrent runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from orchestrator import Agent, AgentInfo, FunctionModel, Message, TokenCounter, ToolCall, tool
from orchestrator.errors import FunctionReplyError
from orchestrator.models import ModelRequest, Reply, tool_call
from orchestrator.models.prices import Price


@tool
def echo(text: str) -> str:
    """Say the text back.

    Args:
        text: what to say
    """
    return f"echo: {text}"


def task_of(messages: Sequence[Message]) -> str:
    return next(m.content or "" for m in messages if m.role == "user")


async def test_concurrent_runs_of_one_agent_each_see_only_their_own_conversation() -> None:
    seen: list[tuple[str, str, int]] = []  # (run, task, tool results so far) per call
    waiting: set[str] = set()
    most_waiting = 0

    async def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        nonlocal most_waiting
        task = task_of(messages)
        results = [m.content or "" for m in messages if m.role == "tool"]
        seen.append((info.run, task, len(results)))
        waiting.add(info.run)
        most_waiting = max(most_waiting, len(waiting))
        # Later tasks answer faster: the runs' calls interleave.
        await asyncio.sleep(0.002 * (10 - int(task.split()[-1])))
        waiting.discard(info.run)
        if len(results) < 2:
            return tool_call("echo", text=f"{task} #{len(results) + 1}")
        return " | ".join(results)

    agent = Agent(FunctionModel(reply), [echo])
    tasks = [f"task {i}" for i in range(5)]
    results = await asyncio.gather(*(agent.run(task) for task in tasks))

    for task, result in zip(tasks, results, strict=True):
        assert result.status == "completed"
        assert result.steps == 3
        assert result.output == f"echo: {task} #1 | echo: {task} #2"
    runs: dict[str, set[str]] = {}
    for run, task, _ in seen:
        runs.setdefault(run, set()).add(task)
    assert len(runs) == 5 and all(len(tasks_seen) == 1 for tasks_seen in runs.values())
    assert sorted(n for _, _, n in seen) == [0] * 5 + [1] * 5 + [2] * 5
    assert most_waiting > 1  # the runs were waiting on the model at the same time


def test_a_sync_function_answers_and_is_told_the_request() -> None:
    infos: list[AgentInfo] = []

    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        infos.append(info)
        return f"{len(messages)} messages for {info.agent}"

    result = Agent(FunctionModel(reply), [echo], name="helper", system="Be brief.").run_sync("Hi.")
    assert (result.status, result.output) == ("completed", "2 messages for helper")
    (info,) = infos
    assert [t.name for t in info.tools] == ["echo"]
    assert info.tool_choice == "auto" and info.output_schema is None
    assert info.run  # the run has an id even without a trace


async def test_an_async_function_calls_tools_and_its_calls_get_ids() -> None:
    async def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        if messages[-1].role == "user":
            return [tool_call("echo", text="a"), tool_call("echo", text="b")]
        if sum(m.role == "tool" for m in messages) == 2:
            return Message.assistant(
                "and one more", [ToolCall(id="mine", name="echo", arguments='{"text": "c"}')]
            )
        return "done"

    result = await Agent(FunctionModel(reply), [echo]).run("Go.")
    assert (result.status, result.output, result.steps) == ("completed", "done", 3)
    ids = [c.id for m in result.messages for c in m.tool_calls]
    assert ids[2] == "mine" and len(set(ids)) == 3
    answers = [(m.tool_call_id, m.content) for m in result.messages if m.role == "tool"]
    assert [content for _, content in answers] == ["echo: a", "echo: b", "echo: c"]
    assert [call_id for call_id, _ in answers] == ids


def request_for(messages: Sequence[Message], **fields: object) -> ModelRequest:
    return ModelRequest(messages=messages, agent="writer", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (42, r"returned 42 \(int\)"),
        (None, r"returned None \(NoneType\)"),
        ([], "an empty list of tool calls"),
        (["text", "more"], r"returned \['text', 'more'\] \(list\)"),
        (Message.user("hi"), "a 'user' message, not the assistant's"),
        (ToolCall(id="c1", name="echo"), "the id 'c1', already used"),
    ],
)
def test_a_reply_no_model_could_give_fails_loudly(reply: object, said: str) -> None:
    model = FunctionModel(lambda messages, info: reply)  # type: ignore[arg-type,return-value]
    earlier = [
        Message.user("hi"),
        Message.assistant(tool_calls=[ToolCall(id="c1", name="echo")]),
        Message.tool_result(ToolCall(id="c1", name="echo"), "echo: "),
    ]
    with pytest.raises(FunctionReplyError, match=said) as raised:
        asyncio.run(model.complete(request_for(earlier)))
    assert "for agent 'writer'" in str(raised.value)
    assert "a reply is text (str), a ToolCall" in str(raised.value)


def test_a_bad_reply_ends_the_run_as_an_error_that_says_what_came_back() -> None:
    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        return {"content": "a dict"}  # type: ignore[return-value]

    result = Agent(FunctionModel(reply), name="writer").run_sync("Write.")
    assert result.status == "error"
    assert result.error is not None
    assert "function model " in result.error and "reply" in result.error
    assert "{'content': 'a dict'} (dict)" in result.error


def test_tool_calls_when_tools_are_disabled_are_refused() -> None:
    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        return tool_call("echo", text="x")

    # A one-step agent asks with tool_choice="none": it must answer.
    result = Agent(FunctionModel(reply), [echo], max_steps=1).run_sync("Go.")
    assert result.status == "error"
    assert "tool_choice='none'" in (result.error or "")


def test_usage_is_counted_with_the_packages_counter() -> None:
    model = FunctionModel(lambda messages, info: "The answer is 42.")
    request = request_for([Message.user("What is six times seven?")])
    response = asyncio.run(model.complete(request))
    counter = TokenCounter()
    assert response.usage is not None
    assert response.usage.input_tokens == counter.count_request(request.messages)
    assert response.usage.output_tokens == counter.count_message(response.message)
    assert response.finish_reason == "stop"


def test_with_tools_under_a_token_budget_the_run_stops_within_it() -> None:
    calls: list[str] = []

    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        calls.append(info.tool_choice if isinstance(info.tool_choice, str) else "forced")
        if info.tool_choice == "none":  # the budget's wrap-up: answer with what there is
            return f"stopped after {sum(m.role == 'tool' for m in messages)} echoes"
        return tool_call("echo", text=f"word{len(calls)} " * 100)

    budget = 6_000
    agent = Agent(FunctionModel(reply), [echo], max_output_tokens=1_500, max_steps=50)
    result = agent.run_sync("Echo until the budget runs out.", max_tokens=budget)

    assert result.status == "budget_exhausted"
    assert result.output.startswith("stopped after ")
    echoes = sum(m.role == "tool" for m in result.messages)
    assert 1 <= echoes < 49  # the budget, not the step cap, ended it
    assert calls[-1] == "none" and set(calls[:-1]) == {"auto"}
    assert 0 < result.usage.total_tokens <= budget
    assert result.steps == len(calls)


def test_a_priced_function_model_is_charged_under_a_money_cap() -> None:
    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        if messages[-1].role == "user":
            return tool_call("echo", text="hello")
        return "done"

    price = Price(input=1.0, output=2.0)
    result = Agent(FunctionModel(reply, price=price), [echo]).run_sync("Go.", max_cost=0.5)
    assert (result.status, result.steps) == ("completed", 2)
    assert result.cost == pytest.approx(price.cost(result.usage))
    # Unpriced, a money cap cannot be kept, and says so.
    unpriced = Agent(FunctionModel(reply), [echo]).run_sync("Go.", max_cost=0.5)
    assert unpriced.status == "error" and "price" in (unpriced.error or "")


class City(BaseModel):
    name: str
    population: int


def test_a_typed_agent_hands_the_function_its_output_schema() -> None:
    def reply(messages: Sequence[Message], info: AgentInfo) -> Reply:
        assert info.output_schema is not None
        assert set(info.output_schema.schema["properties"]) == {"name", "population"}
        return json.dumps({"name": "Lyon", "population": 522_000})

    result = Agent(FunctionModel(reply), output_type=City).run_sync("A French city?")
    assert result.status == "completed"
    assert result.output == City(name="Lyon", population=522_000)
