"""The YAML job spec as pydantic models: `Job`, `Step`, `Budget`, and their checks.

Validation checks the structure (`extra="forbid"`), then the models the spec names (a
`scripted:` script or a `replay:` trace resolves against the spec's folder and must exist;
aliases are expanded once the spec is read whole, over the built-in aliases and the user's
alias file), then what pydantic cannot see alone: goal or steps, the step DAG, agents,
template references and required inputs (`check_job`). Any problem ends in a single
`SpecError` naming each field path. Paths in the spec resolve against
the spec file's folder (the `base_dir` of the validation context). Reading a file and applying
command-line overrides is `loading.py`. See docs/job-spec.md.
"""

from __future__ import annotations

import datetime
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import networkx as nx
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
    ValidationInfo,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from ..agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_OUTPUT_RETRIES,
    CompactionStrategy,
    OnInput,
    OutputMode,
)
from ..errors import ConfigError, PermissionDenied, Problem, SafetyWarning, SpecError
from ..models import (
    INHERIT,
    ChatModel,
    ModelAliases,
    ModelSettings,
    ResolvedModels,
    check_model,
)
from ..models.prices import STANDARD_PRICES, Price, load_prices, parse_prices
from ..security import Permissions
from ..security.inventory import DEFAULT_WORKSPACE, SCHEMA_FILE_SUFFIXES, reads
from ..skills.disclosure import DEFAULT_DISCLOSURE, Disclosure
from ..skills.discovery import SkillFolder
from ..skills.skill import ServerConfig
from ..tasks import GENERAL, GraphError, RemoteAgent, SubagentDef, build_graph, suggest
from ..tasks.subagent_files import NAME as AGENT_NAME
from .templating import NAME, Template, TemplateError

if TYPE_CHECKING:
    from ..agent import OutputSpec

FILE_MODELS = {"scripted": "scripted model's script", "replay": "replayed trace"}
"""Model providers whose target is a file; its path resolves against the spec's folder."""


def spec_model(settings: ModelSettings, info: ValidationInfo) -> ModelSettings:
    """A model of the spec, with a file model's file (a scripted model's script, a replayed
    trace) made absolute (and checked)."""
    provider = settings.provider
    if provider not in FILE_MODELS:
        return settings
    context = info.context or {}
    base = Path(context.get("base_dir") or Path.cwd())
    script = (base / Path(settings.name.partition(":")[2]).expanduser()).resolve()
    if not script.is_file():
        raise ValueError(f"the {FILE_MODELS[provider]} {script} does not exist")
    return settings.updated(name=f"{provider}:{script}")


def step_model(value: Any) -> Any:
    """A step's `model: inherit` is the job's model, as leaving it out is."""
    return None if value == INHERIT else value


def expand_models(job: Job, environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Replace every alias in `job` by the model it stands for; the problems, by field path."""
    try:
        aliases = ModelAliases.standard(job.models, environ=environ)
    except ConfigError as error:
        return [Problem("models", str(error))]
    problems: list[Problem] = []
    job.model = _expanded(aliases, job.model, "model", problems) or job.model
    for index, step in enumerate(job.steps):
        if step.model is not None:
            path = f"steps[{index}].model"
            step.model = _expanded(aliases, step.model, path, problems) or step.model
    for name, settings in job.models.items():
        _expanded(aliases, settings, f"models.{name}", problems)
    return problems


def _expanded(
    aliases: ModelAliases, settings: ModelSettings, path: str, problems: list[Problem]
) -> ModelSettings | None:
    try:
        return check_model(aliases.expand(settings))  # an unknown provider, too
    except ConfigError as error:
        problems.append(Problem(path, str(error)))
        return None


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


def _permissions_in_spec_folder(value: Any, info: ValidationInfo) -> Any:
    """The workspace (default: `work/` beside the spec), read-only and unlisted paths, and
    the sandbox's paths resolve against the spec's folder."""
    if not isinstance(value, dict):
        return value
    workspace = value.get("workspace", DEFAULT_WORKSPACE)
    if not isinstance(workspace, str | Path):
        return value
    resolved = {**value, "workspace": _absolute(Path(workspace), info)}
    for key in ("read_only", "unlisted"):
        paths = value.get(key)
        if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
            resolved[key] = [_absolute(Path(p), info) for p in paths]
    sandbox = value.get("sandbox")
    if isinstance(sandbox, dict):
        resolved["sandbox"] = _sandbox_in_spec_folder(sandbox, info)
    return resolved


def _sandbox_in_spec_folder(sandbox: dict[str, Any], info: ValidationInfo) -> Any:
    """A sandbox's `read_only` and `writable` paths, against the spec's folder."""
    resolved = dict(sandbox)
    for key in ("read_only", "writable"):
        paths = sandbox.get(key)
        if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
            resolved[key] = [_absolute(Path(p), info) for p in paths]
    return resolved


def _input_text(value: Any) -> Any:
    """Inputs are text; YAML numbers, booleans and dates are read as the text they show."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | datetime.date):
        return str(value)
    if value is None or isinstance(value, str):
        return value
    from .problems import describe  # loaded by a spec with a problem

    raise ValueError(f"expected text, a number or true/false, got {describe(value)}")


def _schema_beside_spec(value: Any, info: ValidationInfo) -> Any:
    """An `output_schema` file's path made absolute (against the spec's folder); an inline
    schema and a dotted path stay as given."""
    if isinstance(value, str) and value.endswith(SCHEMA_FILE_SUFFIXES):
        return str(_absolute(Path(value), info))
    return value


def _existing_file(path: Path, info: ValidationInfo) -> Path:
    file = _absolute(path, info)
    if not file.is_file():
        raise ValueError(f"expected an existing file, but {file} is not one")
    return file


def _pin_shorthand(value: Any) -> Any:
    """`pinned: [notes.md]` is `pinned: [{file: notes.md}]`."""
    return {"file": value} if isinstance(value, str) else value


Location = Annotated[Path, AfterValidator(_absolute)]
SchemaSource = Annotated[dict[str, Any] | Text, AfterValidator(_schema_beside_spec)]
Retries = Annotated[StrictInt, Field(ge=0)]
Folder = Annotated[Path, AfterValidator(_existing_folder)]
SpecModel = Annotated[ModelSettings, AfterValidator(spec_model)]
StepModel = Annotated[SpecModel | None, BeforeValidator(step_model)]
InputValue = Annotated[
    str | None, BeforeValidator(_input_text, json_schema_input_type=str | int | float | bool | None)
]
SpecPermissions = Annotated[Permissions, BeforeValidator(_permissions_in_spec_folder)]


class SpecServer(ServerConfig):
    """One MCP server of `mcp_servers:` (the `.mcp.json` shape, plus `description`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SpecAgent(BaseModel):
    """One remote sub-agent of `agents:`: an A2A agent elsewhere (docs/a2a.md)."""

    model_config = _CONFIG

    a2a: Annotated[str, StringConstraints(pattern=r"^https?://")]
    """The agent's base URL, or its card's URL (`.../.well-known/agent-card.json`)."""
    description: Text | None = None
    """What it is good at, for the planner; default: the URL."""
    token_env: Name | None = None
    """The environment variable holding its bearer token."""
    skill: Text | None = None
    """Which of its skills to ask, when it has several (sent as the message's `skill`)."""
    time_limit: Annotated[float, Field(gt=0)] = 600.0
    """Seconds one of its tasks may take; past that the task is cancelled there too."""
    max_calls: Positive | None = None
    """How many tasks one run may send it; none: no cap."""


def _folder_shorthand(value: Any, info: ValidationInfo) -> Any:
    """`skills: [vendor]` is `skills: [{path: vendor}]` (a missing folder named there)."""
    if isinstance(value, str | os.PathLike):
        return {"path": _existing_folder(Path(value), info)}
    return value


class SpecSkillFolder(BaseModel):
    """One item of `skills:`: a folder of skills (a path alone is short for `{path: PATH}`)."""

    model_config = _CONFIG

    path: Folder
    """The folder (it holds one folder per skill, or is a skill itself)."""
    preapprove: StrictBool = True
    """False: its skills' `allowed-tools` pre-approve nothing; their calls ask as any other
    (docs/sandbox.md)."""

    def folder(self) -> SkillFolder:
        return SkillFolder(self.path, self.preapprove)


class Pin(BaseModel):
    """One item of `pinned:`: a file beside the spec (read when its step starts) or a note,
    written whole into the task of each step it applies to, so no compaction ever cuts it
    (docs/context-window.md)."""

    model_config = _CONFIG

    file: Annotated[Path, AfterValidator(_existing_file)] | None = None
    """A file kept whole in the task (a path alone is short for `{file: PATH}`)."""
    note: Text | None = None
    """A note kept whole in the task."""

    @model_validator(mode="after")
    def _one_kind(self) -> Pin:
        if (self.file is None) == (self.note is None):
            raise ValueError("a pinned item is either {file: PATH} or {note: TEXT}, one of them")
        return self

    @reads("file a spec names")
    def render(self, permissions: Permissions) -> str:
        """The pin as the task shows it. A file that holds keys (a link to `.env`, made after
        the spec was checked) is not read: the task says it was refused, and a
        `SafetyWarning` says so too."""
        if self.file is None:
            return f"<pinned note>\n{self.note}\n</pinned>"
        target = self.file.resolve()
        try:
            permissions.require_readable(target, str(self.file))
        except PermissionDenied as refusal:
            warnings.warn(f"pinned file refused: {refusal}", SafetyWarning, stacklevel=2)
            return f'<pinned file="{self.file.name}">\n(refused: it holds keys)\n</pinned>'
        return f'<pinned file="{self.file.name}">\n{target.read_text()}\n</pinned>'


Pinned = list[Annotated[Pin, BeforeValidator(_pin_shorthand, json_schema_input_type=Path | Pin)]]
PINNED_HEADING = "Pinned for the whole run (kept whole in every request):"


class Budget(BaseModel):
    """Limits for the whole job."""

    model_config = _CONFIG

    max_tokens: Positive | None = None
    """Tokens (prompt and completion) for every model call of the job together; none: no cap."""
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None
    """US dollars for every model call of the job together, priced with `prices`; every model
    the job uses must then have a price. None: no cap."""
    max_steps: Positive = DEFAULT_MAX_STEPS
    """The most model calls any one agent of the job may make; a sub-agent definition's
    own `max_steps` may lower it, never raise it."""
    max_parallel: Positive = 4
    """How many agents may work at once across the whole job: steps and every task they fork
    (an agent waiting for its forked tasks lends them its slot)."""


ExecutorType = Literal["local", "ray"]


def _executor_name(value: Any) -> Any:
    """`executor: ray` is `executor: {type: ray}`."""
    return {"type": value} if isinstance(value, str) else value


class Executor(BaseModel):
    """Where the job's agents run (docs/ray.md)."""

    model_config = _CONFIG

    type: ExecutorType = "local"
    """`local`: in this process (the default); `ray`: on a Ray cluster (the `[ray]` extra)."""
    address: str | None = None
    """The Ray cluster: `auto` (the one running on this machine) or `ray://HOST:10001`; none:
    start a Ray of its own on this machine."""
    workers: Positive | None = None
    """How many Ray workers, each running many agents at once; default: one per CPU."""


SpecExecutor = Annotated[
    Executor, BeforeValidator(_executor_name, json_schema_input_type=ExecutorType | Executor)
]


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
    model: StepModel = None
    """This step's own model (a string, an alias or a settings mapping); the job's otherwise."""
    skills: list[Text] | None = None
    """Skills the step's agent starts with loaded (and is limited to, within its definition),
    skills the model may not choose itself (`disable-model-invocation`) included."""
    output_schema: SchemaSource | None = None
    """What the step's answer must be (docs/typed-outputs.md): a JSON Schema inline, a
    `.json`/`.yaml` file of one beside the spec, or the dotted path of a pydantic model in the
    job's own code (`schemas.Invoice`); its fields are `{steps.ID.output.FIELD}`. Without it,
    the agent definition's own, if any."""
    output_mode: OutputMode | None = None
    """How the model is asked for it: `tool`, `native` or `prompted`; default: the model's."""
    output_retries: Retries = DEFAULT_OUTPUT_RETRIES
    """Answers that do not validate sent back to the model before the step ends
    `output_invalid`."""
    compaction: CompactionStrategy | None = None
    """How this step's agent compacts its conversation (`mask` or `summarize`); default: its
    agent definition's, else the job's."""
    note: StrictBool | None = None
    """Give this step's agent the `note` tool (its working record); default: its agent
    definition's, else the job's."""
    questions: StrictBool | None = None
    """Give this step's agent the `ask_user` tool (a question to the user, whose answer the
    run may wait for: docs/waiting.md); default: its agent definition's, else the job's."""
    pinned: Pinned = Field(default_factory=list)
    """Files and notes kept whole in this step's task, after the job's own `pinned`."""

    @property
    def agent_name(self) -> str:
        """The agent that runs this step: its `agent`, `planner`, or `general`."""
        if self.planner:
            return "planner"
        return self.agent or GENERAL


class Job(BaseModel):
    """A validated job spec; every path in it is absolute."""

    model_config = _CONFIG

    name: Text
    """Name of the job, shown in output and traces."""
    model: SpecModel
    """Model for every agent without its own: `provider:model`, an alias, or a mapping of its
    name and settings; `--model` overrides the name, `--model-option` a setting."""
    models: dict[Name, SpecModel] = Field(default_factory=dict)
    """Aliases for this job's models, over the built-in ones and the user's alias file."""
    budget: Budget = Field(default_factory=Budget)
    """Token, step and parallelism limits."""
    executor: SpecExecutor = Field(default_factory=Executor)
    """Where the agents run: `local` (this process) or `ray` (`{type: ray, address: auto}`)."""
    skills: list[
        Annotated[
            SpecSkillFolder,
            BeforeValidator(_folder_shorthand, json_schema_input_type=Path | SpecSkillFolder),
        ]
    ] = Field(default_factory=list)
    """Skill catalog folders (each holds one folder per skill): a path, or
    `{path: PATH, preapprove: false}` for a folder whose skills pre-approve nothing."""
    subagents: list[Folder] = Field(default_factory=list)
    """Folders of sub-agent definitions (one `.md` file each)."""
    agents: dict[Name, SpecAgent] = Field(default_factory=dict)
    """Remote sub-agents by name: A2A agents elsewhere (`{a2a: URL, token_env: NAME}`),
    forked like any other; they come before the folders' definitions of the same name."""
    permissions: SpecPermissions = Field(default_factory=dict, validate_default=True)
    """What tools may do: workspace folder, shell, python, network hosts."""
    inputs: dict[Name, InputValue] = Field(default_factory=dict)
    """Named values for `{inputs.NAME}`; a null value is required from `--set NAME=VALUE`."""
    goal: Text | None = None
    """A goal for the planner alone; give either `goal` or `steps`."""
    output_schema: SchemaSource | None = None
    """What the goal's answer must be, as a step's `output_schema` (a goal job only)."""
    output_mode: OutputMode | None = None
    """How the planner is asked for it, as a step's `output_mode` (a goal job only)."""
    output_retries: Retries = DEFAULT_OUTPUT_RETRIES
    """As a step's `output_retries` (a goal job only)."""
    steps: list[Step] = Field(default_factory=list)
    """Steps forming a DAG through `depends_on`; give either `goal` or `steps`."""
    output: str | None = None
    """Step whose output is the job's output; defaults to the last step."""
    trace: Location | None = None
    """JSONL trace file to write; `--trace` overrides it."""
    prices: dict[str, Price] | Location = Field(default_factory=dict)
    """Model prices over the built-in table (`provider:model: {input, output, cached_input,
    cache_write}`, US dollars per million tokens), or a YAML/JSON file of them."""
    disclosure: Disclosure = DEFAULT_DISCLOSURE
    """How skills' tools reach the model: `progressive` (each skill's tools when it is
    loaded), `eager` (every skill's tools from the first request) or `auto` (eager while their
    schemas fit in 4,000 tokens); docs/skills.md."""
    fail_on_skill_error: bool = False
    """End an agent's run as `error` when a skill's code fails to load (its `tools.py` does
    not import, an MCP server does not start); by default that is a warning, and the model
    reads the failure as an observation."""
    mcp_servers: dict[Name, SpecServer] = Field(default_factory=dict)
    """MCP servers, as in `.mcp.json`'s `mcpServers`; each becomes a skill of its own, named
    as the server (docs/skills.md). Nothing starts until that skill is loaded."""
    compaction: CompactionStrategy = "mask"
    """How every agent of the job compacts its conversation to fit its model's context
    window: `mask` (old tool results become stubs) or `summarize` (the same, with a model's
    structured summary of what is cut); a step or an agent definition may choose its own
    (docs/context-window.md)."""
    note: StrictBool = False
    """Give every agent of the job the `note` tool: a working record carried through every
    compaction, with the files the run changed; a step or an agent definition may say
    otherwise."""
    on_input: OnInput = "wait"
    """Where a person must answer and no one is there (a call marked `ask` off a terminal,
    an agent's question): `wait` ends the run `input_required`, to be resumed with the
    answers; `deny` refuses the call; `fail` ends the run `error` (docs/waiting.md)."""
    questions: StrictBool = False
    """Give every agent of the job the `ask_user` tool: a question to the user, whose answer
    is the call's result; where no one is there to answer, the run ends `input_required`
    and is resumed with the answer (docs/waiting.md). A step or an agent definition may say
    otherwise."""
    pinned: Pinned = Field(default_factory=list)
    """Files (`{file: PATH}`, or just the path) and notes (`{note: TEXT}`) kept whole in the
    task of every step (the goal's too): no compaction cuts them, and a run whose pinned
    content alone does not fit its window ends as `context_full`."""

    _source: Path | None = PrivateAttr(default=None)
    _spec_sha256: str | None = PrivateAttr(default=None)
    _dotenv: dict[str, str] = PrivateAttr(default_factory=dict)
    _prices: dict[str, Price] | None = PrivateAttr(default=None)
    # The schemas `output_schema` gave, read when the spec was checked, by step id; kept as
    # JSON (an OutputSpec holds functions, and a job travels to other processes).
    _output_schemas: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)
    _schema_folder: Path = PrivateAttr(default_factory=Path.cwd)
    _agent_schemas: dict[str, Mapping[str, Any]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> Job:
        context = info.context or {}
        problems = expand_models(self, context.get("environ"))
        self._schema_folder = _base_dir(info)
        outputs, output_problems = load_outputs(self)
        self._output_schemas = {step: spec.schema for step, spec in outputs.items()}
        self._agent_schemas = dict(context.get("agent_schemas") or {})
        problems += output_problems
        problems += check_job(
            self, context.get("known_agents"), open_inputs=bool(context.get("open_inputs"))
        )
        if problems:
            raise SpecError(context.get("source"), problems)
        self._source = context.get("source")
        self._spec_sha256 = context.get("spec_sha256")
        self._dotenv = dict(context.get("dotenv") or {})
        return self

    def remote_agents(self) -> list[SubagentDef]:
        """The sub-agent definitions of `agents:`."""
        return [
            SubagentDef(
                name=name,
                description=agent.description or f"A remote A2A agent at {agent.a2a}.",
                remote=RemoteAgent(
                    url=agent.a2a,
                    token_env=agent.token_env,
                    skill=agent.skill,
                    time_limit=agent.time_limit,
                    max_calls=agent.max_calls,
                ),
            )
            for name, agent in self.agents.items()
        ]

    def named_files(self) -> list[Path]:
        """The files this spec names that decide its run: the spec itself, a scripted model's
        script or a replayed trace (the job's, its steps' and its aliases'), the prices file
        and the trace. The run keeps them read-only to its file tools (security/inventory.py)."""
        models = [self.model, *self.models.values(), *(s.model for s in self.steps if s.model)]
        found = [self.source] if self.source is not None else []
        for settings in models:
            if settings.provider in FILE_MODELS:
                found.append(Path(settings.name.partition(":")[2]))
        if isinstance(self.prices, Path):
            found.append(self.prices)
        schemas = [self.output_schema, *(s.output_schema for s in self.steps)]
        found += [
            Path(f) for f in schemas if isinstance(f, str) and f.endswith(SCHEMA_FILE_SUFFIXES)
        ]
        if self.trace is not None:
            found.append(self.trace)
        pins = [*self.pinned, *(pin for s in self.steps for pin in s.pinned)]
        found += [pin.file for pin in pins if pin.file is not None]
        return found

    def price_overrides(self) -> dict[str, Price]:
        """The spec's prices (read from their file when `prices` names one), read once: the
        check before a run and the run itself price with the same table."""
        if self._prices is None:
            if isinstance(self.prices, Path):
                self._prices = load_prices(self.prices)
            else:
                self._prices = parse_prices(self.prices, "prices")
        return dict(self._prices)

    @property
    def source(self) -> Path | None:
        """The spec file this job was loaded from, if any."""
        return self._source

    @property
    def spec_sha256(self) -> str | None:
        """The sha256 (hex) of the spec file's bytes as they were read, when it was read
        from a file by `load_job`."""
        return self._spec_sha256

    @property
    def dotenv(self) -> dict[str, str]:
        """Variables read from `.env` files for this job (never written to a trace)."""
        return dict(self._dotenv)

    def resolve_model(self) -> ChatModel:
        """The job's model as a run of it resolves it (its `models:` aliases, its `.env`
        values, its prices; one without a price refused under a money cap), without a run."""
        return ResolvedModels.priced(
            STANDARD_PRICES.over(self.price_overrides()),
            aliases=ModelAliases.standard(self.models),
            environ=self.environment(),
            capped=self.budget.max_cost_usd is not None,
        ).get(self.model)

    def environment(self) -> dict[str, str]:
        """The variables models read: the `.env` files', under the real environment."""
        return {**self._dotenv, **os.environ}

    @property
    def plan(self) -> list[Step]:
        """The steps to run; a `goal` job is one planner step with id `goal`."""
        if self.goal is not None:
            return [
                Step(
                    id=GOAL_STEP,
                    task=self.goal,
                    planner=True,
                    output_schema=self.output_schema,
                    output_mode=self.output_mode,
                    output_retries=self.output_retries,
                )
            ]
        return list(self.steps)

    def output_spec(self, step_id: str) -> OutputSpec[Any] | None:
        """What the step's answer must be, as its `output_schema` says; None: free text, or
        its agent definition's own. Raises ConfigError when it cannot be read (any more)."""
        source = self.step(step_id).output_schema
        if source is None:
            return None
        from ..agent.output import load_output_spec  # loaded by a job with an output type

        return load_output_spec(source, self._schema_folder, refused=[self.permissions.workspace])

    @property
    def output_step(self) -> str:
        """Id of the step whose output is the job's output."""
        return self.output or self.plan[-1].id

    def output_users(self) -> dict[str, list[str]]:
        """For each step, the later steps whose task uses its output (`{steps.ID.output}`)."""
        users: dict[str, list[str]] = {}
        for step in self.plan:
            for ref in Template.parse(step.task).references:
                if ref.kind == "steps" and step.id not in users.setdefault(ref.name, []):
                    users[ref.name].append(step.id)
        return users

    def step(self, step_id: str) -> Step:
        for step in self.plan:
            if step.id == step_id:
                return step
        raise KeyError(f"unknown step {step_id!r}{suggest(step_id, self.step_ids())}")

    def step_ids(self) -> list[str]:
        return [step.id for step in self.plan]

    def graph(self) -> nx.DiGraph[str]:
        """The steps' DAG (edges from a dependency to its dependent)."""
        return build_graph(((s.id, s.depends_on) for s in self.plan), noun="step")

    def render_task(
        self, step_id: str, outputs: Mapping[str, str], data: Mapping[str, Any] | None = None
    ) -> str:
        """The step's task with `{inputs.x}`, `{steps.id.output}` and
        `{steps.id.output.FIELD}` substituted.

        `outputs` maps step ids to their outputs, `data` to their structured answers (as JSON
        values); every step the task refers to must be in them.
        """
        inputs = {name: value or "" for name, value in self.inputs.items()}
        step = self.step(step_id)
        task = Template.parse(step.task).render(inputs, outputs, data)
        pins = [*self.pinned, *step.pinned]
        if not pins:
            return task
        rendered = (pin.render(self.permissions) for pin in pins)
        return "\n\n".join([task, PINNED_HEADING, *rendered])


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _AsWritten(GenerateJsonSchema):
    """pydantic's JSON Schema, held as close to what validation takes as JSON Schema can:
    a mapping's keys held to their pattern (pydantic lists the pattern under
    `patternProperties`, which lets any other key through), a field that a model takes by
    its name as well as by its alias listed under both, and an empty list or mapping made by
    a default factory given as the default it is."""

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        json_schema = super().dict_schema(schema)
        patterns = json_schema.get("patternProperties")
        if isinstance(patterns, dict) and len(patterns) == 1:
            ((pattern, values),) = patterns.items()
            del json_schema["patternProperties"]
            json_schema["additionalProperties"] = values
            names = json_schema.setdefault("propertyNames", {})
            names["pattern"] = pattern
        return json_schema

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        json_schema = super().default_schema(schema)
        if schema.get("default_factory") in (list, dict):  # an empty list or mapping
            json_schema["default"] = schema["default_factory"]()  # type: ignore[call-arg]
        return json_schema

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        model = schema["cls"]
        properties = json_schema.get("properties")
        if model.model_config.get("populate_by_name") and isinstance(properties, dict):
            for name, field in model.model_fields.items():
                if field.alias in properties and name not in properties:
                    properties[name] = properties[field.alias]
        return json_schema


def written_schema(model: type[BaseModel], title: str, description: str) -> dict[str, Any]:
    """The JSON Schema of the file `model` reads, as it is written: a shorthand a validator
    expands (a model's name alone, a path alone) is allowed where it stands, and an unknown
    field is refused where the model forbids extras. For editors (`orchestrator schema`)."""
    schema = model.model_json_schema(mode="validation", schema_generator=_AsWritten)
    schema.update(title=title, description=description)
    return {"$schema": JSON_SCHEMA_DIALECT, "title": title, "description": description, **schema}


def job_schema() -> dict[str, Any]:
    """The JSON Schema of a job spec as it is written (`orchestrator schema job`)."""
    return written_schema(Job, "orchestrator job spec", "A job spec (docs/job-spec.md).")


# --- Checks across fields: the job seen whole --------------------------------------------


def check_job(
    job: Job, known_agents: Iterable[str] | None, *, open_inputs: bool = False
) -> list[Problem]:
    """Every cross-field problem of `job`; empty when it is valid. With `open_inputs`, a
    required input may stay without a value (a served job's message gives it)."""
    problems = _shape(job)
    problems += [
        Problem(
            f"agents.{name}",
            "a sub-agent's name is lowercase letters, digits and single "
            "inner hyphens or underscores",
        )
        for name in job.agents
        if not AGENT_NAME.match(name)
    ]
    problems += [
        Problem(f"agents.{name}", f"{name!r} is the name of a built-in agent; choose another")
        for name in job.agents
        if name in (GENERAL, "planner")
    ]
    if known_agents is not None:
        problems += _agents(job.steps, {*known_agents, GENERAL, *job.agents})
    graph, graph_problems = _graph(job.steps)
    problems += graph_problems
    problems += _templates(job, graph)
    problems += _secret_pins(job)
    if not open_inputs:
        problems += _required_inputs(job)
    return problems


def _secret_pins(job: Job) -> list[Problem]:
    """A pinned file that holds keys (`.env`, a link to one, any of the permissions'
    `secret_files`) is refused as the file tools refuse it: pinned, its keys would go to the
    model's provider with every request."""
    located = [("pinned", job.pinned)]
    located += [(f"steps[{i}].pinned", step.pinned) for i, step in enumerate(job.steps)]
    problems = []
    for field, pins in located:
        for index, pin in enumerate(pins):
            if pin.file is None:
                continue
            try:
                job.permissions.require_readable(pin.file.resolve(), str(pin.file))
            except PermissionDenied as refusal:
                problems.append(Problem(f"{field}[{index}].file", str(refusal)))
    return problems


def load_outputs(job: Job) -> tuple[dict[str, OutputSpec[Any]], list[Problem]]:
    """Every `output_schema` of `job` read (files, imports) into an OutputSpec by step id
    (`goal` for the goal's), and the problems, by field path; before any model call."""
    named: list[tuple[str, str, Any]] = [
        (f"steps[{i}]", s.id, s.output_schema) for i, s in enumerate(job.steps)
    ]
    problems: list[Problem] = []
    if job.goal is not None:
        named.append(("", GOAL_STEP, job.output_schema))
    else:
        given = {
            "output_schema": job.output_schema is not None,
            "output_mode": job.output_mode is not None,
            "output_retries": job.output_retries != DEFAULT_OUTPUT_RETRIES,
        }
        message = "is for a goal job; a step gives its own"
        problems += [Problem(field, message) for field, set_ in given.items() if set_]
    specs: dict[str, OutputSpec[Any]] = {}
    for path, step_id, source in named:
        field = f"{path}.output_schema".lstrip(".")
        if source is None:
            continue
        from ..agent.output import load_output_spec  # loaded by a job with an output type

        try:
            specs[step_id] = load_output_spec(
                source, job._schema_folder, refused=[job.permissions.workspace]
            )
        except ConfigError as error:
            problems.append(Problem(field, str(error)))
    return specs, problems


def _shape(job: Job) -> list[Problem]:
    if job.goal is not None and job.steps:
        return [Problem("goal", "give either goal or steps, not both")]
    if job.goal is not None:
        if job.output is not None:
            return [Problem("output", "a goal job's output is the planner's answer; drop it")]
        return []
    if not job.steps:
        if "steps" in job.model_fields_set:
            return [Problem("steps", "needs at least one step")]
        return [Problem("", "expected a 'goal' for the planner or a list of 'steps'; got neither")]
    problems = []
    ids = [step.id for step in job.steps]
    if job.output is not None and job.output not in ids:
        message = f"unknown step {job.output!r}{suggest(job.output, ids)}; steps: {', '.join(ids)}"
        problems.append(Problem("output", message))
    for index, step in enumerate(job.steps):
        if step.agent is not None and step.planner:
            problems.append(Problem(f"steps[{index}]", "give agent or planner: true, not both"))
    return problems


def _agents(steps: Sequence[Step], known: set[str]) -> list[Problem]:
    problems = []
    names = ", ".join(sorted(known))
    for index, step in enumerate(steps):
        if step.agent is not None and step.agent not in known:
            hint = suggest(step.agent, known)
            message = f"unknown agent {step.agent!r}{hint}; known agents: {names}"
            problems.append(Problem(f"steps[{index}].agent", message))
    return problems


def _graph(steps: Sequence[Step]) -> tuple[nx.DiGraph[str] | None, list[Problem]]:
    try:
        return build_graph(((s.id, s.depends_on) for s in steps), noun="step"), []
    except GraphError as error:
        return None, [Problem(p.path("steps"), p.message) for p in error.problems]


def _templates(job: Job, graph: nx.DiGraph[str] | None) -> list[Problem]:
    problems = []
    if job.goal is not None:
        problems += _references(job, "goal", job.goal, None, None)
    # Which step may use which output is read off the dependencies that are sound, even when
    # others are not (a cycle, an unknown step): one pass reports both kinds of problem.
    reach = graph if graph is not None else _sound_dependencies(job.steps)
    for index, step in enumerate(job.steps):
        problems += _references(job, f"steps[{index}].task", step.task, step, reach)
    return problems


def _sound_dependencies(steps: Sequence[Step]) -> nx.DiGraph[str]:
    """The steps' dependencies that name another known step (a graph that may have cycles)."""
    ids = {step.id for step in steps}
    reach: nx.DiGraph[str] = nx.DiGraph()
    reach.add_nodes_from(ids)
    for step in steps:
        reach.add_edges_from((d, step.id) for d in step.depends_on if d in ids and d != step.id)
    return reach


def _references(
    job: Job, path: str, text: str, step: Step | None, graph: nx.DiGraph[str] | None
) -> list[Problem]:
    """Problems with the references in one template; `step` is None for the goal."""
    try:
        template = Template.parse(text)
    except TemplateError as error:
        return [Problem(path, str(error))]
    problems = []
    for ref in template.references:
        if ref.kind == "inputs":
            message = _input_reference(job, ref.name)
        elif step is None:
            message = "a goal cannot use step outputs; it runs alone"
        else:
            message = _step_reference(job, step, ref.name, graph)
            if message is None and ref.field:
                message = _field_reference(job, ref.name, ref.field)
        if message:
            problems.append(Problem(path, f"{ref}: {message}"))
    return problems


def _input_reference(job: Job, name: str) -> str | None:
    if name in job.inputs:
        return None
    declared = ", ".join(job.inputs) or "none"
    return f"unknown input {name!r}{suggest(name, job.inputs)}; declared inputs: {declared}"


def _step_reference(job: Job, step: Step, name: str, graph: nx.DiGraph[str] | None) -> str | None:
    ids = [s.id for s in job.steps]
    if name not in ids:
        return f"unknown step {name!r}{suggest(name, ids)}"
    if name == step.id:
        return "a step cannot use its own output"
    if graph is not None and name not in nx.ancestors(graph, step.id):
        return f"step {step.id!r} does not depend on {name!r}; add {name!r} to its depends_on"
    return None


def _field_reference(job: Job, name: str, field: Sequence[str]) -> str | None:
    """Whether the structured answer of step `name` has the field `field` (by its schema)."""
    step = job.step(name)
    schema = job._output_schemas.get(name) or job._agent_schemas.get(step.agent_name)
    if schema is None:
        if step.output_schema is not None:
            return None  # its schema has a problem of its own, reported with it
        return (
            f"step {name!r} has no output_schema (nor has its agent {step.agent_name!r}), "
            "so its output has no fields"
        )
    nodes: list[Any] = [schema]
    for depth, part in enumerate(field):
        found, known = _schema_children(schema, nodes, part)
        if not found:
            where = ".".join(field[:depth]) or "the answer"
            listed = ", ".join(known) or "none"
            hint = suggest(part, known) if known else ""
            return (
                f"{where} has no field {part!r}{hint} in the output_schema of step {name!r}; "
                f"its fields: {listed}"
            )
        nodes = found
    return None


def _schema_children(
    root: Mapping[str, Any], nodes: Sequence[Any], part: str
) -> tuple[list[Any], list[str]]:
    """The sub-schemas that `part` (a property, or a list index) leads to from `nodes`
    (following `$ref`s inside `root` and every branch of `anyOf`/`oneOf`/`allOf`), and the
    property names seen on the way."""
    found: list[Any] = []
    known: list[str] = []
    pending = list(nodes)
    seen = 0
    while pending and seen < 1000:
        seen += 1
        node = pending.pop()
        if not isinstance(node, dict):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for key in ref[2:].split("/"):
                target = target.get(key) if isinstance(target, dict) else None
            pending.append(target)
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list):
                pending.extend(node[key])
        properties = node.get("properties")
        if isinstance(properties, dict):
            known += [k for k in properties if k not in known]
            if part in properties:
                found.append(properties[part])
        if part.isdigit():
            items = node.get("items")
            prefix = node.get("prefixItems")
            if isinstance(prefix, list) and int(part) < len(prefix):
                found.append(prefix[int(part)])
            elif isinstance(items, dict):
                found.append(items)
    return found, known


def _required_inputs(job: Job) -> list[Problem]:
    return [
        Problem(f"inputs.{name}", f"required input has no value; give it with --set {name}=VALUE")
        for name, value in job.inputs.items()
        if value is None
    ]
