"""Sub-agent definitions: markdown files with YAML frontmatter; the body is the system prompt.

    ---
    name: researcher
    description: Reads files and answers with citations.
    skills: [files, data]      # allowed skills, or "*" for all
    model: haiku               # optional: a model string, an alias, a settings mapping, or
                               # inherit (the forking agent's model, also the default)
    max_steps: 15              # optional
    max_tokens: 40000          # optional; a cap inside the run's one budget
    ---
    You are a careful researcher...

Claude Code's sub-agent files (`.claude/agents/*.md`) and Codex's (`.codex/agents/*.toml`)
load unchanged (subagent_files.py). Loading is lenient (what can be made up for is, with a
warning; a file that cannot be understood is left out with a warning naming it and the
problem); `check_subagent_folder` is strict and reports every problem. The first folder on
the search path wins when two files share a name. A general-purpose agent, `general`, always
exists.

A definition is one of the levels that choose an agent's settings, most specific first: the
call (a job step's own fields, or what the caller passes), the task a `fork` call gives, the
sub-agent definition that runs it, and the run (the orchestrator's settings, a job's
defaults). Each says what it chooses in `Choices` and leaves the rest as None; `merged`
applies the one rule, written here once:

- a choice **overrides**: the most specific level that makes one wins (the model, the
  answer's type, mode and retries, compaction, the `note` tool);
- a limit only **narrows**: the smallest any level gives holds (the step cap, the token cap).

Permissions narrow too, by another road: an agent's are its parent's, only ever restricted
(security/permissions.py); the token budget is one for the whole tree, each cap within it.
docs/architecture.md has the table.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..agent import DEFAULT_OUTPUT_RETRIES, CompactionStrategy, OutputMode
from ..errors import ConfigError, SafetyWarning
from ..messages import inert
from ..models import INHERIT, ChatModel, ModelSettings
from ..skills.discovery import shipped_folder
from .subagent_files import CLAUDE_ONLY, NAME, NO_EFFECT, DefinitionError, read_definition

if TYPE_CHECKING:
    from ..agent import OutputSpec

GENERAL = "general"
GENERAL_PROMPT = (
    "You are a capable general-purpose worker agent. Do the task you are given, using the "
    "tools and skills available to you, and finish with a complete, self-contained answer: "
    "the agent that gave you the task sees only your final message."
)


# --- How the levels of a run choose an agent's settings ------------------------------------

Rule = Literal["override", "narrow"]


def _choice(rule: Rule) -> Any:
    return field(default=None, metadata={"rule": rule})


@dataclass(frozen=True)
class Choices:
    """What one level says of an agent's settings; None where it says nothing."""

    model: ChatModel | None = _choice("override")
    output: OutputSpec[Any] | None = _choice("override")
    """What its answer must be."""
    output_mode: OutputMode | None = _choice("override")
    output_retries: int | None = _choice("override")
    compaction: CompactionStrategy | None = _choice("override")
    note: bool | None = _choice("override")
    questions: bool | None = _choice("override")
    """Whether it gets the `ask_user` tool (agent/waiting.py)."""
    max_steps: int | None = _choice("narrow")
    max_tokens: int | None = _choice("narrow")


RULES: dict[str, Rule] = {f.name: f.metadata["rule"] for f in fields(Choices)}
"""Each setting and how its levels merge (the table in docs/architecture.md)."""
_LIMITS = frozenset(name for name, rule in RULES.items() if rule == "narrow")


def merged(*levels: Choices) -> Choices:
    """`levels`, most specific first, merged by the one rule: for a choice the first level
    that makes one; for a limit the smallest given."""
    chosen: dict[str, Any] = {}
    for level in reversed(levels):  # the least specific first: a more specific one overrides
        for name, value in vars(level).items():
            if value is None:
                continue
            if name in _LIMITS and (above := chosen.get(name)) is not None:
                value = min(value, above)
            chosen[name] = value
    return Choices(**chosen)


# --- Definitions ----------------------------------------------------------------------------


class RemoteAgent(BaseModel):
    """Where a sub-agent that runs elsewhere is reached: an A2A agent (docs/a2a.md), run by
    the optional `orchestrator.a2a`. What it returns is untrusted input, like a tool result."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The agent's base URL, or its card's URL.")
    token_env: str | None = Field(
        default=None, description="The environment variable holding its bearer token."
    )
    skill: str | None = Field(
        default=None, description="The skill of the agent to ask (sent as metadata `skill`)."
    )
    time_limit: float = Field(
        default=600.0, gt=0, description="Seconds one task may take; then it is cancelled."
    )
    max_calls: int | None = Field(
        default=None, ge=1, description="How many tasks one run may send it; None: no cap."
    )

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        return url


class SubagentDef(BaseModel):
    """One sub-agent definition."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        description="Lowercase letters, digits and single inner hyphens (or underscores)."
    )
    description: str = Field(description="One line: what this agent is good at.")
    skills: list[str] | Literal["*"] = Field(
        default="*", description="Skill names this agent may use, or '*' for all."
    )
    model: ModelSettings | None = Field(
        default=None,
        description="A model string, alias or settings mapping; `inherit` (the default) uses "
        "the model of the agent that forks it.",
    )
    max_steps: int | None = Field(default=None, ge=1, description="A cap on model calls.")
    max_tokens: int | None = Field(default=None, ge=1, description="A cap inside the budget.")
    system: str = Field(default="", description="The system prompt: the file's body.")
    path: Path | None = Field(default=None, description="The file it was read from.")
    tools: list[str] | None = Field(
        default=None,
        description="The only tools it may call (Claude Code's names or ours); None: any.",
    )
    disallowed_tools: list[str] = Field(
        default_factory=list, description="Tools it may never call (Claude Code's or ours)."
    )
    preload: list[str] = Field(
        default_factory=list, description="Skills it starts with loaded (among those allowed)."
    )
    metadata: dict[str, str] = Field(
        default_factory=dict, description="Other fields of its file (Claude Code's `color`...)."
    )
    format: Literal["orchestrator", "claude", "codex"] = Field(
        default="orchestrator", description="The file format it was read from."
    )
    remote: RemoteAgent | None = Field(
        default=None, description="An A2A agent elsewhere that runs its tasks (`a2a: URL`)."
    )
    output_schema: dict[str, Any] | str | None = Field(
        default=None,
        description="What its answer must be: a JSON Schema, a schema file beside the "
        "definition, or the dotted path of a pydantic model (docs/typed-outputs.md); a task "
        "or step's own schema goes first.",
    )
    output_mode: OutputMode | None = Field(
        default=None, description="`tool`, `native` or `prompted`; default: the model's."
    )
    output_retries: int = Field(
        default=DEFAULT_OUTPUT_RETRIES,
        ge=0,
        description="Answers that do not validate sent back before it ends `output_invalid`.",
    )
    compaction: CompactionStrategy | None = Field(
        default=None,
        description="How it compacts its conversation: `mask` or `summarize`; default: the "
        "run's (docs/context-window.md).",
    )
    note: bool | None = Field(
        default=None,
        description="Give it the `note` tool (its working record); default: the run's.",
    )
    questions: bool | None = Field(
        default=None,
        description="Give it the `ask_user` tool, to ask the user a question (the run may "
        "wait for the answer: docs/waiting.md); default: the run's.",
    )

    @model_validator(mode="after")
    def _read_output_schema(self) -> SubagentDef:
        try:
            self.output_spec  # noqa: B018 - read once here, so a bad schema fails the load
        except ConfigError as exc:
            raise ValueError(f"output_schema: {exc}") from None
        return self

    @property
    def output_spec(self) -> OutputSpec[Any] | None:
        """What its answer must be, read from `output_schema` (a file or a module beside the
        definition); None: free text. Read when asked, so the definition stays plain data that
        another process can take."""
        if self.output_schema is None:
            return None
        from ..agent.output import load_output_spec  # loaded by a definition with an output type

        folder = self.path.parent if self.path is not None else Path.cwd()
        return load_output_spec(self.output_schema, folder)

    @field_validator("model", mode="before")
    @classmethod
    def _inherit(cls, model: Any) -> Any:
        return None if model == INHERIT else model

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not NAME.match(name) or len(name) > 64:
            raise ValueError(
                f"{name!r} must be 1-64 lowercase letters, digits and single inner hyphens"
            )
        return name

    def allows_skill(self, skill: str) -> bool:
        return self.skills == "*" or skill in self.skills

    def choices(self, *, output: bool = True) -> Choices:
        """What the definition chooses for the agents it runs (`merged`); its model
        is resolved by the run, only where it is the one chosen. Its answer's mode and
        retries go with its own answer type: without `output` (a step or task gave one of
        its own) it chooses none of the three."""
        if not output:
            return Choices(
                compaction=self.compaction,
                note=self.note,
                questions=self.questions,
                max_steps=self.max_steps,
                max_tokens=self.max_tokens,
            )
        return Choices(
            output=self.output_spec,
            output_mode=self.output_mode,
            output_retries=self.output_retries,
            compaction=self.compaction,
            note=self.note,
            questions=self.questions,
            max_steps=self.max_steps,
            max_tokens=self.max_tokens,
        )


GENERAL_AGENT = SubagentDef(
    name=GENERAL,
    description="A general-purpose worker for any self-contained task.",
    system=GENERAL_PROMPT,
)


@dataclass(frozen=True)
class SubagentProblem:
    """Why a file was left out or would fail the strict check."""

    path: Path
    message: str

    def __str__(self) -> str:
        return inert(f"{self.path}: {self.message}")  # a file's words, for a log or a terminal


class SubagentError(ConfigError):
    """A definition file that cannot be understood: which file, and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _definition_files(folder: Path) -> list[Path]:
    found = [*folder.glob("*.md"), *folder.glob("*.toml")]
    return [p for p in sorted(found) if p.name.lower() != "readme.md" and p.is_file()]


def parse_subagent(path: Path) -> SubagentDef:
    """Read one definition leniently; raise ConfigError naming the file and the rule broken."""
    return read_subagent(path)[0]


def read_subagent(path: Path) -> tuple[SubagentDef, list[str]]:
    """One definition and the warnings about what its reading made up for; SubagentError
    (a ConfigError naming the file) when it cannot be understood."""
    try:
        fields, notes = read_definition(path)
    except DefinitionError as exc:
        raise SubagentError(path, str(exc)) from None
    try:
        agent = SubagentDef(**fields, path=path)
    except ValidationError as exc:
        raise SubagentError(path, _describe(exc)) from None
    return agent, notes


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(p) for p in error["loc"]) or "frontmatter"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


class SubagentRegistry:
    """The sub-agents available to a run, found in folders of `*.md` files."""

    def __init__(
        self, agents: Iterable[SubagentDef] = (), *, folders: Sequence[str | Path] = ()
    ) -> None:
        """Definitions given directly come first, then folders scanned in order; the first
        definition of a name wins (later ones are warned about). `general` is added last."""
        self._agents: dict[str, SubagentDef] = {}
        self.warnings: list[SubagentProblem] = []
        self.folders = [Path(folder) for folder in folders]
        for agent in agents:
            self._agents.setdefault(agent.name, agent)
        for folder in folders:
            self._scan(Path(folder))
        self._agents.setdefault(GENERAL, GENERAL_AGENT)

    def _scan(self, folder: Path) -> None:
        if not folder.is_dir():
            self.warnings.append(SubagentProblem(folder, "not a folder; skipped"))
            return
        for path in _definition_files(folder):
            try:
                agent, notes = read_subagent(path)
            except SubagentError as exc:
                self.warnings.append(SubagentProblem(path, f"left out: {exc.reason}"))
                continue
            self.warnings.extend(SubagentProblem(path, note) for note in notes)
            for note in notes:
                if NO_EFFECT in note:
                    warnings.warn(inert(f"{path}: {note}"), SafetyWarning, stacklevel=3)
            first = self._agents.get(agent.name)
            if first is not None:
                self.warnings.append(
                    SubagentProblem(path, f"name {agent.name!r} already defined by {first.path}")
                )
                continue
            self._agents[agent.name] = agent

    def get(self, name: str) -> SubagentDef | None:
        return self._agents.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._agents)

    def __iter__(self) -> Iterator[SubagentDef]:
        return iter(self._agents.values())

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def __len__(self) -> int:
        return len(self._agents)

    def index(self) -> str:
        """One line per agent, for a planner's system prompt."""
        return "\n".join(f"- {a.name}: {a.description}" for a in self._agents.values())


def builtin_subagent_folders(include: bool = True) -> list[Path]:
    """The shipped sub-agents folder, when there is one and it is wanted."""
    if not include:
        return []
    folder = shipped_folder("subagents")
    return [folder] if folder is not None else []


def check_subagent_folder(folder: str | Path) -> list[SubagentProblem]:
    """Every problem with every definition in a folder (strict: used by the check command)."""
    root = Path(folder)
    if not root.is_dir():
        return [SubagentProblem(root, "not a folder")]
    problems: list[SubagentProblem] = []
    seen: dict[str, Path] = {}
    for path in _definition_files(root):
        try:
            agent, notes = read_subagent(path)
        except SubagentError as exc:
            problems.append(SubagentProblem(path, exc.reason))
            continue
        problems.extend(SubagentProblem(path, note) for note in notes)
        if agent.format == "orchestrator":
            problems.extend(
                SubagentProblem(path, f"{key}: unknown field") for key in agent.metadata
            )
            if agent.name != path.stem:
                problems.append(
                    SubagentProblem(path, f"name {agent.name!r} differs from the file name")
                )
        elif agent.format == "claude":
            unknown = [key for key in agent.metadata if key not in CLAUDE_ONLY]
            problems.extend(SubagentProblem(path, f"{key}: unknown field") for key in unknown)
        if agent.name in seen:
            problems.append(
                SubagentProblem(path, f"name {agent.name!r} also defined in {seen[agent.name]}")
            )
        seen.setdefault(agent.name, path)
        if not agent.system:
            problems.append(SubagentProblem(path, "the body (the system prompt) is empty"))
    return problems
