"""Skills an agent starts with already loaded: those its task or job step names, and those a
Claude Code sub-agent file lists under `skills` (or reaches through its `tools`).

A preloaded skill's instructions are in the agent's system prompt and its tools in its tools
array from the first request, so neither changes during the run (provider caches stay warm).
Its code is imported only under the rules `load_skill` follows (`untrusted_code`); when it may
not be, or fails, the instructions still load and the prompt says why the tools are missing.
A skill is active from the start, its `allowed-tools` included. Preloading a `context: fork`
skill inlines it. Skills a model may not choose (`disable-model-invocation`) preload too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..agent import Tool
from ..errors import SafetyWarning
from ..security import Permissions, is_inside
from .catalog import SkillCatalog
from .servers import with_servers_sync
from .skill import SkillError, SkillInfo
from .skill_md import read_body, substitute


@dataclass(frozen=True)
class Preloaded:
    """One preloaded skill: what it brings, and why its tools are missing if they are."""

    info: SkillInfo
    body: str
    tools: tuple[Tool, ...] = ()
    note: str | None = None
    refused: bool = False
    """Its code was refused by the run's safety rules (it lies where the model may write)."""
    instructions: bool = True
    """False for the skill a forked sub-agent runs: its instructions are the task already."""
    notes: tuple[str, ...] = ()
    """What its MCP servers add: those that did not start, and their instructions."""
    failures: tuple[str, ...] = ()
    """What failed to load: its `tools.py`, or MCP servers that did not start."""


def preload_skills(
    catalog: SkillCatalog,
    names: Sequence[str],
    permissions: Permissions,
    *,
    allows: Callable[[str], bool] = lambda _: True,
    running: str | None = None,
) -> list[Preloaded]:
    """Load the named skills (in the catalog's order, unknown names skipped), and `running`."""
    wanted = set(names) | ({running} if running else set())
    found = []
    for info in catalog:
        if info.name in wanted:
            found.append(_preload(catalog, info, permissions, allows, info.name != running))
    return found


def _preload(
    catalog: SkillCatalog,
    info: SkillInfo,
    permissions: Permissions,
    allows: Callable[[str], bool],
    instructions: bool,
) -> Preloaded:
    refusal = untrusted_code(info, permissions)
    refused = refusal is not None
    failures: tuple[str, ...] = ()
    try:
        skill = with_servers_sync(catalog.load(info.name)) if refusal is None else None
    except SkillError as exc:
        refusal, skill, failures = f"its tools could not be loaded: {exc}", None, (str(exc),)
    if skill is None:
        body = _instructions_only(info)
        return Preloaded(
            info,
            body,
            note=refusal,
            refused=refused,
            instructions=instructions,
            failures=failures,
        )
    tools = tuple(t for t in skill.tools if allows(t.name))
    return Preloaded(
        info,
        skill.body,
        tools,
        notes=skill.notes,
        instructions=instructions,
        failures=skill.failures,
    )


def _instructions_only(info: SkillInfo) -> str:
    try:
        return read_body(info)
    except SkillError as exc:
        return f"(its instructions could not be read: {exc})"


def render_preloaded(items: Sequence[Preloaded]) -> str | None:
    """The system-prompt section of the preloaded skills' instructions."""
    parts = []
    for item in items:
        if not item.instructions:
            continue
        text = f"### Skill: {item.info.name}\nFolder: {item.info.folder}\n\n"
        text += substitute(item.body, item.info.folder) or "(no instructions)"
        if item.note:
            text += f"\n\n(Its tools are not available: {item.note})"
        text += "".join(f"\n\n{note}" for note in item.notes)
        parts.append(text)
    if not parts:
        return None
    head = "# Skills loaded for you\nThese skills are loaded already; their tools are available."
    return "\n\n".join([head, *parts])


def refused_code(catalog: SkillCatalog, permissions: Permissions) -> list[str]:
    """What to tell the user of each skill of `catalog` whose code a run with `permissions`
    will not import."""
    found = []
    for info in catalog:
        refusal = untrusted_code(info, permissions)
        if refusal is not None:
            found.append(f"{info.folder}: {refusal} [tools-in-workspace]")
    return found


def warn_refused_code(catalog: SkillCatalog, permissions: Permissions) -> None:
    """A `SafetyWarning` for each skill whose code will not be imported, at build time, so
    a refusal is never silent (the CLI prints the same on stderr)."""
    workspace = permissions.workspace.expanduser().resolve()
    if workspace in catalog.warned_workspaces:
        return  # once per catalog and workspace, not again for every agent built from them
    catalog.warned_workspaces.add(workspace)
    for message in refused_code(catalog, permissions):
        warnings.warn(message, SafetyWarning, stacklevel=4)


def untrusted_code(info: SkillInfo, permissions: Permissions) -> str | None:
    """Why a skill's code must not run in a run with these permissions, or None if it may.

    Code is never imported from a skill folder inside the run's workspace, where the files
    skill writes: the model could have written it, in this run or an earlier one. The skills
    shipped with the package are exempt (the workspace may be a checkout that holds them).
    """
    if not info.has_tools or info.builtin:
        return None
    root = permissions.workspace.expanduser().resolve()
    if not is_inside(root, info.folder):
        return None
    return (
        f"its folder {info.folder} is inside the run's workspace ({root}), where files can be "
        "written during a run, so its tools.py is not imported and its .mcp.json servers are "
        "not started. Keep skills with code outside the workspace (a job's default workspace "
        "is work/ beside its spec, so the spec's skills/ folder is outside it), or set the "
        "workspace (permissions.workspace) to a folder that does not hold them."
    )
