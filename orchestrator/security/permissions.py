"""What the tools of one run may do: an explicit object handed to the run, never a global.

Everything risky is off unless the run turns it on: shell commands, Python snippets, and any
network host not on the allow-list. File tools are confined to `workspace`, and never change
what lies under a `read_only` path (the orchestrator adds the files that define a run: its job
spec, its skill and sub-agent folders, its trace). A tool that is refused raises
`PermissionDenied` naming the missing permission; the loop turns that into an error
observation of type `denied`.

Commands (shell, python) run in the sandbox `sandbox` describes (`SandboxSettings`; the
backends are in security/sandbox.py, docs/sandbox.md); a part of a run that gives sandbox
settings of its own (an MCP server's `sandbox:` entry) may narrow the run's sandbox
(`SandboxSettings.within`), never widen it.

Human approval: `shell` and `python` may be `"ask"`, and `tools` maps tool names, skill names
or glob patterns to `allow`, `ask` or `deny`. `decision(tool)` is the strictest value that
applies (deny, then ask, then allow); the loop asks a person before a call that needs it
(agent/turn_calls.py), and an approved call of the shell (python) skill runs with `shell`
(`python`) granted for that call alone (`granting`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from ..errors import ConfigError, PermissionDenied
from .inventory import (
    DOTENV_FILES,
    default_workspace,
    is_default_workspace,
    protected,
    secret,
)

Decision = Literal["allow", "ask", "deny"]
Backend = Literal["bubblewrap", "container", "none"]
STRICTNESS: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
ASKING_SKILLS = ("shell", "python")
"""Skills whose calls a permission of the same name set to "ask" puts to a person."""


def sandbox_line(sandboxes: Sequence[str]) -> str:
    """Where a run's commands run, as a run says it (its start, `trace show`, the report):
    `sandbox: bubblewrap (...)`, from what `run_start.sandbox` records."""
    shown = ["none (UNCONFINED: as the user)" if s == "none" else s for s in sandboxes]
    return f"sandbox: {'; '.join(shown)}"


UNCONFINED_WARNING = (
    "commands run UNCONFINED (sandbox backend none): shell commands, Python snippets and skill "
    "scripts can read, write and reach everything this user can; skills' allowed-tools "
    "pre-approve no command, so each asks as the permissions say"
)


class SandboxUnavailable(ConfigError):
    """The run allows commands, and the sandbox it asks for (or the default) cannot run here."""


class SandboxSettings(BaseModel):
    """Where the run's commands run (`permissions.sandbox`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    backend: Backend | None = None
    """`bubblewrap`, `container` or `none` (commands unconfined: only when asked for).
    Default: `bubblewrap` where `bwrap` is on PATH; a run that allows commands where it is
    not is refused before it starts."""

    image: str | None = None
    """The image the `container` backend runs commands in (podman, else docker)."""

    network: tuple[str, ...] = ()
    """`host:port` entries commands may reach, through the sandbox's proxy (`*.example.com:443`
    for any subdomain). Nothing else is reachable, DNS included."""

    read_only: tuple[Path, ...] = ()
    """More host paths a command may read (a toolchain outside the system folders)."""

    writable: tuple[Path, ...] = ()
    """More host paths a command may write, besides the workspace."""

    memory_mb: int = Field(default=2048, ge=16)
    """Memory a command's processes may use together, in MiB."""

    processes: int = Field(default=256, ge=1)
    """Processes (and threads) a command may have at once."""

    seconds: float = Field(default=600.0, gt=0)
    """The longest a command may run; a tool's own timeout may only be shorter."""

    @field_validator("read_only", "writable")
    @classmethod
    def _resolved(cls, paths: tuple[Path, ...], info: ValidationInfo) -> tuple[Path, ...]:
        """Absolute and resolved, as they are mounted: against the folder of the file that
        gives them (a spec, a `.mcp.json`: the validation context's `base_dir`), else the
        working folder."""
        base = Path((info.context or {}).get("base_dir") or Path.cwd())
        return tuple((base / path.expanduser()).resolve() for path in paths)

    @field_validator("network")
    @classmethod
    def _host_and_port(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        for entry in entries:
            host, sep, port = entry.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"{entry!r} is not host:port (for example api.example.com:443)")
        return entries

    def allows(self, host: str, port: int) -> bool:
        """Whether `host:port` is on the `network` list."""
        host = host.lower().rstrip(".").strip("[]")
        for entry in self.network:
            name, _, wanted = entry.lower().rpartition(":")
            name = name.strip("[]")
            if int(wanted) == port and (
                host == name or (name.startswith("*.") and host.endswith(name[1:]))
            ):
                return True
        return False

    def within(
        self, parent: SandboxSettings, *, parent_writes: Iterable[Path] = ()
    ) -> SandboxSettings:
        """These settings for a part of a run whose sandbox is `parent`: a field set here
        may narrow the parent's, never widen it; a field not set is the parent's. A parent
        with backend `none` confines nothing, so any settings are within it and are kept as
        given. `parent_writes`: folders the parent's commands write besides its `writable`
        (its workspace), which these may name too. Raises ConfigError naming what would
        widen it."""
        if parent.backend == "none":
            return self
        given = self.model_fields_set
        parent_writable = (*parent.writable, *parent_writes)
        widened: list[str] = []
        if self.backend == "none":
            widened.append("backend none (commands unconfined)")
        elif self.backend is not None and parent.backend not in (None, self.backend):
            widened.append(f"backend {self.backend} instead of {parent.backend}")
        widened += [
            f"network {entry}" for entry in self.network if not _entry_within(entry, parent.network)
        ]
        widened += [
            f"writable {path}"
            for path in self.writable
            if not any(under(path, p) for p in parent_writable)
        ]
        widened += [
            f"read_only {path}"
            for path in self.read_only
            if not any(under(path, p) for p in (*parent.read_only, *parent_writable))
        ]
        for name in ("memory_mb", "processes", "seconds"):
            if name in given and getattr(self, name) > getattr(parent, name):
                widened.append(f"{name} {getattr(self, name)} over {getattr(parent, name)}")
        if widened:
            raise ConfigError("a sandbox may only narrow its parent's: " + "; ".join(widened))
        inherited = {
            name: getattr(parent, name) for name in type(self).model_fields if name not in given
        }
        return self.model_copy(update=inherited)


def _entry_within(entry: str, parent: Iterable[str]) -> bool:
    name, _, port = entry.lower().rpartition(":")
    for wider in parent:
        wider_name, _, wider_port = wider.lower().rpartition(":")
        if wider_port != port:
            continue
        if name == wider_name or (wider_name.startswith("*.") and name.endswith(wider_name[1:])):
            return True
    return False


def under(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


class Permissions(BaseModel):
    """The permissions of one run. Pass it as `Agent(permissions=...)`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    workspace: Path = Field(default_factory=default_workspace)
    """Root folder of the file tools; every path they take is relative to it and stays in it.
    Default: the working folder, or its `work/` folder when the working folder holds
    configuration (a `.env`, skills, sub-agents, a job spec); a job's default is `work/`
    beside its spec. A missing `work/` folder is made on first use."""

    shell: bool | Literal["ask"] = False
    """Allow shell commands (the `shell` skill); `"ask"`: each call needs a person's approval."""

    python: bool | Literal["ask"] = False
    """Allow running Python snippets in a separate process (the `python` skill); `"ask"`: each
    call needs a person's approval."""

    tools: dict[str, Decision] = Field(default_factory=dict)
    """`allow`, `ask` or `deny` for tools: a tool's name (`files__write_file`), a skill's name
    (`data`: all its tools) or a glob pattern (`files__*`). The strictest that applies wins."""

    skill_allowed_tools: Literal["pre-approve", "restrict"] = "pre-approve"
    """What an active skill's `allowed-tools` means. `pre-approve` (as the Agent Skills
    specification and Claude Code have it): the listed tools run without a person's approval
    where these permissions would ask, and nothing else changes. `restrict`: every tool the
    list does not name is refused while the skill is active."""

    network: list[str] = Field(default_factory=list)
    """Hosts the `http` skill may reach: `example.com`, `*.example.com` (any subdomain),
    `127.0.0.1:8080` (one port only), or `*` (any host)."""

    read_only: tuple[Path, ...] = ()
    """Files and folders the file tools may read but never write, create or edit, even inside
    the workspace. The orchestrator adds the job spec, the skill and sub-agent folders and
    the trace of the run to what is given here."""

    unlisted: tuple[Path, ...] = ()
    """Files and folders the file tools' listings (`list_dir`, `glob`, `grep` over a folder)
    leave out; they can still be read, listed or searched by their own path. The
    orchestrator adds what the run itself leaves behind: its trace's folder, and what earlier
    runs of the same job created (docs/job-spec.md, *What a run leaves out of listings*)."""

    secret_files: tuple[str, ...] = DOTENV_FILES
    """File-name patterns the file tools never read, edit or search: files where keys live.
    A model that could read them would send the keys to its provider."""

    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    """Where shell commands, Python snippets and skill scripts run (docs/sandbox.md):
    `bubblewrap` by default, `container`, or `none` (unconfined, only when asked for)."""

    @classmethod
    def coerce(cls, value: object) -> Permissions:
        """The run's permissions from what the loop holds: None means the defaults."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            try:
                return cls.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(f"invalid permissions: {exc}") from None
        raise ConfigError(f"permissions must be a Permissions object, not {type(value).__name__}")

    def protecting(self, paths: Iterable[str | Path | None]) -> Permissions:
        """These permissions with `paths` added to `read_only` (None entries are ignored)."""
        added = tuple(Path(p).expanduser().resolve() for p in paths if p is not None)
        known = set(self.read_only)
        fresh = tuple(p for p in dict.fromkeys(added) if p not in known)
        if not fresh:
            return self
        return self.model_copy(update={"read_only": (*self.read_only, *fresh)})

    def unlisting(self, paths: Iterable[str | Path | None]) -> Permissions:
        """These permissions with `paths` added to `unlisted` (None entries are ignored)."""
        added = tuple(Path(p).expanduser().resolve() for p in paths if p is not None)
        fresh = tuple(p for p in dict.fromkeys(added) if p not in set(self.unlisted))
        if not fresh:
            return self
        return self.model_copy(update={"unlisted": (*self.unlisted, *fresh)})

    def is_unlisted(self, path: Path, listed: Path) -> bool:
        """Whether a listing of the folder `listed` leaves `path` (an entry under it) out:
        `path` lies at or under an unlisted path that `listed` itself does not lie in."""
        for hidden in self.unlisted:
            if path == hidden or path.is_relative_to(hidden):
                return not (listed == hidden or listed.is_relative_to(hidden))
        return False

    def require_writable(self, target: Path, shown: str) -> None:
        """Refuse a write to `target` (an absolute, resolved path) that would change what
        decides a run: anything in the inventory (security/inventory.py), wherever it lies,
        and the `read_only` paths."""
        found = protected(
            target,
            workspace=self.workspace_root(),
            named=self.read_only,
            secret_files=self.secret_files,
        )
        if found is not None:
            raise PermissionDenied(found.message(shown))

    def is_secret(self, target: Path) -> bool:
        """Whether the file tools must never read `target`: it holds keys."""
        return secret(target.resolve(), secret_files=self.secret_files) is not None

    def require_readable(self, target: Path, shown: str) -> None:
        """Refuse to read a file that holds keys (`secret_files`, the user's configuration)."""
        found = secret(target, secret_files=self.secret_files)
        if found is not None:
            raise PermissionDenied(
                f"{shown} holds keys ({found.rule}); the file tools do not read it, so its "
                "values never reach a model."
            )

    def workspace_root(self) -> Path:
        """The workspace as an absolute, resolved folder; it must exist, except a `work/`
        folder (the default), which is made on first use."""
        root = self.workspace.expanduser().resolve()
        if not root.exists() and is_default_workspace(root):
            root.mkdir(exist_ok=True)
        if not root.is_dir():
            raise ConfigError(f"the workspace {root} is not a folder")
        return root

    def allows_commands(self) -> bool:
        """Whether the run may run commands at all (shell or python, allowed or asked)."""
        return self.shell is not False or self.python is not False

    def require_shell(self) -> None:
        _require(self.shell, "shell", "running shell commands")

    def require_python(self) -> None:
        _require(self.python, "python", "running Python code")

    def decision(self, tool: str) -> tuple[Decision, str | None]:
        """Whether a call of `tool` is allowed, needs a person's approval, or is denied, and
        the rule that says so (None: nothing but the default, allow)."""
        skill = tool.partition("__")[0] if "__" in tool else None
        found: list[tuple[Decision, str]] = []
        if skill in ASKING_SKILLS and getattr(self, skill) == "ask":
            found.append(("ask", f"permissions.{skill} is 'ask'"))
        for key, value in self.tools.items():
            if key in (tool, skill) or fnmatch.fnmatchcase(tool, key):
                found.append((value, f"permissions.tools[{key!r}] is {value!r}"))
        if not found:
            return "allow", None
        return max(found, key=lambda item: STRICTNESS[item[0]])

    def granting(self, tool: str) -> Permissions:
        """These permissions for one approved call of `tool`: `ask` becomes allowed for the
        permission the call's skill stands for (`shell__run`: shell), and nothing else."""
        skill = tool.partition("__")[0]
        if skill in ASKING_SKILLS and getattr(self, skill) == "ask":
            return self.model_copy(update={skill: True})
        return self

    def allows_host(self, host: str, port: int | None = None) -> bool:
        """Whether `host` (and `port`, when the entry names one) is on the allow-list."""
        host = host.lower().rstrip(".")
        return any(_host_matches(entry.lower(), host, port) for entry in self.network)

    def require_host(self, host: str, port: int | None = None) -> None:
        if not self.allows_host(host, port):
            where = host if port is None else f"{host}:{port}"
            allowed = ", ".join(self.network) or "none"
            raise PermissionDenied(
                f"network access to {where} needs that host in the `network` permission "
                f"(allowed hosts: {allowed})."
            )


def _require(value: bool | str, name: str, what: str) -> None:
    if value is True:
        return
    if value == "ask":
        raise PermissionDenied(
            f"{what} needs a person's approval for each call (`{name}: ask`), and this call "
            f"was not approved: only calls of the {name} skill are put to a person."
        )
    raise PermissionDenied(
        f"{what} needs the `{name}` permission, which this run does not have "
        f"(Permissions({name}=True))."
    )


def _host_matches(entry: str, host: str, port: int | None) -> bool:
    if entry == "*":
        return True
    name, sep, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
    if sep and str(port) != entry_port:
        return False
    name = name.strip("[]")
    if name.startswith("*."):
        return host.endswith(name[1:])
    return host == name


def _has_port(entry: str) -> bool:
    # An IPv6 literal has colons of its own; only `[::1]:8080` or `host:8080` name a port.
    if entry.startswith("["):
        return "]:" in entry
    return entry.count(":") == 1
