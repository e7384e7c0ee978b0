"""What decides a run: every kind of file the package reads to configure or continue a run.

One boundary holds the whole safety design together: what the model may write never decides
a run. The model writes in its workspace; everything listed here lives outside it by default
(a job's workspace is `work/` beside its spec), and wherever it lies, the file tools refuse to
create, write or edit it, and never read the kinds that hold keys (`refusal`, called by
`Permissions.require_writable` and `require_readable`).

A kind is recognised three ways:

- by a file's name, wherever it lies (`.env`, `.mcp.json`, `SKILL.md`);
- by a folder on its path below the workspace (`skills/`, `.claude/`, `.orchestrator/`);
- by the run itself, which names the files it reads (its spec and the files the spec names,
  its trace, a batch's results): those are the permissions' `read_only` paths. An existing
  YAML file that reads as a job spec is recognised by its content too, so a second spec in
  the same folder is as safe as the run's own.

`KINDS` is data, and a test holds the package to it: every function of the package that reads
a file declares so where it is defined, either as a reader of a kind here (`@reads(kind)`) or
with the reason it reads no configuration (`@reads_no_configuration(why)`); `readers()` and
`other_reads()` collect the declarations of the modules imported, and the test imports them
all (tests/test_trust_inventory.py). A new kind of configuration file therefore cannot be added
without being named here, nor a new reader without saying what it reads.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, TypeVar

DOTENV_FILES = (".env", ".env.*")
SKILL_FILES = ("SKILL.md", "skill.md")
MCP_CONFIG_FILES = (".mcp.json", "mcp.json")
SCHEMA_FILE_SUFFIXES = (".json", ".yaml", ".yml")
"""An `output_schema` (of a spec, a step, a sub-agent definition) ending so is a schema file;
else a dotted path of a Python type."""
PROJECT_SKILL_FOLDERS = ("skills", ".claude/skills", ".agents/skills")
USER_SKILL_FOLDERS = (".claude/skills", ".agents/skills")
PROJECT_SUBAGENT_FOLDERS = ("subagents", ".claude/agents", ".codex/agents")
USER_SUBAGENT_FOLDERS = (".claude/agents", ".codex/agents")
RUNS_FOLDER = ".orchestrator"
TRACE_FOLDER = Path(RUNS_FOLDER) / "runs"
WAITING_TASKS_FILE = "a2a-waiting.json"
"""Where `serve` keeps its tasks that wait for an answer (under its trace folder): which
trace each resumes, and for whom."""
CONFIG_FOLDER = "orchestrator"
"""The user's own folder under `$XDG_CONFIG_HOME` (else `~/.config`): aliases, the trace key."""
DEFAULT_WORKSPACE = "work"
"""A job's workspace when its spec names none: this folder beside the spec."""


@dataclass(frozen=True)
class Kind:
    """One kind of file that configures or continues a run."""

    name: str
    holds: str
    """What it holds, in words a refusal can show."""
    file_names: tuple[str, ...] = ()
    """Patterns of file names that are this kind wherever they lie."""
    folders: tuple[str, ...] = ()
    """Folders (by name, or a path of names) whose whole content is this kind, at any depth
    below the workspace."""
    user_config: bool = False
    """The user's configuration folder (`~/.config/orchestrator/`) is this kind."""
    named_by_run: bool = False
    """The run names the files of this kind it reads (they become `read_only` paths)."""
    secret: bool = False
    """The file tools never read it either: it holds keys."""


KINDS: tuple[Kind, ...] = (
    Kind(
        "job spec",
        "what a run does, with which model, permissions and budget",
        named_by_run=True,
    ),
    Kind(
        "file a spec names",
        "what a spec's models, prices, output schemas and pins read (a script, a recording, "
        "prices, a schema file, a pinned file)",
        named_by_run=True,
    ),
    Kind(
        "dotenv",
        "keys and base URLs for models",
        file_names=DOTENV_FILES,
        secret=True,
    ),
    Kind(
        "user configuration",
        "your own settings: model aliases and the key that signs traces",
        user_config=True,
        secret=True,
    ),
    Kind(
        "skill",
        "instructions and code that runs load",
        file_names=SKILL_FILES,
        folders=("skills", ".claude", ".agents"),
    ),
    Kind(
        "sub-agent definition",
        "the prompts, models and limits of forked agents",
        folders=("subagents", ".claude", ".codex"),
    ),
    Kind(
        "MCP configuration",
        "the MCP servers a skill starts",
        file_names=MCP_CONFIG_FILES,
    ),
    Kind(
        "trace",
        "the run history that `resume`, `trace show` and `report` read (and the served "
        "tasks that wait to resume)",
        file_names=(WAITING_TASKS_FILE,),
        folders=(RUNS_FOLDER,),
        named_by_run=True,
    ),
    Kind(
        "batch results",
        "the rows a batch runs and those it has done",
        file_names=("*.results.jsonl",),
        named_by_run=True,
    ),
    Kind(
        "eval",
        "an eval's cases, the runs it has done and the recordings it replays",
        file_names=("*.eval.yaml", "*.eval.yml"),
        named_by_run=True,
    ),
    Kind(
        "version control",
        "version control history and hooks, which run on your next commit (.git)",
        folders=(".git",),
    ),
)

_KIND_NAMES = frozenset(kind.name for kind in KINDS)
_READERS: dict[str, str] = {}
_OTHER_READS: dict[str, str] = {}

Reader = TypeVar("Reader", bound=Callable[..., Any])


def reads(kind: str) -> Callable[[Reader], Reader]:
    """Declare, on the function itself, that it reads files of `kind` (a `Kind.name` above);
    the function is returned as it is."""
    if kind not in _KIND_NAMES:
        raise ValueError(f"{kind!r} is no kind of the inventory: {sorted(_KIND_NAMES)}")

    def declare(reader: Reader) -> Reader:
        _READERS[_name(reader)] = kind
        return reader

    return declare


def reads_no_configuration(why: str) -> Callable[[Reader], Reader]:
    """Declare, on the function itself, that it reads or opens files that configure no run,
    and `why`; the function is returned as it is."""

    def declare(reader: Reader) -> Reader:
        _OTHER_READS[_name(reader)] = why
        return reader

    return declare


def readers() -> Mapping[str, str]:
    """Every function declared with `reads` (`module:qualified.name`), and the kind it
    reads: those of the modules imported so far (the core never imports an optional part
    to ask it)."""
    return dict(_READERS)


def other_reads() -> Mapping[str, str]:
    """Every function declared with `reads_no_configuration`, and why it reads no
    configuration (those of the modules imported so far)."""
    return dict(_OTHER_READS)


def _name(reader: Callable[..., Any]) -> str:
    return f"{reader.__module__}:{reader.__qualname__.replace('.<locals>', '')}"


_SPEC_KEYS = re.compile(rb"^(model|goal|steps)\s*:", re.MULTILINE)
_SPEC_SNIFF_BYTES = 256 * 1024


@dataclass(frozen=True)
class Protected:
    """Why a path is off limits to the file tools: the kind, and the rule that matched."""

    kind: Kind
    rule: str

    def message(self, shown: str) -> str:
        """Why the file tools may not change it."""
        return (
            f"{shown} is {self.rule}: it holds {self.kind.holds}. The model's file tools "
            "cannot change it: what a model writes never decides a run (docs/skills.md, "
            "Safety)."
        )


def user_config_folder(environ: Mapping[str, str] | None = None) -> Path:
    """The user's configuration folder (`$XDG_CONFIG_HOME/orchestrator`); it need not exist."""
    env = os.environ if environ is None else environ
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config).expanduser() / CONFIG_FOLDER


def protected(
    target: Path,
    *,
    workspace: Path,
    named: Iterable[Path] = (),
    secret_files: Iterable[str] = DOTENV_FILES,
) -> Protected | None:
    """The kind of run configuration `target` (absolute, resolved) is, if any.

    `workspace` is the resolved workspace root (folder rules apply below it), `named` the
    paths the run itself protects (its spec, the files it names, its skills, its trace), and
    `secret_files` the file-name patterns that hold keys (the permissions' own list).
    """
    for path in named:
        base = path.expanduser().resolve()
        if target == base or target.is_relative_to(base):
            return Protected(_RUN_NAMED, f"read-only for this run (it lies in {base})")
    name = target.name
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in secret_files):
        return Protected(_DOTENV, f"a file of keys ({name})")
    for kind in KINDS:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in kind.file_names):
            return Protected(kind, f"a {kind.name} file ({name})")
    config = user_config_folder().resolve()
    if target == config or target.is_relative_to(config):
        return Protected(_USER_CONFIG, f"in your configuration folder ({config})")
    parts = _parts_below(target, workspace)
    for kind in KINDS:
        for folder in kind.folders:
            if _has_folder(parts, PurePath(folder).parts):
                return Protected(kind, f"inside a {folder}/ folder")
    if _reads_as_job_spec(target):
        return Protected(KINDS[0], "a job spec (its top level names a model and a goal or steps)")
    return None


def secret(target: Path, *, secret_files: Iterable[str] = DOTENV_FILES) -> Protected | None:
    """The secret kind `target` (absolute, resolved) is, if the file tools must not read it."""
    if any(fnmatch.fnmatchcase(target.name, pattern) for pattern in secret_files):
        return Protected(_DOTENV, f"a {target.name} file")
    config = user_config_folder().resolve()
    if target == config or target.is_relative_to(config):
        return Protected(_USER_CONFIG, f"in your configuration folder ({config})")
    return None


def configuration_in(folder: Path) -> list[str]:
    """The names of what, directly in `folder`, configures a run (for `ask`, which keeps its
    workspace apart from a folder that holds any): `.env` files, skill and sub-agent folders,
    MCP configurations, job specs. Traces do not count: every run leaves some."""
    found = []
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError:
        return []
    folders = {PurePath(f).parts[0] for f in (*PROJECT_SKILL_FOLDERS, *PROJECT_SUBAGENT_FOLDERS)}
    files = (*DOTENV_FILES, *MCP_CONFIG_FILES)
    for entry in entries:
        name = entry.name
        if entry.is_dir() and name in folders:
            found.append(f"{name}/")
        elif any(fnmatch.fnmatchcase(name, pattern) for pattern in files) or (
            entry.is_file() and _reads_as_job_spec(Path(entry.path))
        ):
            found.append(name)
    return found


def default_workspace(base: Path | None = None) -> Path:
    """Where the model works when nobody said: `base` (the working folder by default) when it
    holds no configuration, else its `work/` folder. A job's spec folder always holds its
    spec, so a job's default workspace is `work/` beside the spec."""
    base = Path.cwd() if base is None else base
    return base / DEFAULT_WORKSPACE if configuration_in(base) else base


def is_default_workspace(folder: Path) -> bool:
    """Whether `folder` is a `work/` folder that a run may make on first use."""
    return folder.name == DEFAULT_WORKSPACE and folder.parent.is_dir()


def _parts_below(target: Path, workspace: Path) -> tuple[str, ...]:
    """The folders between `workspace` and `target` (empty if `target` is not below it)."""
    try:
        return target.relative_to(workspace).parts[:-1] + (target.name,)
    except ValueError:
        return ()


def _has_folder(parts: tuple[str, ...], folder: tuple[str, ...]) -> bool:
    """Whether `folder` (a sequence of names) appears in `parts` as folders of the path;
    the last part counts too (creating the folder itself is refused)."""
    width = len(folder)
    return any(parts[i : i + width] == folder for i in range(len(parts) - width + 1))


@reads("job spec")
def _reads_as_job_spec(path: Path) -> bool:
    """Whether an existing YAML file's top level names a model and a goal or steps."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        return False
    try:
        with path.open("rb") as file:
            head = file.read(_SPEC_SNIFF_BYTES)
    except OSError:
        return False
    keys = {match.group(1) for match in _SPEC_KEYS.finditer(head)}
    return b"model" in keys and bool(keys & {b"goal", b"steps"})


def _kind(name: str) -> Kind:
    return next(kind for kind in KINDS if kind.name == name)


_RUN_NAMED = Kind(
    "run configuration",
    "what this run reads (its spec and the files it names, its skills, sub-agents and trace) "
    "or what its permissions made read-only",
)
_DOTENV = _kind("dotenv")
_USER_CONFIG = _kind("user configuration")
