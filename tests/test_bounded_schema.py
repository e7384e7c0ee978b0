"""Output schemas under attack (agent/bounded_schema.py): a hostile model's `fork` schemas,
hostile schema files in a spec, and answers whose check would never end. Each schema is
compiled once within bounds, or refused saying why; answers are checked in linear-time
patterns, under a work meter, off the event loop. The scripted model plays the hostile
model; `validate` and `run` are real processes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from pydantic import BaseModel, field_validator

from orchestrator import Agent, Orchestrator
from orchestrator.agent import OutputSpec
from orchestrator.agent.bounded_schema import (
    MAX_EXPANDED_SCHEMAS,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
)
from orchestrator.errors import ConfigError
from orchestrator.models import ScriptedModel


def fan_out(levels: int) -> dict[str, Any]:
    """A schema of about 3 kB whose `$defs` each use the next one twice: checking one value
    against it walks 2^levels schemas."""
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/d0"}},
        "required": ["x"],
        "$defs": defs,
    }


FAN_OUT = fan_out(40)
BACKTRACKING = "^(a+)+$"  # Python's `re` takes 2^n steps to refuse "a" * n + "!"
PATTERNED = {
    "type": "object",
    "properties": {"x": {"type": "string", "pattern": BACKTRACKING}},
    "required": ["x"],
}
SELF = {"$ref": "#"}
A_B_A = {
    "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
    "$ref": "#/$defs/a",
}
TREE = {
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/Node",
}


def forking(tasks: list[dict[str, Any]], **children: list[dict[str, Any]]) -> ScriptedModel:
    """A planner that forks `tasks` once, then answers; each child's turns by its task id."""
    return ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Done."},
            ],
            **children,
        }
    )


def fork_observation(model: ScriptedModel) -> str:
    result = Orchestrator(model, builtin=False).run_sync("Go.")
    assert result.status == "completed", result.error
    return next(m.content or "" for m in result.messages if m.role == "tool")


# -- a hostile model's fork ------------------------------------------------------------------


def test_a_forked_schema_whose_defs_fan_out_is_refused_before_the_task_runs() -> None:
    assert len(json.dumps(FAN_OUT)) < 3_000
    model = forking(
        [{"id": "t", "task": "Answer.", "output_schema": FAN_OUT}],
        t=[{"content": json.dumps({"x": "a"})}],
    )

    observation = fork_observation(model)

    assert "The fork was not run" in observation
    assert "tasks[0]: output_schema: the output schema at #/$defs/d" in observation
    assert f"with its $refs followed; at most {MAX_EXPANDED_SCHEMAS:,} are checked" in observation
    assert not [r for r in model.requests if r.agent != "planner"]


def test_a_forked_schemas_backtracking_pattern_is_matched_in_linear_time() -> None:
    """`^(a+)+$` is a pattern RE2 takes: the child's hostile answer is judged at once, and
    sent back; its next answer holds."""
    model = forking(
        [{"id": "t", "task": "Answer.", "output_schema": PATTERNED}],
        t=[{"content": json.dumps({"x": "a" * 40 + "!"})}, {"content": json.dumps({"x": "aaa"})}],
    )

    result = Orchestrator(model, builtin=False).run_sync("Go.")

    assert result.status == "completed"
    assert [child.data for child in result.children] == [{"x": "aaa"}]
    retry = [r for r in model.requests if r.agent == "planner/t"][1]
    note = retry.messages[-1].content or ""
    assert "- x: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' does not match '^(a+)+$'" in note


def test_ref_cycles_that_stay_on_one_value_are_refused_as_an_observation() -> None:
    model = forking(
        [
            {"id": "self", "task": "Answer.", "output_schema": SELF},
            {"id": "loop", "task": "Answer.", "output_schema": A_B_A},
        ]
    )

    observation = fork_observation(model)

    assert "The fork was not run" in observation
    assert (
        "tasks[0]: output_schema: the output schema refers to itself without going into the "
        "answer (# -> #): checking it would never end"
    ) in observation
    assert "(#/$defs/a -> #/$defs/b -> #/$defs/b/allOf/0 -> #/$defs/a)" in observation
    assert not [r for r in model.requests if r.agent != "planner"]


def test_a_pattern_re2_cannot_take_is_refused_as_an_observation() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": r"^(a+)+\1$"}}}
    model = forking([{"id": "t", "task": "Answer.", "output_schema": schema}])

    observation = fork_observation(model)

    assert "The fork was not run" in observation
    assert (
        "the output schema's pattern '^(a+)+\\\\1$' at #/properties/x/pattern is refused: "
        "patterns run on RE2"
    ) in observation


def test_a_recursive_schema_whose_cycle_goes_into_the_answer_checks_a_tree() -> None:
    leaf = {"name": "leaf", "children": [{"name": 3}]}
    model = forking(
        [{"id": "t", "task": "Answer.", "output_schema": TREE}],
        t=[
            {"content": json.dumps({"result": {"name": "root", "children": [leaf]}})},
            {"content": json.dumps({"result": {"name": "root", "children": [{"name": "a"}]}})},
        ],
    )

    result = Orchestrator(model, builtin=False).run_sync("Go.")

    assert [child.data for child in result.children] == [
        {"name": "root", "children": [{"name": "a"}]}
    ]
    retry = [r for r in model.requests if r.agent == "planner/t"][1]
    assert "- result.children.0.children.0.name: 3 is not of type 'string'" in (
        retry.messages[-1].content or ""
    )


# -- answers whose check would multiply ------------------------------------------------------


def test_an_answer_whose_check_multiplies_over_its_parts_is_stopped_by_the_meter() -> None:
    """No schema bound sees this one: each level tries two branches that both recurse, so a
    list nested 40 deep is 2^40 checks. The meter stops the check; the answer is invalid."""
    branch = {"type": "array", "items": {"$ref": "#/$defs/S"}}
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/S"}},
        "$defs": {"S": {"anyOf": [branch, dict(branch), {"type": "string"}]}},
    }
    nested: Any = 5
    for _ in range(40):
        nested = [nested]
    model = ScriptedModel({"*": [{"content": json.dumps({"x": nested})}]})

    result = Agent(model, output_type=schema, output_retries=0).run_sync("Answer.")

    assert result.status == "output_invalid"
    assert result.error == (
        "The answer does not match the output schema:\n- (the answer): checking it against the "
        "schema takes too much work (the schema's branches multiply over the answer's parts); "
        "give a smaller or simpler answer"
    )


class Held(BaseModel):
    """An answer whose check waits until the test lets it go."""

    value: str

    @field_validator("value")
    @classmethod
    def _wait(cls, value: str) -> str:
        RELEASE.wait(timeout=60)
        return value


RELEASE = threading.Event()


async def test_the_time_limit_ends_a_run_while_its_answer_is_being_checked() -> None:
    """The check runs in a worker thread: the event loop goes on, and the run's time limit
    ends it, though the check has not finished."""
    model = ScriptedModel({"*": [{"content": json.dumps({"value": "x"})}]})
    RELEASE.clear()
    try:
        result = await Agent(model, output_type=Held).run("Answer.", time_limit=0.5)
    finally:
        RELEASE.set()
    assert (result.status, result.error) == ("cancelled", "time limit of 0.5 s reached")


# -- the bounds, one by one ------------------------------------------------------------------


def nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (nested_schema(100_000), f"nested more than {MAX_SCHEMA_DEPTH} deep (objects and arrays)"),
        (
            {"type": "string", "description": "x" * MAX_SCHEMA_BYTES},
            f"characters of JSON; at most {MAX_SCHEMA_BYTES:,} are read",
        ),
        (
            {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(70)} | {"d70": {}}}
            | {"$ref": "#/$defs/d0"},
            f"more than {MAX_SCHEMA_DEPTH} schemas deep with its $refs followed",
        ),
        ({"$dynamicRef": "#"}, "$dynamicRef at # is refused"),
        (
            {"properties": {"a": {"$id": "https://127.0.0.1/a.json", "type": "string"}}},
            "$id at #/properties/a is refused: below the top it moves where refs point",
        ),
        (
            {"properties": {"a": {"type": "string"}}, "$ref": "#/properties"},
            "$ref '#/properties' does not point at a schema",
        ),
        ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties at #"),
        (
            {"patternProperties": {"(?<=x)y": {"type": "string"}}},
            "'(?<=x)y' at #/patternProperties is refused",
        ),
    ],
)
def test_a_schema_past_a_bound_is_refused_saying_which(
    schema: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        OutputSpec.from_schema(schema)
    assert expected in str(caught.value)


def test_the_keywords_rewritten_for_bounds_check_as_json_schema_says() -> None:
    """`uniqueItems` in linear time (1 and 1.0 are equal, true and 1 are not), and
    `additionalProperties` beside `patternProperties` on RE2."""
    unique = OutputSpec.from_schema({"type": "array", "uniqueItems": True})
    unique.validate([1, True, "1", {"a": [1]}, {"a": [True]}])
    for repeated in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}]):
        with pytest.raises(ValueError, match="has non-unique elements"):
            unique.validate(repeated)
    keyed = OutputSpec.from_schema(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": False,
        }
    )
    keyed.validate({"id": 1, "x-a": "b"})
    with pytest.raises(ValueError) as caught:
        keyed.validate({"id": 1, "x-a": 2, "y": 0})
    assert "- x-a: 2 is not of type 'string'" in str(caught.value)
    assert "- (the answer): Additional properties are not allowed ('y' was unexpected)" in str(
        caught.value
    )


# -- the same schemas in a spec: `validate` and `run` ----------------------------------------


def alias_bomb() -> str:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\ntype: object\n"


def write_hostile_schemas(folder: Path) -> list[dict[str, Any]]:
    """Schema files a hostile hand wrote beside a spec, and the steps that name them."""
    (folder / "deep.json").write_text('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (folder / "deep.yaml").write_text("items: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (folder / "bomb.yaml").write_text(alias_bomb())
    (folder / "fan.json").write_text(json.dumps(FAN_OUT))
    backreference = {"type": "string", "pattern": r"^(a+)+\1$"}
    return [
        {"id": "deep", "task": "x", "output_schema": "deep.json"},
        {"id": "deeper", "task": "x", "output_schema": "deep.yaml"},
        {"id": "bomb", "task": "x", "output_schema": "bomb.yaml"},
        {"id": "fan", "task": "x", "output_schema": "fan.json"},
        {"id": "self", "task": "x", "output_schema": SELF},
        {"id": "loop", "task": "x", "output_schema": A_B_A},
        {"id": "backref", "task": "x", "output_schema": backreference},
    ]


def test_validate_names_each_hostile_schema_by_its_file_and_field(tmp_path: Path) -> None:
    steps = write_hostile_schemas(tmp_path)
    spec = {"name": "t", "model": "openai:gpt-4o-mini", "steps": steps}
    (tmp_path / "job.yaml").write_text(json.dumps(spec))

    checked = orchestrator("validate", "job.yaml", cwd=tmp_path)

    said = checked.stdout + checked.stderr
    assert checked.returncode == 2, said
    assert "Traceback" not in said
    expected = [
        f"steps[0].output_schema: the schema file {tmp_path / 'deep.json'} is not valid JSON: "
        "the JSON is nested too deeply",
        f"steps[1].output_schema: the schema file {tmp_path / 'deep.yaml'} is not valid YAML: "
        "line 1, column ",  # where PyYAML's scanner or ours stops first: 6.0.4 has its own
        "refused: it is nested more than 1000 deep",
        f"steps[2].output_schema: the schema file {tmp_path / 'bomb.yaml'} is not valid YAML: "
        "line 1, column 1: refused: its aliases expand it by",
        f"steps[3].output_schema: the schema file {tmp_path / 'fan.json'}: the output schema "
        "at #/$defs/d",
        "steps[4].output_schema: the output schema refers to itself without going into the "
        "answer (# -> #)",
        "steps[5].output_schema: the output schema refers to itself",
        "steps[6].output_schema: the output schema's pattern '^(a+)+\\\\1$' at #/pattern is "
        "refused",
    ]
    for line in expected:
        assert line in " ".join(said.split()), line


def test_subagents_check_reports_a_definition_whose_schema_file_is_an_alias_bomb(
    tmp_path: Path,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "bomb.yaml").write_text(alias_bomb())
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads.\noutput_schema: bomb.yaml\n---\nYou read.\n"
    )

    checked = orchestrator("subagents", "check", agents, cwd=tmp_path)

    said = " ".join((checked.stdout + checked.stderr).split())
    assert checked.returncode != 0, said
    assert "Traceback" not in said
    assert f"the schema file {agents / 'bomb.yaml'} is not valid YAML" in said
    assert "refused: its aliases expand it by" in said


def test_run_refuses_a_fan_out_schema_before_any_model_call(tmp_path: Path) -> None:
    (tmp_path / "fan.json").write_text(json.dumps(FAN_OUT))
    (tmp_path / "script.yaml").write_text(json.dumps({"*": []}))  # any call would fail loudly
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "steps": [{"id": "read", "task": "x", "output_schema": "fan.json"}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))

    run = orchestrator("run", "job.yaml", "--json", cwd=tmp_path)

    assert run.returncode == 2, run.stdout + run.stderr
    assert "steps[0].output_schema: the schema file" in run.stderr
    assert "are checked" in run.stderr
    assert "Traceback" not in run.stderr


def test_run_checks_a_backtracking_pattern_of_a_spec_and_retries(tmp_path: Path) -> None:
    script = {"read": [{"content": json.dumps({"x": "a" * 40 + "!"})}, {"content": '{"x": "a"}'}]}
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "steps": [{"id": "read", "task": "x", "output_schema": PATTERNED}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))

    run = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)

    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["data"] == {"x": "a"}
