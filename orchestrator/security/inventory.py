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
a file is listed, either as a reader of a kind here or in `OTHER_READS` with the reason it does
not configure a run (tests/test_trust_inventory.py). A new kind of configuration file therefore
cannot be added without being named here.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

DOTENV_FILES = (".env", ".env.*")
SKILL_FILES = ("SKILL.md", "skill.md")
MCP_CONFIG_FILES = (".mcp.json", "mcp.json")
PROJECT_SKILL_FOLDERS = ("skills", ".claude/skills", ".agents/skills")
USER_SKILL_FOLDERS = (".claude/skills", ".agents/skills")
PROJECT_SUBAGENT_FOLDERS = ("subagents", ".claude/agents", ".codex/agents")
USER_SUBAGENT_FOLDERS = (".claude/agents", ".codex/agents")
RUNS_FOLDER = ".orchestrator"
TRACE_FOLDER = Path(RUNS_FOLDER) / "runs"
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
    readers: tuple[str, ...] = ()
    """The package's functions that read it (`module:qualified.name`)."""


KINDS: tuple[Kind, ...] = (
    Kind(
        "job spec",
        "what a run does, with which model, permissions and budget",
        named_by_run=True,
        readers=(
            "orchestrator.jobs.loading:read_yaml",
            "orchestrator.jobs.runner:spec_digest",
            "orchestrator.security.inventory:_reads_as_job_spec",
        ),
    ),
    Kind(
        "file a spec names",
        "what a spec's models, prices, output schemas and pins read (a script, a recording, "
        "prices, a schema file, a pinned file)",
        named_by_run=True,
        readers=(
            "orchestrator.models.scripted:load_script",
            "orchestrator.models.replay:load_recording",
            "orchestrator.models.prices:load_prices",
            "orchestrator.agent.output:_schema_file",
            "orchestrator.jobs.spec:Pin.render",
        ),
    ),
    Kind(
        "dotenv",
        "keys and base URLs for models",
        file_names=DOTENV_FILES,
        secret=True,
        readers=("orchestrator.jobs.loading:read_dotenv",),
    ),
    Kind(
        "user configuration",
        "your own settings: model aliases and the key that signs traces",
        user_config=True,
        secret=True,
        readers=(
            "orchestrator.models.resolve:read_alias_file",
            "orchestrator.security.signing:user_key",
        ),
    ),
    Kind(
        "skill",
        "instructions and code that runs load",
        file_names=SKILL_FILES,
        folders=("skills", ".claude", ".agents"),
        readers=(
            "orchestrator.skills.skill_md:read_frontmatter",
            "orchestrator.skills.skill_md:find_frontmatter",
            "orchestrator.skills.skill_md:read_skill_text",
            "orchestrator.skills.skill_md:read_body",
            "orchestrator.skills.skill:file_digest",
            "orchestrator.skills.check:check_folder",
            "orchestrator.skills.sources.module:verified_source",
            "orchestrator.skills.sources.module:import_module_from",
        ),
    ),
    Kind(
        "sub-agent definition",
        "the prompts, models and limits of forked agents",
        folders=("subagents", ".claude", ".codex"),
        readers=("orchestrator.tasks.subagent_files:read_definition",),
    ),
    Kind(
        "MCP configuration",
        "the MCP servers a skill starts",
        file_names=MCP_CONFIG_FILES,
        readers=(
            "orchestrator.skills.servers:check_config",
            "orchestrator.skills.servers:declared_servers",
        ),
    ),
    Kind(
        "trace",
        "the run history that `resume`, `trace show` and `report` read",
        folders=(RUNS_FOLDER,),
        named_by_run=True,
        readers=(
            "orchestrator.trace.reader:TraceReader.__iter__",
            "orchestrator.trace.reader:verify_trace",
            "orchestrator.trace.writer:Trace._open",
            "orchestrator.trace.writer:_ends_with_newline",
            "orchestrator.trace.lock:is_locked",
        ),
    ),
    Kind(
        "batch results",
        "the rows a batch runs and those it has done",
        file_names=("*.results.jsonl",),
        named_by_run=True,
        readers=(
            "orchestrator.jobs.batch:read_rows",
            "orchestrator.jobs.batch:done_rows",
            "orchestrator.jobs.batch:Batch._write",
        ),
    ),
    Kind(
        "eval",
        "an eval's cases, the runs it has done and the recordings it replays",
        file_names=("*.eval.yaml", "*.eval.yml"),
        named_by_run=True,
        readers=(
            "orchestrator.eval.loading:read_cases",
            "orchestrator.eval.runner:EvalRunner._sidecar",
            "orchestrator.eval.runner:EvalRunner._write",
            "orchestrator.eval.runner:EvalRunner._shared_digests",
            "orchestrator.eval.runner:last_lines",
            "orchestrator.eval.skill_folder:_read",
            "orchestrator.eval.skill_folder:_described",
            "orchestrator.cli.evaluate:_description",
        ),
    ),
    Kind(
        "version control",
        "version control history and hooks, which run on your next commit (.git)",
        folders=(".git",),
    ),
)

OTHER_READS: Mapping[str, str] = {
    "orchestrator.eval.skill_folder:_file_digest": "hashes a skill folder's files for an "
    "eval result's identity (what made it); decides nothing of a run",
    "orchestrator.eval.runner:_copied": "hashes the files an eval case copies into its "
    "workspace, for its result's identity; decides nothing of a run",
    "orchestrator.cli.output:MaskedStream._drop_output": "opens the null device once the "
    "reader of the CLI's output has gone",
    "orchestrator.security.workspace:open_resolved": "the file tools' own reads and writes, "
    "inside the workspace, after `refusal` has been asked",
    "orchestrator.security.workspace:_regular_file": "wraps a descriptor open_resolved opened",
    "orchestrator.security.workspace:_enter": "opens the folders on the way to a workspace file",
    "orchestrator.security.workspace:_open_folder": "opens a workspace file's folder, to lock it",
    "orchestrator.security.workspace:LockedFile.open": "reads a workspace file the file tools "
    "edit, after `refusal` has been asked",
    "orchestrator.security.workspace:LockedFile.replace": "writes a workspace file the file "
    "tools edit, after `refusal` has been asked",
    "orchestrator.mcp.connection:_group_in": "the process group a stdio MCP "
    "server's launcher wrote, in a private temporary folder of the run's own",
    "orchestrator.report.page:asset": "the report's own CSS and script, in the package",
    "orchestrator.eval.scoring:_file": "a file check reads a file of the run's own workspace, "
    "confined to it, after the run",
    "orchestrator.a2a.served:_read_small": "a file a served run wrote in its workspace, sent "
    "back as an artifact once the run ended (no link followed, nothing outside the workspace)",
    "orchestrator.cli.init:init_command": "writes a new job folder; reads nothing",
    "orchestrator.cli.__init__:_dispatch": "opens the null device to silence output",
}
"""Functions that read or open files that are not configuration, and why."""

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
