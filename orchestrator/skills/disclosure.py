"""How a skill reaches the model: from the first request (preloaded, or with eager
disclosure), or when `load_skill` loads it (what that call answers).

Disclosure of an agent's skills' tools: `progressive`, `eager` or `auto`.

- `progressive` (the default): the tools array holds the meta-tools (and `call_skill_tool`);
  a skill's tools become callable when `load_skill` loads it, their schemas in its answer.
- `eager`: every skill the agent may choose has its tools in the tools array from the first
  request, as agents without progressive disclosure do. `load_skill` still gives a skill's
  instructions. Skills whose tools come from MCP servers stay behind `load_skill` (their
  servers start on the load that needs them), as do `context: fork` skills (they run as
  sub-agents).
- `auto`: eager while those schemas fit in `eager_tokens` tokens, progressive above.

The choice is made once, when the agent is built, so in every mode an agent's tools array and
system prompt stay the same from its first request to its last (the provider's cached prefix
holds). Eager mode imports the `tools.py` of every skill it gives, under the rules a load
follows (`untrusted_code`): a skill whose code may not run here gives no tools.

Preloading: skills an agent starts with already loaded are those its task or job step names,
and those a Claude Code sub-agent file lists under `skills` (or reaches through its `tools`).
A preloaded skill's instructions are in the agent's system prompt and its tools in its tools
array from the first request, so neither changes during the run (provider caches stay warm);
its tools come last in the array (`SkillsExtension.trailing_tools`), so a sub-agent's array
begins as its parent's.
Its code is imported only under the rules `load_skill` follows (`untrusted_code`); when it may
not be, or fails, the instructions still load and the prompt says why the tools are missing.
A skill is active from the start, its `allowed-tools` included. Preloading a `context: fork`
skill inlines it. Skills a model may not choose (`disable-model-invocation`) preload too.

What `load_skill` answers (`render_loaded`): a skill's instructions, its tools and the files
to read. When the skill's tools are callable but not in the tools array (the agent keeps a
stable prefix, agent/tools.py), their full parameter schemas are part of this observation: it
is the only place the model sees them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from ..agent import Tool
from ..agent.tools import DISPATCH_TOOL
from ..errors import SafetyWarning
from ..security import Permissions, is_inside
from ..tokens import TokenCounter, default_counter
from .allowed import ToolRule, first_refusal
from .catalog import SkillCatalog
from .files import list_files
from .skill import LoadedSkill, SkillError, SkillInfo
from .skill_md import read_body, substitute

Disclosure = Literal["progressive", "eager", "auto"]
DISCLOSURES: tuple[str, ...] = get_args(Disclosure)
DEFAULT_DISCLOSURE: Disclosure = "progressive"
DEFAULT_EAGER_TOKENS = 4_000
"""`auto` is eager while the skills' tool schemas count at most this many tokens (the
built-in skills' come to about 2,000)."""

EAGER_NOTE = (
    "The tools of these skills are in your tools array already; load a skill for its "
    "instructions before you use its tools."
)


@dataclass(frozen=True)
class EagerSkill:
    """A skill whose tools an eager agent holds from its first request."""

    info: SkillInfo
    tools: tuple[Tool, ...]


@dataclass(frozen=True)
class DisclosurePlan:
    """What an agent's skills disclose up front: the mode asked for, the mode used, and the
    skills (with tools) given eagerly, with what their schemas count."""

    asked: Disclosure
    mode: Literal["progressive", "eager"]
    eager: tuple[EagerSkill, ...] = ()
    schema_tokens: int = 0

    @property
    def tools(self) -> list[Tool]:
        return [t for skill in self.eager for t in skill.tools]

    @property
    def names(self) -> set[str]:
        return {skill.info.name for skill in self.eager}


def plan_disclosure(
    asked: Disclosure,
    catalog: SkillCatalog,
    permissions: Permissions,
    *,
    given: Collection[str],
    allows: Callable[[str], bool],
    rules: Sequence[ToolRule],
    eager_tokens: int = DEFAULT_EAGER_TOKENS,
    counter: TokenCounter | None = None,
) -> DisclosurePlan:
    """Decide an agent's disclosure. `given` are the skills it starts with (preloaded, or the
    one it runs): they are not disclosed again. `allows` and `rules` are its limits on tools."""
    if asked == "progressive":
        return DisclosurePlan(asked, "progressive")
    eager = tuple(_eager_skills(catalog, permissions, given, allows, rules))
    counter = counter or default_counter()
    tokens = counter.count_tools([t.spec for skill in eager for t in skill.tools])
    if asked == "auto" and tokens > eager_tokens:
        return DisclosurePlan(asked, "progressive", schema_tokens=tokens)
    return DisclosurePlan(asked, "eager", eager, tokens)


def _eager_skills(
    catalog: SkillCatalog,
    permissions: Permissions,
    given: Collection[str],
    allows: Callable[[str], bool],
    rules: Sequence[ToolRule],
) -> list[EagerSkill]:
    found = []
    for info in catalog:
        if not info.model_invocable or not info.gives_tools or info.forks:
            continue
        if info.name in given or info.has_servers or untrusted_code(info, permissions):
            continue
        try:
            skill = catalog.load(info.name)
        except SkillError:
            continue  # its load_skill says why, as in progressive mode
        tools = tuple(
            t for t in skill.tools if allows(t.name) and first_refusal(t.name, rules) is None
        )
        if tools:
            found.append(EagerSkill(info, tools))
    return found


# --- Preloading ----------------------------------------------------------------------------


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
        skill = catalog.load(info.name) if refusal is None else None
        if skill is not None and skill.info.has_servers:
            from .servers import with_servers_sync  # loaded by a skill that declares servers

            skill = with_servers_sync(skill, permissions)
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


# --- What load_skill answers --------------------------------------------------------------


MAX_TOOL_LINE = 200
MAX_FILES_SHOWN = 50
_SELF_FILES = frozenset({"SKILL.md", "skill.md", "tools.py", ".mcp.json", "mcp.json"})


def render_loaded(
    skill: LoadedSkill,
    arguments: str = "",
    rule: ToolRule | None = None,
    shown: Sequence[str] | None = None,
    schemas: bool = False,
) -> str:
    """The observation of `load_skill`: instructions, tools (those in `shown`, when given:
    the ones this agent may call; with their parameter schemas when `schemas`, because they
    are not in the tools array), and files to read on demand."""
    body = substitute(skill.body, skill.info.folder, arguments)
    parts = [f"# Skill: {skill.name}\nFolder: {skill.info.folder}", body or "(no instructions)"]
    tools = [t for t in skill.tools if shown is None or t.name in shown]
    if tools and schemas:
        parts.append(_tool_schemas(tools))
    elif tools:
        lines = [f"- {t.name}: {_one_line(t.description)}" for t in tools]
        parts.append("## Tools of this skill (callable from your next step)\n" + "\n".join(lines))
    withheld = [t.name for t in skill.tools if t not in tools]
    if withheld:
        parts.append(f"(Not callable by this agent, which is limited: {', '.join(withheld)}.)")
    parts.extend(skill.notes)
    if rule is not None:
        parts.append(
            "## Tools allowed from now on\nWhile this skill is active (the rest of this run), "
            f"only these tools may be called ({rule.written}): {rule.described()}."
        )
    files = [f for f in list_files(skill.info, limit=MAX_FILES_SHOWN + 2) if f not in _SELF_FILES]
    if files:
        shown = files[:MAX_FILES_SHOWN]
        more = f"\n- ... and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
        parts.append(
            "## Files in this skill's folder (read_skill_file reads them)\n"
            + "\n".join(f"- {f}" for f in shown)
            + more
        )
    return "\n\n".join(parts)


def _tool_schemas(tools: Sequence[Tool]) -> str:
    """The tools of a loaded skill as the model needs them to call them: name, description
    and JSON parameter schema, and how to call them."""
    lines = [
        "## Tools of this skill (callable from your next step)",
        f"Call one by its name, or through {DISPATCH_TOOL} with "
        '{"tool": "<name>", "arguments": "<its arguments as JSON>"}; the arguments must '
        "match its parameters.",
    ]
    for item in tools:
        parameters = json.dumps(item.spec.parameters, separators=(",", ":"), ensure_ascii=False)
        lines.append(f"- {item.name}: {item.description}\n  parameters: {parameters}")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TOOL_LINE else line[: MAX_TOOL_LINE - 3] + "..."
