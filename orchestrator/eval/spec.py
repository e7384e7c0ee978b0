"""The eval file as pydantic models: `EvalSpec`, `Case`, `Scorer`, `Variant`.

An eval names a job (a spec file, or a spec written inline), its cases (inline, or a CSV or
JSONL file), the scorers every run is held to, and the variants to compare. Structure is
checked by pydantic (`extra="forbid"`); what it cannot see alone (the job loads for every
variant, each case's inputs are the job's, each `{expected.NAME}` a scorer uses is in every
case, a Python scorer's function exists) is checked in `loading.py`. Every problem, with its
field path, ends in one `EvalError`, as a job spec's do. See docs/eval.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..agent import CompactionStrategy, OnInput
from ..errors import SpecError
from ..jobs.spec import (
    FILE_MODELS,
    InputValue,
    Job,
    Location,
    Name,
    Positive,
    Text,
    written_schema,
)
from ..skills.disclosure import Disclosure

_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
TEMPLATE = re.compile(r"\{(expected|inputs)\.([A-Za-z0-9_.-]+)\}")
"""`{expected.NAME}` and `{inputs.NAME}` in a scorer's text: the case's values."""
Fraction = Annotated[float, Field(ge=0, le=1)]
NonNegative = Annotated[float, Field(ge=0)]


class EvalError(SpecError):
    """An eval file is invalid; `problems` lists every reason, by field path."""


def _file_model(value: str, info: ValidationInfo) -> str:
    """A scripted model's script or a replayed trace, named from the eval file's folder."""
    provider, sep, target = value.partition(":")
    if not sep or provider not in FILE_MODELS:
        return value
    base = Path((info.context or {}).get("base_dir") or Path.cwd())
    path = (base / Path(target).expanduser()).resolve()
    if not path.is_file():
        raise ValueError(f"the {FILE_MODELS[provider]} {path} does not exist")
    return f"{provider}:{path}"


VariantModel = Annotated[str, AfterValidator(_file_model)]


def _job_as_given(value: Any) -> Any:
    """A job written inline stays as given here: it is validated whole when it is loaded
    for each variant (loading.py), as a spec file is."""
    return value


JobSource = Annotated[
    Location | dict[str, Any], BeforeValidator(_job_as_given, json_schema_input_type=Path | Job)
]


class Range(BaseModel):
    """A count that must lie between `min` and `max` (either may be left out)."""

    model_config = _CONFIG

    min: Annotated[int, Field(ge=0)] | None = None
    """The least count that passes; none: no least."""
    max: Annotated[int, Field(ge=0)] | None = None
    """The most that passes; none: no most."""

    def holds(self, count: int) -> bool:
        return (self.min is None or count >= self.min) and (self.max is None or count <= self.max)

    def __str__(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}" if self.min != self.max else str(self.min)
        return f">= {self.min}" if self.min is not None else f"<= {self.max}"


class FileCheck(BaseModel):
    """A file the run wrote (or left) in its workspace."""

    model_config = _CONFIG

    path: Text
    """The file's path inside the run's workspace."""
    exists: StrictBool = True
    """Whether it must exist (false: must not)."""
    equals: str | None = None
    """Its whole text, leading and trailing white space aside."""
    contains: str | list[str] | None = None
    """Text (or texts) it must contain."""
    regex: str | None = None
    """A regular expression it must match somewhere."""


class JsonPathCheck(BaseModel):
    """A value in the output read as JSON: `$.totals.revenue`, `$.items[0].name`."""

    model_config = _CONFIG

    path: Text
    """Where the value is: `$.totals.revenue`, `$.items[0].name` (`$` the whole output)."""
    equals: Any = None
    """The value it must have; left out, the path must only exist."""


class DataCheck(BaseModel):
    """The run's validated structured answer (its output step's `output_schema`): the value at
    `path` (`$` the whole answer), equal to `equals`, or holding to `json_schema`; a run that
    ended without valid data fails it."""

    model_config = _CONFIG

    path: Text = "$"
    """Where the value is in the answer: `$.total`, `$.items[0]` (`$` the whole answer)."""
    equals: Any = None
    """The value it must have; left out (with no `json_schema`), the path must only exist."""
    json_schema: dict[str, Any] | None = None
    """A JSON schema the value must satisfy (needs the `[eval]` extra)."""


class JudgeSpec(BaseModel):
    """A model that grades the output with a rubric; its spend is counted apart."""

    model_config = _CONFIG

    rubric: Text
    """What a good answer does, for the judge to grade against."""
    model: VariantModel | None = None
    """The judge's model (a model string or an alias); default: the job's model."""
    pass_score: Fraction = 0.5
    """The least score (0 to 1) that passes."""


class TriggerCheck(BaseModel):
    """Whether the run loaded a skill (or, with eager disclosure, called one of its tools)
    before its answer, against whether it should have."""

    model_config = _CONFIG

    skill: Name
    """The skill."""
    should_trigger: StrictBool
    """Whether the run should have loaded it."""


class ToolErrorsCheck(BaseModel):
    """The run's tool calls that failed (raised, timed out, were refused, named no tool, had
    bad arguments): at most `allow` of them, those of the `ignore`d tools not counted."""

    model_config = _CONFIG

    allow: Annotated[int, Field(ge=0)] = 0
    """How many failed tool calls the run may have."""
    ignore: list[Text] = Field(default_factory=list)
    """Tools whose failures are not counted (`skill__tool`), e.g. one meant to fail."""


ScorerKind = Literal[
    "status",
    "equals",
    "contains",
    "not_contains",
    "regex",
    "json_path",
    "json_schema",
    "data",
    "file",
    "skills_loaded",
    "skills_not_loaded",
    "tools_called",
    "tools_not_called",
    "forks",
    "steps",
    "max_tokens",
    "max_cost_usd",
    "max_seconds",
    "python",
    "judge",
    "trigger",
    "no_tool_errors",
]
KINDS: tuple[str, ...] = get_args(ScorerKind)


class Scorer(BaseModel):
    """One check of a run: exactly one of the kinds below, and optionally a `name`."""

    model_config = _CONFIG

    name: Text | None = None
    """How the check shows in results; default: its kind and argument."""
    status: (
        Literal["completed", "failed", "budget_exhausted", "cancelled", "input_required"] | None
    ) = None
    """How the job must end (without any `status` scorer: `completed`)."""
    equals: str | None = None
    """The output, leading and trailing white space aside."""
    contains: str | list[str] | None = None
    """Text (or texts) the output must contain."""
    not_contains: str | list[str] | None = None
    """Text (or texts) the output must not contain."""
    regex: str | None = None
    """A regular expression the output must match somewhere."""
    json_path: JsonPathCheck | None = None
    json_schema: dict[str, Any] | None = None
    """A JSON schema the output (read as JSON) must satisfy (needs the `[eval]` extra)."""
    data: DataCheck | None = None
    """The validated structured answer's fields (docs/typed-outputs.md)."""
    file: FileCheck | None = None
    skills_loaded: list[Text] | None = None
    """Skills some agent of the run loaded."""
    skills_not_loaded: list[Text] | None = None
    """Skills no agent of the run loaded."""
    tools_called: list[Text] | None = None
    """Tools some agent of the run called (`skill__tool` for a skill's)."""
    tools_not_called: list[Text] | None = None
    """Tools no agent of the run called."""
    forks: Range | None = None
    """How many `fork` calls the run made."""
    steps: Range | None = None
    """How many model calls the run made, every agent's together."""
    max_tokens: Positive | None = None
    """The most tokens the run may use."""
    max_cost_usd: NonNegative | None = None
    """The most the run may cost, in US dollars (its models need a price)."""
    max_seconds: NonNegative | None = None
    """The most wall time the run may take."""
    python: Text | None = None
    """`file.py:function` (beside the eval file) or `module:function`: called with the run
    (`orchestrator.eval.RunRecord`); returns a bool, a score from 0 to 1, or a `Score`."""
    judge: JudgeSpec | None = None
    trigger: TriggerCheck | None = None
    no_tool_errors: Literal[True] | ToolErrorsCheck | None = None
    """`true`: no tool call of the run failed; or `{allow: N, ignore: [tools]}`."""

    @model_validator(mode="after")
    def _one_kind(self) -> Scorer:
        given = [kind for kind in KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(f"give exactly one kind of check ({', '.join(KINDS)}); got {found}")
        return self

    @property
    def kind(self) -> str:
        return next(kind for kind in KINDS if getattr(self, kind) is not None)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        value = getattr(self, self.kind)
        if isinstance(value, Range):
            shown = str(value)
        elif isinstance(value, TriggerCheck):
            shown = f"{value.skill} {'yes' if value.should_trigger else 'no'}"
        elif self.kind == "no_tool_errors":
            return self.kind
        elif isinstance(value, BaseModel):
            shown = getattr(value, "path", None) or "rubric"
        elif isinstance(value, list):
            shown = ", ".join(map(str, value))
        else:
            shown = str(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"{self.kind} {shown}" if self.kind != "json_schema" else "json_schema"

    def texts(self) -> list[str]:
        """The texts of this check that may name `{expected.X}` or `{inputs.X}`."""
        value = getattr(self, self.kind)
        found: list[Any] = []
        if isinstance(value, BaseModel):
            found = list(value.model_dump().values())
        elif isinstance(value, list):
            found = value
        else:
            found = [value]
        flat: list[str] = []
        for item in found:
            flat.extend(item if isinstance(item, list) else [item])
        return [item for item in flat if isinstance(item, str)]


PROBE_KINDS = (
    "equals",
    "contains",
    "not_contains",
    "regex",
    "json_path",
    "json_schema",
    "python",
    "judge",
)
"""The checks that read a text: what a probe's answer is held to."""


REFERENCE = "reference"
"""The variant an eval with probes adds first: the job with a window large enough for no cut
(`reference_window`, or the job's model as it is)."""


class Probe(BaseModel):
    """A question asked of a run's conversation as the model had it at one point (compaction
    stubs and all), to measure what a compaction lost; its answer is held to `checks`."""

    model_config = _CONFIG

    id: Name
    """How results name it."""
    question: Text
    """What is asked, as a user message appended to the conversation."""
    after: Positive | Literal["end"] = "end"
    """Where: after the agent's Nth model call (its tool results in), or at the `end` (its
    final answer in)."""
    agent: Text | None = None
    """The agent whose conversation is asked (its path in the trace: `goal`, a step's id,
    `goal/task`); default: the job's output step."""
    checks: list[Scorer]
    """What the answer is held to: checks that read a text (`equals`, `contains`,
    `not_contains`, `regex`, `json_path`, `json_schema`, `python`, `judge`)."""

    @field_validator("after", mode="before")
    @classmethod
    def _a_call_or_the_end(cls, value: Any) -> Any:
        if value == "end" or (type(value) is int and value >= 1):
            return value
        raise ValueError(f"expected a number of model calls (1 or more) or 'end', got {value!r}")

    @field_validator("checks")
    @classmethod
    def _some_check(cls, value: list[Scorer]) -> list[Scorer]:
        if not value:
            raise ValueError("give at least one check of the answer")
        return value


class Case(BaseModel):
    """One case: the job's inputs, the values its scorers compare with, and its own scorers."""

    model_config = _CONFIG

    id: Name | None = None
    """How results name it; default: its number (1 for the first)."""
    inputs: dict[Name, InputValue] = Field(default_factory=dict)
    """Values for the job's `inputs`."""
    expected: dict[Name, Any] = Field(default_factory=dict)
    """Values scorers name as `{expected.NAME}`."""
    files: dict[Text, str] = Field(default_factory=dict)
    """Files written into the run's workspace before it starts (path: text)."""
    copies: dict[Text, Location] = Field(default_factory=dict)
    """Files copied into the run's workspace before it starts, as they are (path in the
    workspace: the file to copy, named from the eval file's folder)."""
    scorers: list[Scorer] = Field(default_factory=list)
    """Checks of this case alone, after the eval's own."""


class Variant(BaseModel):
    """One way to run the job: what it changes of the spec. A variant changes nothing it
    does not name."""

    model_config = _CONFIG

    name: Name | None = None
    """How the table names it; default: what it changes."""
    model: VariantModel | None = None
    """The model (as `--model`): a model string or an alias; a scripted model's script
    is named from the eval file's folder."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """Settings of the model (as `--model-option`): temperature, max_output_tokens, ..."""
    skills_add: list[Location] = Field(default_factory=list)
    """Skill folders searched before the job's own."""
    skills_remove: list[Text] = Field(default_factory=list)
    """Skills (by name) the run does not see."""
    disclosure: Disclosure | None = None
    """How skills' tools reach the model: progressive, eager or auto."""
    compaction: CompactionStrategy | None = None
    """How the job's agents compact their conversations: `mask` or `summarize` (the job's
    and every step's; a sub-agent definition that names its own keeps it)."""
    subagents: list[Location] = Field(default_factory=list)
    """Sub-agent definition folders searched before the job's own."""

    def title(self) -> str:
        if self.name:
            return self.name
        changed = self.model_dump(exclude_defaults=True, exclude={"name"})
        if not changed:
            return "baseline"
        parts = [f"{key}={shown_value(value)}" for key, value in changed.items()]
        return ",".join(parts)


def shown_value(value: Any) -> str:
    if isinstance(value, list):
        return "+".join(Path(v).name if isinstance(v, Path) else str(v) for v in value)
    if isinstance(value, dict):
        return "+".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


class EvalBudget(BaseModel):
    """One budget for the whole eval: every run of every variant draws from it."""

    model_config = _CONFIG

    max_tokens: Positive | None = None
    """Tokens of every run of the eval together; none: no cap."""
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None
    """US dollars of every run of the eval together (its models need a price); none: no
    cap."""


class EvalSpec(BaseModel):
    """A validated eval file; its paths are absolute."""

    model_config = _CONFIG

    name: Text
    """The eval's name, shown in its table and results."""
    job: JobSource
    """The job: a spec file, or a spec written here (a mapping: name, model, goal or steps,
    ...); its paths resolve against this file's folder."""
    cases: list[Case] | Location
    """The cases: a list, or a `.csv` / `.jsonl` file of them (docs/eval.md)."""
    scorers: list[Scorer] = Field(default_factory=list)
    """Checks every run of every case is held to."""
    variants: list[Variant] = Field(default_factory=list)
    """The ways to run the job, compared side by side; none: the job as it is."""
    matrix: dict[
        Literal["model", "model_options", "skills_add", "skills_remove", "disclosure", "subagents"],
        list[Any],
    ] = Field(default_factory=dict)
    """Values to cross: every combination is a variant (crossed with `variants` if both)."""
    repeat: Positive = 1
    """How many times each case runs in each variant."""
    concurrency: Positive = 4
    """How many runs go at once."""
    budget: EvalBudget = Field(default_factory=EvalBudget)
    min_pass: Fraction | None = None
    """The least pass rate every variant must reach (`--min-pass` overrides it)."""
    workspace: Literal["copy", "shared"] = "copy"
    """`copy`: each run works in a copy of the job's workspace (its files checked apart);
    `shared`: every run in the workspace itself, one at a time."""
    until_triggered: Name | None = None
    """A trigger eval: each run ends as soon as it has loaded this skill (or, eagerly, called
    one of its tools), with no further model call; a run that answers first did not."""
    baseline: Name | None = None
    """The variant the others are compared to: each one's lift in pass rate over it, with
    its 95% interval, and a `benchmark.json` beside the results (skill-creator's layout)."""
    probes: list[Probe] = Field(default_factory=list)
    """Compaction probes: questions asked of every run's conversation at chosen points, to
    measure what compacting it lost; a `reference` variant runs beside the others."""
    probe_model: VariantModel | None = None
    """The model that answers the probes; default: the job's model (as the variant sets it)."""
    reference_window: Positive | None = None
    """The context window of the `reference` variant (large enough for no cut); default: the
    job's model as the job sets it."""
    on_input: OnInput = "deny"
    """Where a call needs a person (a call marked `ask`, an agent's question): no one answers
    an eval's run, so by default the call is denied (`deny`); `wait` ends the run
    `input_required`, `fail` ends it `error` (docs/waiting.md). Over the job's own."""
    denied_input_fails: StrictBool = True
    """A run where a call that needed a person was denied fails its `no_denied_input` check
    (it did not do what it tried); false: the denial is the model's to handle."""
    volatile_tools: list[Text] = Field(default_factory=list)
    """Tools whose output changes from run to run (a clock, a network call, an MCP server's):
    on `--replay` they run again and their new result is taken as it is, not compared with
    the recording. Names as the model calls them (`skill__tool`); `*` matches any text."""


def eval_schema() -> dict[str, Any]:
    """The JSON Schema of an eval file as it is written (`orchestrator schema eval`)."""
    return written_schema(EvalSpec, "orchestrator eval file", "An eval file (docs/eval.md).")
