"""A loaded skill's MCP servers: started in the run's pool, their tools joined to the skill.

`joined` is what the core's `with_servers` (skills/servers.py) runs on the pool's loop after
`load_skill` has read the body and `tools.py`: for a skill
that declares servers it starts them (once per run; later loads, by any agent of the run,
reuse them and their `tools/list`) and returns the skill with their tools and notes. A server
that cannot start, the SDK missing, or a run without a pool each leave a note in the load
observation and the skill's other parts loaded. Only the `.mcp.json` the catalog scanned is
used: one that appeared or changed afterwards (written by a model, say) starts nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from ..agent import Tool
from ..errors import ConfigError, ToolInfrastructureError
from ..security import Permissions
from ..skills.servers import (
    ConfigProblem,
    Declared,
    ServerPool,
    declared_servers,
    expanded,
    secret_values,
)
from ..skills.skill import LoadedSkill, SkillInfo, qualified_tool_name
from .connection import Connection
from .sdk import load_sdk
from .tool import McpTool

MAX_INSTRUCTIONS = 4_000


async def joined(
    pool: ServerPool, skill: LoadedSkill, permissions: Permissions | None
) -> LoadedSkill:
    """On the pool's loop: the servers' tools and notes, made once per run and skill; a
    server's `sandbox:` within the sandbox of `permissions` (the run's)."""
    key = f"skill:{skill.info.name}"
    lock = pool.cache.setdefault(f"{key}:lock", asyncio.Lock())
    async with lock:
        if key not in pool.cache:
            pool.cache[key] = await _open(pool, skill.info, permissions)
    tools, failures, notes = pool.cache[key]
    taken = {t.name for t in skill.tools}
    extra = tuple(t for t in tools if t.name not in taken)
    return replace(
        skill,
        tools=(*skill.tools, *extra),
        notes=(*skill.notes, *failures, *notes),
        failures=(*skill.failures, *failures),
    )


async def _open(
    pool: ServerPool, info: SkillInfo, permissions: Permissions | None
) -> tuple[tuple[Tool, ...], tuple[str, ...], tuple[str, ...]]:
    """(the servers' tools, what failed, the servers' instructions)."""
    try:
        load_sdk()
        declared = declared_servers(info)
    except (ToolInfrastructureError, ConfigProblem, OSError) as exc:
        return (), (f"Its MCP servers are not available: {exc}",), ()
    connections = [
        _connection(pool, info, name, declared, permissions) for name in declared.servers
    ]
    started = await asyncio.gather(
        *(c.ensure() for c in connections if isinstance(c, Connection)), return_exceptions=True
    )
    failures = [c for c in connections if isinstance(c, str)]
    live = [c for c in connections if isinstance(c, Connection)]
    for connection, outcome in zip(live, started, strict=True):
        if isinstance(outcome, BaseException):
            failures.append(f"MCP server {connection.name!r} is not available: {outcome}")
    notes: list[str] = []
    tools: dict[str, Tool] = {}
    for connection in live:
        if connection.up:
            _add_tools(tools, pool, info, connection)
            if connection.instructions:
                text = connection.mask(connection.instructions.strip())
                if len(text) > MAX_INSTRUCTIONS:
                    cut = len(text) - MAX_INSTRUCTIONS
                    text = f"{text[:MAX_INSTRUCTIONS]}\n[... {cut} more characters cut]"
                notes.append(f"## Instructions of MCP server {connection.name!r}\n{text}")
    return tuple(tools.values()), tuple(failures), tuple(notes)


def _connection(
    pool: ServerPool,
    info: SkillInfo,
    name: str,
    declared: Declared,
    permissions: Permissions | None,
) -> Any:
    """The run's connection to a server, or a note when its config cannot be filled in or
    its sandbox would widen the run's."""
    written = declared.servers[name]
    try:
        config = expanded(written, pool.environ, declared.folder)
        if config.sandbox is not None and permissions is not None:
            workspace = permissions.workspace.expanduser().resolve()
            narrowed = config.sandbox.within(permissions.sandbox, parent_writes=[workspace])
            config = config.model_copy(update={"sandbox": narrowed})
    except ConfigProblem as exc:
        return f"MCP server {name!r} is not available: {exc}"
    except ConfigError as exc:
        return (
            f"MCP server {name!r} is not available: its `sandbox:` must lie within the run's "
            f"(permissions.sandbox): {exc}"
        )
    secrets = secret_values(written, pool.environ)
    return pool.connection(info.name, name, lambda: Connection(name, config, secrets))


def _add_tools(
    tools: dict[str, Tool], pool: ServerPool, info: SkillInfo, connection: Connection
) -> None:
    for listed in connection.tools:
        remote = str(listed.get("name", ""))
        if not remote:
            continue
        name = qualified_tool_name(info.name, remote)
        if name in tools:  # two servers of one skill with a tool of the same name
            name = qualified_tool_name(info.name, f"{connection.name}_{remote}")
        tools.setdefault(name, McpTool(name, listed, connection, pool))
