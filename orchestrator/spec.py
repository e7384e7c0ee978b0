"""The YAML job spec: pydantic models, loading with overrides, and one clear error.

`load_job(path)` reads the file with PyYAML's safe loader, applies command-line overrides,
validates the structure (pydantic, `extra="forbid"`), then checks what pydantic cannot see
alone: goal or steps, the step DAG, agents, template references and required inputs. Any
problem, at any stage, ends in a single `SpecError` naming the file and each field path.
Paths in the spec resolve against the spec file's folder. See docs/job-spec.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import networkx as nx
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from .errors import ConfigError
from .graph import build_graph, suggest
from .permissions import Permissions
from .spec_checks import check_job
from .spec_errors import Problem, SpecError, describe, problems_from
from .subagents import GENERAL as GENERAL_AGENT
from .templating import NAME, Template

__all__ = [
    "GENERAL_AGENT",
    "GOAL_STEP",
    "Budget",
    "Job",
    "Permissions",
    "Problem",
    "SpecError",
    "Step",
    "load_job",
    "parse_set_options",
]

GOAL_STEP = "goal"

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
Name = Annotated[str, StringConstraints(pattern=rf"^{NAME}$", max_length=64)]
Text = Annotated[str, StringConstraints(min_length=1)]
Positive = Annotated[StrictInt, Field(ge=1)]


def _base_dir(info: ValidationInfo) -> Path:
    context = info.context or {}
    return Path(context.get("base_dir") or Path.cwd())


def _absolute(path: Path, info: ValidationInfo) -> Path:
    return (_base_dir(info) / path.expanduser()).resolve()


def _existing_folder(path: Path, info: ValidationInfo) -> Path:
    folder = _absolute(path, info)
    if not folder.is_dir():
        raise ValueError(f"expected an existing folder, but {folder} is not one")
    return folder


def _model_string(value: str, info: ValidationInfo) -> str:
    provider, _, target = value.partition(":")
    if not provider or not target:
        raise ValueError(
            f"expected 'provider:model' (e.g. 'openai:gpt-4o-mini'), got {describe(value)}"
        )
    if provider != "scripted":
        return value
    script = _absolute(Path(target), info)
    if not script.is_file():
        raise ValueError(f"the scripted model's script {script} does not exist")
    return f"scripted:{script}"


def _permissions_in_spec_folder(value: Any, info: ValidationInfo) -> Any:
    """The workspace resolves against the spec's folder, and defaults to it."""
    if not isinstance(value, dict):
        return value
    workspace = value.get("workspace", ".")
    if not isinstance(workspace, str | Path):
        return value
    return {**value, "workspace": _absolute(Path(workspace), info)}


def _input_text(value: Any) -> Any:
    """Inputs are text; YAML numbers, booleans and dates are read as the text they show."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | datetime.date):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected text, a number or true/false, got {describe(value)}")


Location = Annotated[Path, AfterValidator(_absolute)]
Folder = Annotated[Path, AfterValidator(_existing_folder)]
ModelString = Annotated[str, AfterValidator(_model_string)]
InputValue = Annotated[str | None, BeforeValidator(_input_text)]
SpecPermissions = Annotated[Permissions, BeforeValidator(_permissions_in_spec_folder)]


class Budget(BaseModel):
    """Limits for the whole job."""

    model_config = _CONFIG

    max_tokens: Positive | None = None
    """Tokens (prompt and completion) for every model call of the job together; none: no cap."""
    max_steps: Positive = 20
    """Step cap of each agent loop in the job."""
    max_parallel: Positive = 4
    """How many steps or forked tasks may run at the same time."""


class Step(BaseModel):
    """One unit of work: a sub-agent loop, or the planner loop."""

    model_config = _CONFIG

    id: Name
    """Unique name of the step; other steps use it in `depends_on` and `{steps.ID.output}`."""
    task: Text
    """What to do: the prompt, with `{inputs.NAME}` and `{steps.ID.output}` filled in."""
    agent: Text | None = None
    """Sub-agent to run the task; without it (and without `planner`), the `general` agent."""
    planner: StrictBool = False
    """Run the task with the planner loop, which may load skills and fork sub-agents."""
    depends_on: list[str] = Field(default_factory=list)
    """Steps that must finish first; only their outputs may appear in `task`."""

    @property
    def agent_name(self) -> str:
        """The agent that runs this step: its `agent`, `planner`, or `general`."""
        if self.planner:
            return "planner"
        return self.agent or GENERAL_AGENT


class Job(BaseModel):
    """A validated job spec; every path in it is absolute."""

    model_config = _CONFIG

    name: Text
    """Name of the job, shown in output and traces."""
    model: ModelString
    """Model for every agent without its own, as `provider:model`; `--model` overrides it."""
    budget: Budget = Field(default_factory=Budget)
    """Token, step and parallelism limits."""
    skills: list[Folder] = Field(default_factory=list)
    """Skill catalog folders (each holds one folder per skill)."""
    subagents: list[Folder] = Field(default_factory=list)
    """Folders of sub-agent definitions (one `.md` file each)."""
    permissions: SpecPermissions = Field(default_factory=dict, validate_default=True)
    """What tools may do: workspace folder, shell, python, network hosts."""
    inputs: dict[Name, InputValue] = Field(default_factory=dict)
    """Named values for `{inputs.NAME}`; a null value is required from `--set NAME=VALUE`."""
    goal: Text | None = None
    """A goal for the planner alone; give either `goal` or `steps`."""
    steps: list[Step] = Field(default_factory=list)
    """Steps forming a DAG through `depends_on`; give either `goal` or `steps`."""
    output: str | None = None
    """Step whose output is the job's output; defaults to the last step."""
    trace: Location | None = None
    """JSONL trace file to write; `--trace` overrides it."""

    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Job:
        context = info.context or {}
        problems = check_job(self, context.get("known_agents"))
        if problems:
            raise SpecError(context.get("source"), problems)
        self._source = context.get("source")
        return self

    @property
    def source(self) -> Path | None:
        """The spec file this job was loaded from, if any."""
        return self._source

    @property
    def plan(self) -> list[Step]:
        """The steps to run; a `goal` job is one planner step with id `goal`."""
        if self.goal is not None:
            return [Step(id=GOAL_STEP, task=self.goal, planner=True)]
        return list(self.steps)

    @property
    def output_step(self) -> str:
        """Id of the step whose output is the job's output."""
        return self.output or self.plan[-1].id

    def step(self, step_id: str) -> Step:
        for step in self.plan:
            if step.id == step_id:
                return step
        raise KeyError(f"unknown step {step_id!r}{suggest(step_id, self.step_ids())}")

    def step_ids(self) -> list[str]:
        return [step.id for step in self.plan]

    def graph(self) -> nx.DiGraph:
        """The steps' DAG (edges from a dependency to its dependent)."""
        return build_graph(((s.id, s.depends_on) for s in self.plan), noun="step")

    def render_task(self, step_id: str, outputs: Mapping[str, str]) -> str:
        """The step's task with `{inputs.x}` and `{steps.id.output}` substituted.

        `outputs` maps step ids to their outputs; every step the task refers to must be in it.
        """
        inputs = {name: value or "" for name, value in self.inputs.items()}
        return Template.parse(self.step(step_id).task).render(inputs, outputs)


def load_job(
    path: str | Path,
    *,
    known_agents: Iterable[str] | None = None,
    model: str | None = None,
    inputs: Mapping[str, str] | None = None,
    trace: str | Path | None = None,
) -> Job:
    """Read, override and validate the job spec at `path`, or raise one SpecError.

    `known_agents`: names `agent:` may use (`general` is always known); None skips the check.
    `model`, `inputs` and `trace` override the spec; their paths resolve against the
    current directory, as a user typing them expects.
    """
    path = Path(path)
    data = read_yaml(path)
    problems = _override(data, model=model, inputs=inputs or {}, trace=trace)
    context = {
        "base_dir": path.resolve().parent,
        "known_agents": None if known_agents is None else set(known_agents),
        "source": path,
    }
    try:
        job = Job.model_validate(data, context=context)
    except ValidationError as error:
        raise SpecError(path, problems + problems_from(error, Job)) from None
    except SpecError as error:
        raise SpecError(path, problems + error.problems) from None
    if problems:
        raise SpecError(path, problems)
    return job


def parse_set_options(options: Sequence[str]) -> dict[str, str]:
    """`["region=APAC", "year=2025"]` -> `{"region": "APAC", "year": "2025"}`; last one wins."""
    values: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {option!r}: expected KEY=VALUE, e.g. --set region=APAC")
        values[key] = value
    return values


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""


def _unique_keys_mapping(loader: _SpecLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[str] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key_node.value!r} is given twice", key_node.start_mark
                )
            seen.add(key_node.value)
    return loader.construct_mapping(node)


_SpecLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys_mapping)


def read_yaml(path: Path) -> dict[str, Any]:
    """The spec file as a mapping, or a SpecError (missing file, bad YAML, not a mapping)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(path, [Problem("", f"cannot read the file: {error.strerror}")]) from None
    try:
        data = yaml.load(text, Loader=_SpecLoader)
    except yaml.MarkedYAMLError as error:
        raise SpecError(path, [_yaml_problem(error)]) from None
    except yaml.YAMLError as error:
        raise SpecError(path, [Problem("", f"invalid YAML: {error}")]) from None
    if not isinstance(data, dict):
        expected = "a mapping of fields (name, model, goal or steps, ...)"
        got = "an empty file" if data is None else describe(data)
        raise SpecError(path, [Problem("", f"expected {expected}, got {got}")])
    return data


def _yaml_problem(error: yaml.MarkedYAMLError) -> Problem:
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    message = f"{where}invalid YAML: {error.problem or error.context}"
    if error.context and error.problem and error.context_mark:
        message += f" ({error.context} on line {error.context_mark.line + 1})"
    return Problem("", message)


def _override(
    data: dict[str, Any],
    *,
    model: str | None,
    inputs: Mapping[str, str],
    trace: str | Path | None,
) -> list[Problem]:
    """Apply overrides to `data` in place; return the problems with `--set` keys."""
    if model is not None:
        provider, _, target = model.partition(":")
        data["model"] = f"scripted:{Path(target).resolve()}" if provider == "scripted" else model
    if trace is not None:
        data["trace"] = str(Path(trace).resolve())
    declared = data.get("inputs")
    if not inputs or not isinstance(declared, dict | None):
        return []
    declared = dict(declared or {})
    problems = []
    for key, value in inputs.items():
        if key in declared:
            declared[key] = value
        else:
            names = ", ".join(map(str, declared)) or "none"
            hint = suggest(key, declared)
            message = f"{key!r} is not an input of this job{hint}; declared inputs: {names}"
            problems.append(Problem(f"--set {key}", message))
    data["inputs"] = declared
    return problems
