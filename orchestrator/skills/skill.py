"""What the catalog knows of a skill: its frontmatter (level 0) and, once loaded, the rest;
the MCP servers a skill declares, as declared (`ServerConfig`, read by servers.py, which a
run loads only when some skill declares servers)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..agent import Tool
from ..errors import OrchestratorError, RunHalted
from ..messages import inert
from ..security.inventory import MCP_CONFIG_FILES, reads
from ..security.permissions import Permissions, SandboxSettings, under

TOOL_SEPARATOR = "__"
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class SkillError(OrchestratorError):
    """A skill cannot be used: it is unknown, or its folder is broken."""


class SkillFailure(RunHalted):
    """A skill's code failed to load in a run asked to fail on that (`fail_on_skill_error`):
    the agent's run ends as `error`."""


DEFAULT_CALL_TIMEOUT = 60.0
DEFAULT_START_TIMEOUT = 30.0
DEFAULT_ANSWER_WITHIN = 600.0
"""Seconds an MCP server's question stays open: how long the official SDK's servers keep the
state of a call that asks (its `requestState`); the protocol says nothing of its own."""


class ServerConfig(BaseModel):
    """One MCP server as declared (before `${VAR}` expansion)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: Literal["stdio", "http", "streamable-http"] | None = None
    """`stdio` (start `command`) or `http` (connect to `url`); inferred when left out."""
    command: str | None = None
    """The program to start (stdio), found on PATH."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of the server process (it inherits only PATH, HOME and the like)."""
    cwd: str | None = None
    """The server's working folder, relative to the skill's (or the job's) folder; that folder
    by default."""
    url: str | None = None
    """The streamable-HTTP endpoint (http)."""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(DEFAULT_CALL_TIMEOUT, gt=0)
    """Seconds one `tools/call` may take before it fails as an infrastructure error."""
    start_timeout: float = Field(DEFAULT_START_TIMEOUT, gt=0, alias="startTimeout")
    """Seconds for the server to start and list its tools."""
    answer_within: float = Field(DEFAULT_ANSWER_WITHIN, gt=0, alias="answerWithin")
    """Seconds a person has to answer a question the server asks during a call (elicitation):
    an answer given later comes too late, and the server is told the question was cancelled."""
    description: str | None = None
    """For a job's `mcp_servers:`: the skill's line in the index."""
    sandbox: SandboxSettings | None = None
    """A stdio server that runs confined (docs/sandbox.md): its folder read-only, the
    sandbox's own `read_only`, `writable` and `network`, nothing else. None: it runs as you."""

    @model_validator(mode="after")
    def _kind(self) -> ServerConfig:
        kind = self.kind
        if kind == "stdio" and not self.command:
            raise ValueError("a stdio server needs a `command`")
        if kind == "http" and not self.url:
            raise ValueError("an http server needs a `url`")
        return self

    @property
    def kind(self) -> Literal["stdio", "http"]:
        if self.type in ("http", "streamable-http"):
            return "http"
        if self.type == "stdio":
            return "stdio"
        return "http" if self.url and not self.command else "stdio"

    def where(self) -> str:
        """What it is, for messages: the program or the URL (never env, headers or args)."""
        return f"command {self.command}" if self.kind == "stdio" else f"url {self.url}"


def config_file_in(folder: Path) -> Path | None:
    """The folder's `.mcp.json` (or `mcp.json`), if it has one."""
    for name in MCP_CONFIG_FILES:
        path = folder / name
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class SkillWarning:
    """A problem found in a skill folder; `left_out` when the skill could not be used."""

    folder: Path
    rule: str
    message: str
    left_out: bool = False

    def __str__(self) -> str:
        """The warning as a log line or a terminal shows it: inert (messages.py), since the
        folder's name and the message quote what a file holds."""
        outcome = "; skill left out" if self.left_out else ""
        return inert(f"{self.folder}: {self.message} [{self.rule}]{outcome}")


AllowedToolsMode = Literal["pre-approve", "restrict"]


# --- what a skill's scripts need from the sandbox -----------------------------------------
#
# A skill declares, in its frontmatter's `metadata` (strings, as the Agent Skills format has
# them), the hosts and the paths its scripts reach:
#
#     metadata:
#       sandbox-network: api.example.com:443 127.0.0.1:8080
#       sandbox-paths: ~/.cache/ms-playwright /opt/tool
#
# A declaration asks; it never widens the run. The run's own permissions (`sandbox.network`,
# and the workspace with `sandbox.read_only` and `sandbox.writable`) are what every command
# gets; what a skill asks for beyond them is not granted, and the run says so at its start.

NETWORK_KEY = "sandbox-network"
PATHS_KEY = "sandbox-paths"
_SEPARATORS = re.compile(r"[\s,]+")
HOST_PORT = re.compile(r"^\S+:\d+$")


@dataclass(frozen=True)
class SandboxNeeds:
    """The hosts (`host:port`) and paths a skill's scripts need, as declared."""

    network: tuple[str, ...] = ()
    paths: tuple[Path, ...] = ()
    """Absolute; a path written relative to the skill's folder or with `~` made so."""

    def __bool__(self) -> bool:
        return bool(self.network or self.paths)

    def described(self) -> str:
        """What is asked for, in a line: `network a:443, b:80; paths /opt/tool`."""
        parts = [f"network {', '.join(self.network)}"] if self.network else []
        parts += [f"paths {', '.join(map(str, self.paths))}"] if self.paths else []
        return "; ".join(parts)

    def refused_by(self, permissions: Permissions) -> list[str]:
        """What a run with `permissions` does not grant of this, each with why; nothing when
        commands run unconfined (they reach everything anyway: the run says so itself)."""
        sandbox = permissions.sandbox
        if sandbox.backend == "none":
            return []
        allowed = ", ".join(sandbox.network) or "none"
        refused = []
        for entry in self.network:
            host, _, port = entry.rpartition(":")
            if not HOST_PORT.match(entry):
                refused.append(f"{entry!r}: not host:port")
            elif not sandbox.allows(host, int(port)):
                refused.append(f"{entry}: not in sandbox.network ({allowed})")
        roots = (permissions.workspace_root(), *sandbox.read_only, *sandbox.writable)
        for path in self.paths:
            if not any(under(path, root.resolve()) for root in roots):
                refused.append(
                    f"{path}: not within the workspace, sandbox.read_only or sandbox.writable"
                )
        return refused


def parse_needs(metadata: Mapping[str, str], folder: Path) -> SandboxNeeds:
    """The needs a skill's `metadata` declares (values as written: a string of entries
    separated by spaces or commas, or a YAML list kept as JSON text)."""
    return SandboxNeeds(
        network=tuple(_entries(metadata.get(NETWORK_KEY))),
        paths=tuple(
            (folder / Path(entry).expanduser()).resolve()
            for entry in _entries(metadata.get(PATHS_KEY))
        ),
    )


def _entries(value: str | None) -> list[str]:
    if not value:
        return []
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = re.sub(r"[\[\]\"']", " ", text)
    return [entry for entry in _SEPARATORS.split(text) if entry]


@dataclass(frozen=True)
class SkillInfo:
    """A skill as a scan sees it: the frontmatter of its SKILL.md, nothing more."""

    name: str
    description: str
    folder: Path
    skill_file: Path
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: str | None = None
    allowed_tools_mode: AllowedToolsMode = "pre-approve"
    """What `allowed-tools` means for this skill: `restrict` when its `allowed-tools-mode`
    (at the top level or in `metadata`) says anything but `pre-approve`."""
    metadata: dict[str, str] = field(default_factory=dict)
    """String values as written; nested values (mappings, lists) as JSON text."""
    keywords: tuple[str, ...] = ()
    when_to_use: str | None = None
    """Claude Code's `when_to_use`: when to reach for the skill; joins the description in the
    index and in search."""
    model_invocable: bool = True
    """False with `disable-model-invocation: true`: out of the index and of `load_skill`; a
    job step or a fork task may still name it (it is then preloaded)."""
    context: str | None = None
    """`fork`: `load_skill` runs the skill as a sub-agent (of `agent`) instead of inlining it."""
    agent: str | None = None
    """The sub-agent a `context: fork` skill runs as; the general one if None."""
    tools_digest: str | None = None
    """SHA-256 of `tools.py` when the catalog was scanned; None if it had none. Only that
    exact file is ever imported."""
    builtin: bool = False
    """Shipped with the package (not a folder the user named)."""
    preapprove: bool = True
    """False when the folder it was found in was named with `preapprove: false`: its
    `allowed-tools` pre-approves nothing."""
    needs: SandboxNeeds = field(default_factory=SandboxNeeds)
    """The hosts and paths its scripts need, as its `metadata` declares them (`SandboxNeeds`)."""
    mcp_digest: str | None = None
    """SHA-256 of the folder's `.mcp.json` (or `mcp.json`) when the catalog was scanned; only
    that exact file is used to start servers."""
    servers: Mapping[str, ServerConfig] | None = None
    """MCP servers declared outside any folder (a job's `mcp_servers:`): this skill is one
    such server, and has no SKILL.md of its own."""

    @property
    def has_tools(self) -> bool:
        """Whether loading runs code from the folder (`tools.py`, or `.mcp.json` servers)."""
        return self.tools_digest is not None or self.mcp_digest is not None

    @property
    def has_servers(self) -> bool:
        return self.mcp_digest is not None or bool(self.servers)

    @property
    def gives_tools(self) -> bool:
        """Whether loading the skill may give tools: its `tools.py` or any MCP server."""
        return self.has_tools or self.has_servers

    @property
    def forks(self) -> bool:
        return self.context == "fork"

    @property
    def about(self) -> str:
        """The description, and `when_to_use` after it, whitespace collapsed."""
        text = f"{self.description} {self.when_to_use or ''}"
        return " ".join(text.split())

    def summary(self) -> str:
        """The one index line: name and description (with `when_to_use`)."""
        return f"- {self.name}: {self.about}"


@dataclass(frozen=True)
class LoadedSkill:
    """A skill after `load_skill`: its instructions and its tools, named for the provider."""

    info: SkillInfo
    body: str
    tools: tuple[Tool, ...] = ()
    notes: tuple[str, ...] = ()
    """What the load observation must also say: servers that did not start and why, and
    the servers' own instructions."""
    failures: tuple[str, ...] = ()
    """Of those, what failed: each server that did not start (or could not be configured),
    and why. A run reports them (`skill_failed`) and may be asked to fail on them."""

    @property
    def name(self) -> str:
        return self.info.name


@reads("skill")
def file_digest(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None if there is no such file."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def parse_keywords(value: object) -> tuple[str, ...]:
    """`metadata.keywords`: a comma-separated string (a YAML list is accepted too)."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    return tuple(word for item in items if (word := " ".join(str(item).split())))


def qualified_tool_name(skill: str, tool: str) -> str:
    """`{skill}__{tool}`, kept to `^[a-zA-Z0-9_-]{1,64}$`.

    Unsafe characters become `_` and the name then ends in a short hash of the full name, as a
    name that is too long does (it keeps its start), so two such names never collide.
    """
    full = f"{skill}{TOOL_SEPARATOR}{tool}"
    safe = _UNSAFE.sub("_", full)
    if len(safe) <= MAX_TOOL_NAME and safe == full:
        return safe
    if len(safe) <= MAX_TOOL_NAME - 9:
        # Characters were replaced (a name in another script): the hash keeps names apart.
        return f"{safe}_{hashlib.sha1(full.encode()).hexdigest()[:8]}"
    digest = hashlib.sha1(full.encode()).hexdigest()[:8]
    return f"{safe[: MAX_TOOL_NAME - 9]}_{digest}"
