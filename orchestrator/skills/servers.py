"""MCP servers a skill declares, and a run's pool of them: the core's side of MCP.

Declared servers: `.mcp.json` (or `mcp.json`) in a skill folder, `mcp_servers:` in a job,
each a `ServerConfig` (skill.py). A run none of whose skills declares servers never loads
this module (a Ray worker does, and holds a pool for each task).

The format is the one Claude Code plugins and desktop clients use:

    {"mcpServers": {
        "git":  {"command": "mcp-server-git", "args": ["--repository", "."], "env": {...}},
        "docs": {"type": "http", "url": "http://127.0.0.1:8931/mcp", "headers": {...}}}}

A server is `stdio` (a `command` we start) or `http` (streamable HTTP, a `url` we connect to);
the type is inferred from `command`/`url` when not given. `${VAR}` and `${VAR:-default}` in
the command, args, env, cwd, url and headers expand from the environment when the server
starts (not when the file is read, so a scan never needs the variables), and
`${CLAUDE_PLUGIN_ROOT}`/`${CLAUDE_SKILL_DIR}` to the skill's folder. Nothing here imports the
SDK: the catalog and `skills check` read these files without it.

A run whose skills declare servers (`AgentLoop.run` with skills, a job) opens a
`server_scope`; every agent of the run,
sub-agents included, finds the same `ServerPool` through a context variable, so one server
process serves them all. Nothing starts when the scope opens: the pool's thread and each
server start on the first load that needs them, through `orchestrator.mcp` (the `[mcp]`
extra), which `with_servers` imports by name then, so a run with no MCP skill never loads it.
The servers live on the pool's own event loop, so code that must stay synchronous
(preloading a sub-agent's skills while it is built) can wait for a server too, and a cancelled
run (Ctrl-C) cannot cut a server's shutdown short: the scope's exit stops every server and
waits for them, and an `atexit` hook stops any pool a crash left open.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import hashlib
import os
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..parts import Slot
from ..security import Permissions
from ..security.inputs import JsonInputError, load_json
from ..security.inventory import reads
from .skill import LoadedSkill, ServerConfig, SkillInfo, config_file_in
from .skill_md import Problem

T = TypeVar("T")
ServerTools = Callable[
    ["ServerPool", LoadedSkill, Permissions | None], Coroutine[Any, Any, LoadedSkill]
]
"""Joins a loaded skill to its servers' tools, on the pool's loop, within the permissions of
the run that loads it (None: no run, `skills show --connect`) (the optional
`orchestrator.mcp`: `joined`)."""
TOOL_SOURCES: Slot[ServerTools] = Slot("tool source", "orchestrator.tool_sources")
"""Tool sources by name (`mcp`): the optional parts declare theirs (orchestrator/parts.py)."""
FOLDER_VARIABLES = ("CLAUDE_PLUGIN_ROOT", "CLAUDE_SKILL_DIR")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class Declared(BaseModel):
    """The servers one file (or one job) declares, by name, with the folder they belong to."""

    servers: dict[str, ServerConfig]
    folder: Path
    source: str
    """Where they were declared (a file path, or `job spec`), for messages."""


class ConfigProblem(ValueError):
    """A `.mcp.json` that cannot be used."""


def parse_config(data: bytes | str, folder: Path, source: str) -> Declared:
    """The servers of a `.mcp.json` text; ConfigProblem naming the server and field."""
    try:
        document = load_json(data, source)
    except JsonInputError as exc:
        raise ConfigProblem(f"{source}: not valid JSON ({exc.problem})") from None
    if not isinstance(document, dict):
        raise ConfigProblem(f"{source}: must be a JSON object with `mcpServers`")
    servers = document.get("mcpServers", document.get("servers"))
    if not isinstance(servers, dict):
        raise ConfigProblem(f"{source}: `mcpServers` must be an object of servers by name")
    return Declared(servers=parse_servers(servers, source, folder), folder=folder, source=source)


def parse_servers(
    servers: Mapping[str, Any], source: str, folder: Path | None = None
) -> dict[str, ServerConfig]:
    """Validate each server; ConfigProblem listing every problem with its server and field.
    Paths of a `sandbox:` resolve against `folder` (the file's), else the working folder."""
    context = {"base_dir": folder} if folder is not None else None
    found: dict[str, ServerConfig] = {}
    problems: list[str] = []
    for name, value in servers.items():
        if not isinstance(value, dict):
            problems.append(f"server {name!r}: must be an object")
            continue
        try:
            found[name] = ServerConfig.model_validate(value, context=context)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                field = ".".join(str(p) for p in error["loc"]) or "(server)"
                message = error["msg"].removeprefix("Value error, ")
                problems.append(f"server {name!r}: {field}: {message}")
    if problems:
        raise ConfigProblem(f"{source}: " + "; ".join(problems))
    return found


@reads("MCP configuration")
def check_config(folder: Path) -> list[Problem]:
    """`skills check`: the problems of a folder's `.mcp.json`, unset variables included."""
    path = config_file_in(folder)
    if path is None:
        return []
    try:
        declared = parse_config(path.read_bytes(), folder, str(path))
    except (ConfigProblem, OSError) as exc:
        return [Problem("mcp-config", str(exc), True)]
    problems = []
    for name, server in declared.servers.items():
        missing = sorted(unset_variables(server))
        if missing:
            problems.append(
                Problem(
                    "mcp-variables",
                    f"{path}: server {name!r} uses variables that are not set here: "
                    + ", ".join(missing),
                )
            )
    return problems


def unset_variables(server: ServerConfig, environ: Mapping[str, str] | None = None) -> set[str]:
    """Variables the server's fields name (without a default) that `environ` lacks."""
    env = os.environ if environ is None else environ
    missing: set[str] = set()
    for text in _texts(server):
        for match in _VARIABLE.finditer(text):
            name, default = match.group(1), match.group(2)
            if default is None and name not in env and name not in FOLDER_VARIABLES:
                missing.add(name)
    return missing


def _texts(server: ServerConfig) -> list[str]:
    values = [server.command or "", server.url or "", server.cwd or "", *server.args]
    return [*values, *server.env.values(), *server.headers.values()]


def expand(text: str, environ: Mapping[str, str], folder: Path) -> str:
    """`${VAR}` and `${VAR:-default}` from `environ`; ConfigProblem for an unset one."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in FOLDER_VARIABLES:
            return str(folder)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigProblem(f"the environment variable {name} is not set")

    return _VARIABLE.sub(value, text)


def expanded(server: ServerConfig, environ: Mapping[str, str], folder: Path) -> ServerConfig:
    """The server with every `${VAR}` filled in, and its `cwd` made absolute."""

    def fill(text: str) -> str:
        return expand(text, environ, folder)

    cwd = folder / fill(server.cwd) if server.cwd else folder
    return server.model_copy(
        update={
            "command": fill(server.command) if server.command else None,
            "args": [fill(a) for a in server.args],
            "env": {k: fill(v) for k, v in server.env.items()},
            "headers": {k: fill(v) for k, v in server.headers.items()},
            "url": fill(server.url) if server.url else None,
            "cwd": str(cwd),
        }
    )


def secret_values(server: ServerConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """What must never reach a trace or a message: the env and header values (as written,
    and expanded with `environ`), and every variable's value that a field of the server
    uses (an args token too)."""
    values = [*server.env.values(), *server.headers.values()]
    if environ is not None:
        for text in _texts(server):
            values += [
                environ[m.group(1)] for m in _VARIABLE.finditer(text) if m.group(1) in environ
            ]
        with contextlib.suppress(ConfigProblem):
            filled = expanded(server, environ, Path())
            values += [*filled.env.values(), *filled.headers.values()]
    return sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)


# --- A run's servers: one pool per run, shared by its agents --------------------------------

CLOSE_TIMEOUT = 20.0

_CURRENT: ContextVar[ServerPool | None] = ContextVar("orchestrator_mcp_pool", default=None)


class ServerPool:
    """Anys by key (the declaring skill and the server's name), on one event loop.

    `environ` is where `${VAR}` in the servers' configs comes from (the process environment
    by default; a job's, `.env` files included, for a job).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)
        self.connections: dict[tuple[str, str], Any] = {}
        self.cache: dict[str, Any] = {}
        """Per-run results keyed by skill (its tools), kept by the callers."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closing: concurrent.futures.Future[None] | None = None

    @property
    def started(self) -> bool:
        return self._loop is not None

    def connection(self, skill: str, name: str, factory: Any) -> Any:
        """The run's connection to one server, made by `factory()` the first time."""
        with self._lock:
            key = (skill, name)
            if key not in self.connections:
                self.connections[key] = factory()
            return self.connections[key]

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the pool's loop (started on first use)."""
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(coro, loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` run on the pool's loop; cancelling this cancels it there."""
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """`coro` on the pool's loop, waited for from synchronous code (not the pool's loop)."""
        return self.submit(coro).result(timeout)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closing is not None:
                raise RuntimeError("the run's MCP servers were shut down")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="mcp-servers", daemon=True
                )
                self._thread.start()
                self._loop = loop
                atexit.register(self.close)
            return self._loop

    async def _stop_all(self) -> None:
        connections = list(self.connections.values())
        await asyncio.gather(*(c.stop() for c in connections), return_exceptions=True)

    def _begin_close(self) -> concurrent.futures.Future[None] | None:
        with self._lock:
            if self._loop is None:
                return None
            if self._closing is None:
                self._closing = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
                self._closing.add_done_callback(lambda _: self._end_loop())
            return self._closing

    def _end_loop(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def close(self) -> None:
        """Stop every server of the run and the pool's thread; waits (bounded)."""
        closing = self._begin_close()
        if closing is None:
            return
        with contextlib.suppress(concurrent.futures.TimeoutError, Exception):
            closing.result(CLOSE_TIMEOUT)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_TIMEOUT)
        atexit.unregister(self.close)

    async def aclose(self) -> None:
        """`close` from async code; a cancellation meanwhile still waits for the servers."""
        closing = self._begin_close()
        if closing is None:
            return
        try:
            await asyncio.shield(asyncio.wrap_future(closing))
        except asyncio.CancelledError:
            self.close()
            raise
        self.close()


def current_pool() -> ServerPool | None:
    """The pool of the run this code is part of, if any."""
    return _CURRENT.get()


@contextlib.asynccontextmanager
async def server_scope(environ: Mapping[str, str] | None = None) -> AsyncIterator[ServerPool]:
    """The run's pool: the enclosing run's, or a new one closed (servers and all) on exit."""
    found = _CURRENT.get()
    if found is not None:
        yield found
        return
    pool = ServerPool(environ)
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)
        await pool.aclose()


@contextlib.contextmanager
def sync_server_scope() -> Iterator[ServerPool]:
    """`server_scope` for synchronous code (`skills show --connect`)."""
    found = _CURRENT.get()
    if found is not None:
        yield found
        return
    pool = ServerPool()
    token = _CURRENT.set(pool)
    try:
        yield pool
    finally:
        _CURRENT.reset(token)
        pool.close()


# --- Joining a loaded skill to its servers: the seam of the optional `orchestrator.mcp` ------

NO_RUN = "its MCP servers start only inside a run (Agent.run, Orchestrator.run, a job)"


@reads("MCP configuration")
def declared_servers(info: SkillInfo) -> Declared:
    """The servers a skill declares, from the job spec or the `.mcp.json` the scan saw."""
    if info.servers:
        return Declared(servers=dict(info.servers), folder=info.folder, source="the job spec")
    path = config_file_in(info.folder)
    data = path.read_bytes() if path is not None else None
    if data is None or hashlib.sha256(data).hexdigest() != info.mcp_digest:
        raise ConfigProblem(
            f"{info.folder}: its MCP server file changed after the skill catalog was scanned; "
            "no server is started (only what was there before the run started can run)"
        )
    assert path is not None
    return parse_config(data, info.folder, str(path))


async def with_servers(skill: LoadedSkill, permissions: Permissions | None) -> LoadedSkill:
    """The skill with its servers' tools (from the run's pool) and notes; the servers are
    started by `orchestrator.mcp`, loaded by name only when a skill declares some. A
    server's `sandbox:` is narrowed by the sandbox of `permissions` (the run's)."""
    if not skill.info.has_servers:
        return skill
    pool = current_pool()
    if pool is None:
        return replace(skill, notes=(*skill.notes, f"Not available: {NO_RUN}."))
    return await pool.run(TOOL_SOURCES.get("mcp")(pool, skill, permissions))


def with_servers_sync(skill: LoadedSkill, permissions: Permissions | None) -> LoadedSkill:
    """`with_servers` from synchronous code (preloading, restoring a resumed run)."""
    if not skill.info.has_servers:
        return skill
    pool = current_pool()
    if pool is None:
        return replace(skill, notes=(*skill.notes, f"Not available: {NO_RUN}."))
    return pool.run_sync(TOOL_SOURCES.get("mcp")(pool, skill, permissions))


def server_summary(info: SkillInfo) -> Mapping[str, str]:
    """Each declared server's name and what it is (program or URL), for `skills show`."""
    declared = declared_servers(info)
    return {name: server.where() for name, server in declared.servers.items()}
