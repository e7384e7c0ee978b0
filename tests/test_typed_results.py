"""`result.output` is a `T` for an agent given `output_type=T` (run_results.py): the value
pydantic's TypeAdapter made, for a model, a dataclass, a TypedDict, a scalar and a union; the
text for a run without an output type; `NoOutput` for a typed run with no valid answer. The
text stays what parents, jobs and files read; a result read back from JSON carries JSON
values; `mypy --strict` sees `Agent(model, output_type=City)` run to a `RunResult[City]`."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel
from trace_signing import resign
from typing_extensions import TypedDict
from user_mypy import mypy_on

from orchestrator import Agent, Orchestrator, RunResult, Trace
from orchestrator.errors import NoOutput, OrchestratorError
from orchestrator.jobs import fast_forward, load_job
from orchestrator.models import ModelRequest, ModelResponse, ModelWrapper, ScriptedModel
from orchestrator.trace import load_checkpoint


class City(BaseModel):
    name: str
    population: int


@dataclass
class Point:
    x: int
    y: int


class Move(TypedDict):
    piece: str
    to: str


class Cat(BaseModel):
    kind: Literal["cat"]
    name: str


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: bool


PARIS = {"name": "Paris", "population": 2100000}


class IgnoresToolChoice(ModelWrapper):
    """A provider that calls tools even when the request said `tool_choice: none`."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(dataclasses.replace(request, tool_choice="auto"))


def answering(content: str) -> ScriptedModel:
    return ScriptedModel({"*": [{"content": content}]})


def test_a_pydantic_models_output_is_an_instance_and_its_text_the_json() -> None:
    result = Agent(answering(json.dumps(PARIS)), output_type=City).run_sync("Which city?")
    assert result.status == "completed"
    assert isinstance(result.output, City)
    assert result.output.name == "Paris"
    assert json.loads(result.text) == PARIS
    assert result.data == PARIS and result.validated


def test_a_dataclass_a_typeddict_an_int_and_a_union_are_what_the_type_adapter_gives() -> None:
    point = Agent(answering('{"x": 1, "y": 2}'), output_type=Point).run_sync("Where?")
    assert isinstance(point.output, Point) and point.output == Point(1, 2)
    assert point.data == {"x": 1, "y": 2}
    move = Agent(answering('{"piece": "knight", "to": "f3"}'), output_type=Move).run_sync("Move?")
    assert move.output == {"piece": "knight", "to": "f3"}
    count = Agent(answering('{"result": 12}'), output_type=int, output_mode="native")
    counted = count.run_sync("How many?")
    assert isinstance(counted.output, int) and counted.output == 12
    assert (counted.text, counted.data) == ("12", 12)
    pet = Agent(answering('{"result": {"kind": "dog", "barks": true}}'), output_type=Cat | Dog)
    found = pet.run_sync("Which pet?").output
    assert isinstance(found, Dog) and found.barks


def test_a_run_without_an_output_type_gives_its_text() -> None:
    result = Agent(answering("Paris, of course.")).run_sync("Which city?")
    assert result.output == result.text == "Paris, of course."
    assert (result.data, result.validated) == (None, None)


def test_a_run_whose_answer_never_validated_raises_no_output_naming_its_status() -> None:
    bad = '{"name": "Paris", "population": "many"}'
    result = Agent(answering(bad), output_type=City, output_retries=0).run_sync("Which city?")
    assert result.status == "output_invalid"
    assert (result.text, result.data) == (bad, None)
    with pytest.raises(NoOutput, match="ended output_invalid without a valid answer: (.|\n)*pop"):
        _ = result.output
    assert issubclass(NoOutput, OrchestratorError)
    # A run that failed before any answer says so too, whatever ended it.
    failed = Agent(ScriptedModel({"*": []}), output_type=City).run_sync("Which city?")
    assert failed.status == "error"
    with pytest.raises(NoOutput, match="ended error"):
        _ = failed.output


def test_a_typed_run_stopped_by_its_step_cap_while_calling_tools_has_no_output() -> None:
    """`max_steps` with no error: the last step called a tool instead of answering. Its
    `output` is no `None` pretending to be a City, live or read back."""
    looking = {"tool_calls": [{"name": "look", "arguments": {}}]}
    model = IgnoresToolChoice(ScriptedModel({"*": [looking, looking]}))

    def look() -> str:
        """Look around."""
        return "a city"

    agent = Agent(model, [look], output_type=City, output_mode="prompted", max_steps=2)
    result = agent.run_sync("Which city?")
    assert (result.status, result.error, result.validated) == ("max_steps", None, False)
    with pytest.raises(NoOutput, match="ended max_steps without a valid answer"):
        _ = result.output
    with pytest.raises(NoOutput, match="ended max_steps"):
        _ = RunResult.model_validate_json(result.model_dump_json()).output


def test_a_result_read_back_from_json_carries_json_values_or_text() -> None:
    typed = Agent(answering(json.dumps(PARIS)), output_type=City).run_sync("Which city?")
    again = RunResult.model_validate_json(typed.model_dump_json())
    assert again.output == PARIS  # no Python type to rebuild: its JSON values
    assert (again.text, again.validated) == (typed.text, True)
    plain = Agent(answering("Paris.")).run_sync("Which city?")
    assert RunResult.model_validate_json(plain.model_dump_json()).output == "Paris."
    bad = Agent(answering("Paris"), output_type=City, output_retries=0).run_sync("Which?")
    with pytest.raises(NoOutput, match="ended output_invalid"):
        _ = RunResult.model_validate_json(bad.model_dump_json()).output


async def test_a_resumed_typed_run_gives_its_type_again(tmp_path: Path) -> None:
    script = {"*": [{"content": "Paris"}, {"content": json.dumps(PARIS)}]}
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        whole = await Agent(ScriptedModel(script), output_type=City, trace=trace).run("Which?")
    assert isinstance(whole.output, City)
    lines = path.read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"content":"Paris"' in line)
    path.write_bytes(b"".join(lines[: cut + 1]))  # killed right after the first answer
    resign(path)
    checkpoint = load_checkpoint(path)
    model = ScriptedModel(script)
    fast_forward(model, checkpoint)
    with Trace(path, resume=checkpoint) as trace:
        agent = Agent(model, output_type=City, trace=trace)
        resumed = await agent.run("Which?", history=trace.history(agent.name))
    assert resumed.status == "completed" and resumed.steps == 2  # went on from its first turn
    assert resumed.output == City(name="Paris", population=2100000)


def test_a_fork_task_shows_its_parent_json_text_and_keeps_its_value(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    tasks = [{"id": "city", "task": "Name a city.", "output_schema": schema}]
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Done."},
            ],
            "city": [{"content": '{"name": "Paris"}'}],
        }
    )
    result = Orchestrator(model, builtin=False).run_sync("Name one.")
    [child] = result.children
    assert child.output == '{"name": "Paris"}'  # the text its parent read
    observation = next(m for m in result.messages if m.role == "tool").content or ""
    assert '{"name": "Paris"}' in observation
    assert child.data == {"name": "Paris"}
    assert child.run is not None and child.run.output == {"name": "Paris"}


def test_a_job_step_typed_by_a_python_class_keeps_text_for_its_readers(tmp_path: Path) -> None:
    (tmp_path / "city_types.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Town(BaseModel):\n    name: str\n"
    )
    (tmp_path / "script.yaml").write_text(
        json.dumps({"name": [{"content": '{"name": "Paris"}'}], "greet": [{"content": "Hi!"}]})
    )
    (tmp_path / "job.yaml").write_text(
        textwrap.dedent(
            """\
            name: towns
            model: scripted:script.yaml
            steps:
              - id: name
                task: Name a town.
                output_schema: city_types.Town
              - id: greet
                depends_on: [name]
                task: "Greet {steps.name.output.name}; whole: {steps.name.output}"
            output: name
            """
        )
    )
    orchestrator = Orchestrator.from_job(load_job(tmp_path / "job.yaml"))
    model = orchestrator.model
    assert isinstance(model, ScriptedModel)
    result = orchestrator.run_job_sync(trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    step = result.step("name")
    assert (step.output, step.data) == ('{"name":"Paris"}', {"name": "Paris"})
    assert step.run is not None and type(step.run.output).__name__ == "Town"
    assert (result.output, result.data) == ('{"name":"Paris"}', {"name": "Paris"})
    [greet] = [r for r in model.requests if r.agent == "greet"]
    assert greet.messages[-1].content == 'Greet Paris; whole: {"name":"Paris"}'


@pytest.mark.slow
def test_mypy_strict_types_the_output_of_an_agent_given_an_output_type(tmp_path: Path) -> None:
    (tmp_path / "typed_use.py").write_text(
        textwrap.dedent(
            """\
            from typing import Any

            from pydantic import BaseModel
            from typing_extensions import assert_type

            from orchestrator import Agent, RunResult
            from orchestrator.models import ModelRequest, ModelResponse, ModelWrapper, ScriptedModel


            class City(BaseModel):
                name: str


            model = ScriptedModel({"*": [{"content": '{"name": "Paris"}'}]})
            result = Agent(model, output_type=City).run_sync("Which city?")
            assert_type(result, RunResult[City])
            name: str = result.output.name
            plain = Agent(model).run_sync("Which city?")
            assert_type(plain, RunResult[str])
            assert_type(plain, RunResult)
            upper: str = plain.output.upper()
            schema = Agent(model, output_type={"type": "object"}).run_sync("Which?")
            assert_type(schema, RunResult[Any])
            """
        )
    )
    (tmp_path / "wrong_use.py").write_text(
        textwrap.dedent(
            """\
            from pydantic import BaseModel

            from orchestrator import Agent
            from orchestrator.models import ModelRequest, ModelResponse, ModelWrapper, ScriptedModel


            class City(BaseModel):
                name: str


            model = ScriptedModel({"*": [{"content": '{"name": "Paris"}'}]})
            result = Agent(model, output_type=City).run_sync("Which city?")
            result.output.mayor
            Agent(model).run_sync("Which city?").output.name
            """
        )
    )
    typed = mypy_on(tmp_path, "typed_use.py")
    assert typed.returncode == 0, typed.stdout + typed.stderr
    wrong = mypy_on(tmp_path, "wrong_use.py")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert '"City" has no attribute "mayor"' in wrong.stdout
    assert '"str" has no attribute "name"' in wrong.stdout
