"""`@tool`: schemas from the function itself, argument validation, context injection."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from orchestrator import Agent, Permissions, Tool, ToolContext, Toolset, tool
from orchestrator.agent.tools import ArgumentsError, parse_docstring, render_result
from orchestrator.errors import ConfigError
from orchestrator.models import ScriptedModel


class Point(BaseModel):
    x: float
    y: float = 0.0
    title: str = "origin"


class Unit(Enum):
    METRES = "m"
    FEET = "ft"


@tool
def measure(
    start: Point,
    end: Point,
    unit: Unit = Unit.METRES,
    precision: int = Field(2, ge=0, le=6),
    label: str | None = None,
    mode: Literal["straight", "manhattan"] = "straight",
) -> float:
    """Measure the distance between two points.

    Longer explanation that the model does not need.

    Args:
        start: where to begin
        end (Point): where to stop; the
            line may wrap
        unit: the unit of the answer
    Returns:
        the distance
    """
    return 0.0


def test_schema_comes_from_hints_and_docstring() -> None:
    spec = measure.spec
    assert spec.name == "measure"
    assert spec.description == "Measure the distance between two points."
    params = spec.parameters
    assert params["required"] == ["start", "end"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["start"] == {"$ref": "#/$defs/Point", "description": "where to begin"}
    assert props["end"]["description"] == "where to stop; the line may wrap"
    assert props["unit"]["default"] == "m"
    assert params["$defs"]["Unit"]["enum"] == ["m", "ft"]
    assert props["precision"] == {"default": 2, "minimum": 0, "maximum": 6, "type": "integer"}
    assert props["label"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["mode"]["enum"] == ["straight", "manhattan"]
    # pydantic's titles are dropped, but a property that is itself called "title" stays.
    point = params["$defs"]["Point"]
    assert "title" not in point and "title" in point["properties"]


def test_arguments_are_validated_into_python_values() -> None:
    kwargs = measure.parse_arguments('{"start": {"x": 1}, "end": {"x": 4, "y": 4}, "unit": "ft"}')
    assert kwargs["start"] == Point(x=1)
    assert kwargs["unit"] is Unit.FEET
    assert kwargs["precision"] == 2


@pytest.mark.parametrize(
    ("raw", "kind", "fragment"),
    [
        ('{"start": ', "invalid_json", "not valid JSON"),
        ("[1, 2]", "invalid_json", "must be a JSON object"),
        ('{"start": {"x": 1}}', "invalid_arguments", "- end: Field required"),
        ('{"start": {"x": "far"}, "end": {"x": 1}}', "invalid_arguments", "- start.x:"),
        ('{"start": {"x": 1}, "end": {"x": 1}, "precision": 9}', "invalid_arguments", "precision"),
        (
            '{"start": {"x": 1}, "end": {"x": 1}, "speed": 3}',
            "invalid_arguments",
            "speed: unexpected",
        ),
    ],
)
def test_bad_arguments_name_the_problem(raw: str, kind: str, fragment: str) -> None:
    with pytest.raises(ArgumentsError) as caught:
        measure.parse_arguments(raw)
    assert caught.value.kind == kind
    assert fragment in str(caught.value)


def test_empty_arguments_mean_no_arguments() -> None:
    @tool
    def now() -> str:
        """Tell the time."""
        return "noon"

    assert now.parse_arguments("") == {}
    assert now.spec.parameters == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }


def test_options_and_context_injection() -> None:
    @tool(name="whoami", timeout=2.5, exclusive=True, description="Say who calls.")
    async def who(greeting: str, ctx: ToolContext) -> str:
        return f"{greeting}, {ctx.agent}"

    assert (who.name, who.timeout, who.exclusive, who.description) == (
        "whoami",
        2.5,
        True,
        "Say who calls.",
    )
    assert list(who.spec.parameters["properties"]) == ["greeting"]
    result = asyncio.run(
        who.invoke(who.parse_arguments('{"greeting": "hi"}'), ToolContext(agent="planner/a"))
    )
    assert result == "hi, planner/a"


def test_sync_tools_run_off_the_event_loop_thread() -> None:
    import threading

    @tool
    def thread_name() -> str:
        """Name the thread this runs in."""
        return threading.current_thread().name

    assert asyncio.run(thread_name.invoke({}, ToolContext(agent="a"))) != "MainThread"


def test_invalid_names_and_signatures_are_refused() -> None:
    with pytest.raises(ConfigError, match="must match"):
        Tool(lambda: None, name="has space")

    def variadic(*items: str) -> None:
        """Take anything."""

    with pytest.raises(ConfigError, match=r"\*args"):
        Tool(variadic)


def test_renamed_keeps_behaviour_under_a_new_name() -> None:
    renamed = measure.renamed("geo__measure")
    assert renamed.spec.name == "geo__measure" and measure.spec.name == "measure"
    assert renamed.spec.parameters == measure.spec.parameters


def test_toolset_appends_and_keeps_the_first_of_a_name() -> None:
    toolset = Toolset([measure])
    other = measure.renamed("other")
    assert toolset.add(other) is True
    assert toolset.add(measure.renamed("other")) is False
    assert [s.name for s in toolset.specs] == ["measure", "other"]
    assert toolset.get("other") is other


def test_docstring_parsing_handles_google_style() -> None:
    summary, args = parse_docstring(
        "Summary line\ncontinues here.\n\nBody.\n\n"
        "Args:\n    a (int): first\n    b: second\n        more\n"
        "Raises:\n    ValueError: never"
    )
    assert summary == "Summary line continues here."
    assert args == {"a": "first", "b": "second more"}


def test_results_are_rendered_as_text() -> None:
    assert render_result("plain") == "plain"
    assert render_result(None) == ""
    assert render_result({"n": 1, "items": [1, 2]}) == '{"n": 1, "items": [1, 2]}'
    assert render_result(Point(x=1)) == '{"x":1.0,"y":0.0,"title":"origin"}'


@dataclass
class Counts:
    seen: list[str] = field(default_factory=list)


def test_each_extension_keeps_its_own_typed_state_in_the_context() -> None:
    ctx = ToolContext(agent="a")
    counts = ctx.state_of(Counts)
    counts.seen.append("x")
    assert ctx.state_of(Counts) is counts  # made once, on first use
    granted = ctx.granting(Permissions(shell=True))  # one call's wider permissions
    assert granted.permissions.shell and not ctx.permissions.shell
    assert granted.state_of(Counts) is counts  # still the run's state


def test_a_tool_reads_the_runs_permissions_parsed_once() -> None:
    @tool
    def workspace(ctx: ToolContext) -> str:
        """Where the run may write."""
        return str(ctx.permissions.workspace)

    agent = Agent(
        ScriptedModel({"*": [{"tool_calls": [{"name": "workspace"}]}, {"content": "ok"}]}),
        [workspace],
        permissions={"workspace": "somewhere"},  # type: ignore[arg-type]  # a dict is parsed
    )
    assert isinstance(agent.permissions, Permissions)
    result = agent.run_sync("where?")
    [answer] = [m.content or "" for m in result.messages if m.role == "tool"]
    assert answer.endswith("somewhere") and not answer.startswith("{")


def test_a_misspelt_agent_option_fails_in_the_constructor() -> None:
    with pytest.raises(TypeError, match="max_step"):
        Agent(ScriptedModel({"*": []}), max_step=3)  # type: ignore[call-arg]
