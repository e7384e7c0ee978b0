"""The scripted model: replies keyed by agent, real usage, loud failures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Agent, Message, TokenCounter, ToolContext, tool
from orchestrator.errors import ConfigError, ScriptExhausted
from orchestrator.models import ModelRequest, ScriptedModel, resolve_model
from orchestrator.tasks import ForkExtension, ForkSettings, SubagentRegistry


def request(agent: str, text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message.user(text)], agent=agent)


def test_turns_are_keyed_by_path_then_name_then_fallback() -> None:
    model = ScriptedModel(
        {
            "planner/review": [{"content": "exact"}],
            "review": [{"content": "by name"}],
            "*": [{"content": "fallback"}],
        }
    )
    replies = [
        asyncio.run(model.complete(request(agent))).message.content
        for agent in ("planner/review", "other/review", "someone")
    ]
    assert replies == ["exact", "by name", "fallback"]
    model.assert_all_used()


def test_running_out_names_the_agent_and_the_turn() -> None:
    model = ScriptedModel({"writer": [{"content": "one"}]})
    asyncio.run(model.complete(request("writer")))
    with pytest.raises(ScriptExhausted, match=r"'writer'.*1 turns.*call 2"):
        asyncio.run(model.complete(request("writer")))
    with pytest.raises(ScriptExhausted, match="'reader'"):
        asyncio.run(model.complete(request("reader")))


def test_unused_turns_are_reported() -> None:
    model = ScriptedModel({"a": [{"content": "1"}, {"content": "2"}], "b": [{"content": "3"}]})
    asyncio.run(model.complete(request("a")))
    assert model.unused_turns() == {"a": 1, "b": 1}
    with pytest.raises(AssertionError, match="never used"):
        model.assert_all_used()


def test_tool_calls_get_ids_and_raw_arguments() -> None:
    model = ScriptedModel(
        {
            "*": [
                {
                    "tool_calls": [
                        {"name": "a", "arguments": {"x": 1}},
                        {"name": "b", "arguments": "{oops"},
                    ]
                }
            ]
        }
    )
    reply = asyncio.run(model.complete(request("x"))).message
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("a", '{"x": 1}'), ("b", "{oops")]
    assert len({c.id for c in reply.tool_calls}) == 2


def test_usage_is_counted_like_a_provider_would() -> None:
    model = ScriptedModel({"*": [{"content": "The answer is 42."}]})
    req = request("x", "What is six times seven?")
    response = asyncio.run(model.complete(req))
    counter = TokenCounter()
    assert response.usage is not None
    assert response.usage.input_tokens == counter.count_request(req.messages)
    assert response.usage.output_tokens == counter.count_message(response.message)
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens


def test_requests_are_recorded_as_sent() -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return f"{term}: a fruit"

    model = ScriptedModel(
        {
            "*": [
                {"tool_calls": [{"name": "lookup", "arguments": {"term": "apple"}}]},
                {"content": "done"},
            ]
        }
    )
    Agent(model, [lookup], system="sys").run_sync("define apple")
    first, second = model.requests
    assert [m.role for m in first.messages] == ["system", "user"]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert [t.name for t in first.tools] == ["lookup"]
    assert first.tool_choice == "auto"


def test_with_tools_disabled_a_turn_answers_with_its_text_or_nothing() -> None:
    model = ScriptedModel(
        {
            "*": [
                {"content": "checking", "tool_calls": [{"name": "a"}]},
                {"tool_calls": [{"name": "a"}]},
            ]
        }
    )
    req = ModelRequest(messages=[Message.user("x")], tool_choice="none")
    reply = asyncio.run(model.complete(req)).message
    assert (reply.content, reply.tool_calls) == ("checking", ())
    reply = asyncio.run(model.complete(req)).message
    assert (reply.content, reply.tool_calls) == ("", ())


def test_a_step_cap_lowered_under_a_script_ends_max_steps_not_error() -> None:
    """The script calls tools at the step the cap forces an answer: the run ends as its cap
    ended it, not as an error of the model's."""
    calls = [{"tool_calls": [{"name": "look", "arguments": {}}]}] * 3
    agent = Agent(ScriptedModel({"*": [*calls, {"content": "done"}]}), [look_tool()], max_steps=2)
    result = agent.run_sync("Look.")
    assert result.status == "max_steps", result.error
    assert result.steps == 2


def look_tool() -> Any:
    @tool
    def look() -> str:
        """Look."""
        return "seen"

    return look


def test_script_from_a_yaml_file_and_resolve_model(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("'*':\n  - content: from yaml\n")
    model = resolve_model(f"scripted:{path}")
    assert isinstance(model, ScriptedModel)
    assert Agent(model).run_sync("go").output == "from yaml"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- just a list\n", "maps agent names to lists of turns"),
        ("a: [{contnt: typo}]\n", r"script\['a'\]\[0\]"),
        ("a: [{tool_calls: [{arguments: {}}]}]\n", "needs a 'name'"),
        ("a: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_scripts_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        ScriptedModel(path)


def test_missing_script_file_and_bad_model_strings() -> None:
    with pytest.raises(ConfigError, match="cannot read model script"):
        ScriptedModel("/nonexistent/script.yaml")
    with pytest.raises(ConfigError, match="provider:model"):
        resolve_model("gpt-4o")
    with pytest.raises(ConfigError, match="unknown model provider 'nope'"):
        resolve_model("nope:thing")


async def test_latency_is_simulated() -> None:
    model = ScriptedModel({"*": [{"content": "a"}, {"content": "b"}]}, latency=0.05)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.gather(model.complete(request("x")), model.complete(request("y")))
    assert loop.time() - began >= 0.05


def test_a_json_script_nested_too_deeply_is_an_error_naming_it(tmp_path: Path) -> None:
    from cli_process import orchestrator

    levels = 100_000
    (tmp_path / "deep.json").write_text('{"*": [{"content": ' + "[" * levels + "]" * levels + "}]}")
    (tmp_path / "job.yaml").write_text("name: deep\nmodel: scripted:deep.json\ngoal: Hi.\n")
    done = orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "deep.json" in done.stderr and "nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr


@tool
def whose(ctx: ToolContext[str]) -> str:
    """Say whose run this is."""
    return f"run of {ctx.deps}"


async def test_concurrent_runs_of_one_agent_each_follow_the_whole_script() -> None:
    # Runs interleave (the latencies differ per call): each must still take every turn itself.
    script = {
        "*": [
            {"tool_calls": [{"name": "whose"}], "latency": 0.02},
            {"tool_calls": [{"name": "whose"}], "latency": 0.01},
            {"content": "done", "latency": 0.015},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(model, [whose])
    owners = ["ann", "bo", "cy", "di", "ed"]
    results = await asyncio.gather(*(agent.run("Whose?", deps=owner) for owner in owners))

    assert [r.steps for r in results] == [3] * 5
    assert [r.status for r in results] == ["completed"] * 5
    for owner, result in zip(owners, results, strict=True):
        assert [m.content for m in result.messages if m.role == "tool"] == [f"run of {owner}"] * 2
        ids = [c.id for m in result.messages for c in m.tool_calls]
        assert ids == ["call_1", "call_2"]  # each run numbers its own calls
    assert len({r.run for r in model.requests}) == 5
    model.assert_all_used()


async def test_concurrent_runs_of_one_forking_agent_keep_their_sub_agents_apart() -> None:
    # The sub-agents of a run take their turns in that run: each run's fork gets its own.
    fork = {"name": "fork", "arguments": {"tasks": [{"id": "look", "task": "Look around."}]}}
    script = {
        "planner": [
            {"tool_calls": [fork], "latency": 0.01},
            {"tool_calls": [{"name": "whose"}]},
            {"content": "done"},
        ],
        "planner/look": [{"tool_calls": [{"name": "whose"}], "latency": 0.01}, {"content": "seen"}],
    }
    model = ScriptedModel(script)
    planner = Agent(
        model,
        [whose],
        name="planner",
        extensions=[ForkExtension(SubagentRegistry(), settings=ForkSettings())],
    )
    owners = ["ann", "bo", "cy"]
    results = await asyncio.gather(*(planner.run("Look.", deps=owner) for owner in owners))

    for owner, result in zip(owners, results, strict=True):
        assert (result.status, result.steps) == ("completed", 3)
        [child] = result.children
        assert (child.status, child.output) == ("completed", "seen")
        assert [m.content for m in result.messages if m.name == "whose"] == [f"run of {owner}"]
    by_run: dict[str, list[str]] = {}
    for sent in model.requests:
        by_run.setdefault(sent.run, []).append(sent.agent)
    assert (
        sorted(by_run.values())
        == [["planner", "planner/look", "planner/look", "planner", "planner"]] * 3
    )
    model.assert_all_used()
