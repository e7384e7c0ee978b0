"""Tool limits: a skill's `allowed-tools` and a sub-agent's `tools`, in our tool names.

Tool lists are written for Claude Code (`Read Grep Bash(git:*)`, `Read, Edit`) or with our
own names (`files__read_file`, or a skill's name for all its tools). Claude Code's names map
to our skills' tools:

    Read Grep Glob LS     files__read_file files__grep files__glob files__list_dir
    Write Edit MultiEdit  files__write_file files__edit_file (both Edit and MultiEdit)
    Bash, Bash(...)       shell__run (the command pattern in parentheses is not checked)
    WebFetch              http__get
    Task, Agent           fork

Names of another client's tools (`WebSearch`, `TodoWrite`, `mcp__...`) name nothing here: a
list naming only those limits nothing. A `ToolRule` allows the tools it names, those of the
skills it names, and always the meta-tools that only read (`load_skill`, `read_skill_file`,
`search_skills`, `read_task_output`, `task_status`, `wait_tasks`) and `cancel_tasks`, which
can only stop tasks the agent started with a `fork` it was allowed. `ToolLimit` is an agent
extension that refuses every other call (agent/turn_calls.py runs its guard before each call).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent import Extension, Refusal, ToolContext
from ..messages import ToolCall
from .skill import TOOL_SEPARATOR

CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("files__read_file",),
    "Grep": ("files__grep",),
    "Glob": ("files__glob",),
    "LS": ("files__list_dir",),
    "Write": ("files__write_file",),
    "Edit": ("files__edit_file",),
    "MultiEdit": ("files__edit_file",),
    "Bash": ("shell__run",),
    "WebFetch": ("http__get",),
    "Task": ("fork",),
    "Agent": ("fork",),
}
ALWAYS_ALLOWED = frozenset(
    {
        "load_skill",
        "read_skill_file",
        "search_skills",
        "read_task_output",
        "task_status",
        "wait_tasks",
        "cancel_tasks",
    }
)
OUR_META_TOOLS = frozenset({*ALWAYS_ALLOWED, "fork"})
_TOKEN = re.compile(r"[^\s,()\[\]\"']+(?:\([^)]*\))?")
_SKILL_NAME = re.compile(r"^[^\W_A-Z](?:[^\W_A-Z]|-)*$")


def tool_tokens(value: Any) -> list[str]:
    """The entries of a tool list: a YAML list, or a string separated by spaces or commas
    (`Bash(git diff *)` stays one entry)."""
    if isinstance(value, list):
        items = [str(item) for item in value if isinstance(item, str | int)]
        return [token for item in items for token in _TOKEN.findall(item)]
    return _TOKEN.findall(value) if isinstance(value, str) else []


@dataclass(frozen=True)
class ToolRule:
    """The tools one source allows (and denies), in our names."""

    source: str
    """Who sets the limit, for messages: "skill 'review' (allowed-tools)"."""
    written: str
    """The list as it was written."""
    names: frozenset[str] = frozenset()
    skills: frozenset[str] = frozenset()
    denied: frozenset[str] = frozenset()
    limits: bool = True
    """False when the rule only denies: everything not denied is allowed."""

    def allows(self, tool: str) -> bool:
        skill = tool.partition(TOOL_SEPARATOR)[0] if TOOL_SEPARATOR in tool else None
        if tool in self.denied or (skill is not None and skill in self.denied):
            return False
        if not self.limits or tool in ALWAYS_ALLOWED or tool in self.names:
            return True
        return skill is not None and skill in self.skills

    def described(self) -> str:
        allowed = sorted(self.names) + [f"{s}__*" for s in sorted(self.skills)]
        return ", ".join(allowed) or "none but the meta-tools"


def resolve_tools(
    tokens: Iterable[str], skills: Container[str] | None = None
) -> tuple[set[str], set[str], list[str]]:
    """(tool names, skill names, entries naming nothing here) for a tool list.

    A bare lowercase entry names a skill when `skills` has it (any, when `skills` is None).
    """
    names: set[str] = set()
    whole: set[str] = set()
    foreign: list[str] = []
    for token in tokens:
        base = token.split("(", 1)[0].strip()
        if base in CLAUDE_TOOLS:
            names.update(CLAUDE_TOOLS[base])
        elif base in OUR_META_TOOLS or (TOOL_SEPARATOR in base and not base.startswith("mcp__")):
            names.add(base)
        elif _SKILL_NAME.match(base) and (skills is None or base in skills):
            whole.add(base)
        else:
            foreign.append(token)
    return names, whole, foreign


def tool_rule(
    source: str,
    allowed: Any = None,
    denied: Any = None,
    *,
    own_skill: str | None = None,
    skills: Container[str] | None = None,
) -> ToolRule | None:
    """The rule for an allowed list (None: not given) and a denied list; None when neither
    names a tool here. `own_skill`'s tools are always allowed (a skill may use its own)."""
    allowed_tokens = tool_tokens(allowed) if allowed is not None else None
    names, whole, _ = resolve_tools(allowed_tokens or (), skills)
    denied_names, denied_skills, _ = resolve_tools(tool_tokens(denied), skills)
    limits = allowed is not None and bool(names or whole or not allowed_tokens)
    if not limits and not (denied_names or denied_skills):
        return None
    if own_skill is not None:
        whole.add(own_skill)
    written = " ".join(allowed_tokens or ())
    if denied is not None:
        written += f" (denied: {' '.join(tool_tokens(denied))})"
    return ToolRule(
        source,
        written.strip(),
        frozenset(names),
        frozenset(whole),
        frozenset(denied_names | denied_skills),
        limits,
    )


def refusal(tool: str, rule: ToolRule) -> Refusal:
    """The observation for a call a rule does not allow."""
    return Refusal(
        f"Refused: {tool} is not among the tools allowed by {rule.source} "
        f"({rule.written or 'no tools'}); allowed here: {rule.described()}."
    )


def first_refusal(tool: str, rules: Iterable[ToolRule]) -> Refusal | None:
    """The refusal of the first rule that does not allow `tool`, if any."""
    for rule in rules:
        if not rule.allows(tool):
            return refusal(tool, rule)
    return None


class ToolLimit(Extension):
    """An agent extension that adds no prompt and no tools, and refuses every call its rules
    do not allow (a sub-agent's `tools`, a forked skill's `allowed-tools`)."""

    def __init__(self, rules: Sequence[ToolRule]) -> None:
        self.rules = list(rules)

    def guard(self, call: ToolCall, ctx: ToolContext) -> Refusal | None:
        return first_refusal(call.name, self.rules)

    def allows(self, tool: str) -> bool:
        return all(rule.allows(tool) for rule in self.rules)

    def __repr__(self) -> str:
        return f"ToolLimit({[r.source for r in self.rules]})"
