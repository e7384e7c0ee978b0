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

A skill's `allowed-tools` means what the Agent Skills specification and Claude Code mean:
tools *pre-approved* while the skill is active (`PreapprovedTools`): a call the run's permissions
would put to a person (`ask`) runs without asking, and nothing else changes (a call they deny
stays denied, other tools stay as they are). `Bash(git add:*)` pre-approves only commands
whose words begin with `git add`, and no command that could run another (`;`, `&&`, `|`,
`$(...)`, a redirection...), and only where the run's sandbox confines commands (with
`sandbox: {backend: none}` a listed command asks as before). A skill from a folder named with
`preapprove: false` (`SkillFolder`) pre-approves nothing. `skill_allowed_tools: restrict`
in the permissions (or a skill's `allowed-tools-mode: restrict`, at its frontmatter's top
level or in its `metadata`) makes the list a limit instead (`ToolRule`); a mode written any
other way than `pre-approve` restricts too, so a restriction mistyped never becomes a
pre-approval.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent import Extension, Preapproval, Refusal, ToolContext
from ..messages import ToolCall
from ..security import Permissions, is_inside
from .skill import TOOL_SEPARATOR, AllowedToolsMode, SkillInfo

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


# --- allowed-tools as pre-approval ----------------------------------------------------------

SHELL_TOOL = "shell__run"
COMMAND_TOOLS = frozenset({SHELL_TOOL, "python__run"})
"""Tools that run a command: a skill pre-approves them only inside a real sandbox."""
COMMAND_SKILLS = frozenset(
    f"{tool.partition(TOOL_SEPARATOR)[0]}{TOOL_SEPARATOR}*" for tool in COMMAND_TOOLS
)
"""The same tools listed by their skill (`shell`), as a run's start shows them (`shell__*`)."""
_CHAINING = {
    ";": "`;` runs another command",
    "&": "`&` or `&&` runs another command",
    "|": "`|` or `||` runs another command",
    "<": "a redirection (`<`) reads or runs something else",
    ">": "a redirection (`>`) writes a file",
    "$": "`$` expands a variable or runs a command (`$(...)`)",
    "`": "backquotes run a command",
    "\\": "a backslash escape",
    "(": "parentheses start a subshell",
    ")": "parentheses start a subshell",
    "\n": "a new line runs another command",
    "\r": "a new line runs another command",
    "\x00": "a NUL character",
}


NO_PREAPPROVAL = (
    "pre-approves nothing: its skills folder is set not to (preapprove: false); its calls "
    "ask as any other"
)


def allowed_tools_mode(info: SkillInfo, permissions: Permissions) -> AllowedToolsMode:
    """`restrict` when the run's permissions or the skill itself ask for it."""
    if permissions.skill_allowed_tools == "restrict" or info.allowed_tools_mode == "restrict":
        return "restrict"
    return "pre-approve"


@dataclass(frozen=True)
class PreapprovedTools:
    """The calls one active skill's `allowed-tools` pre-approves, in our names."""

    source: str
    """Who pre-approves, for messages: "skill 'git-helper' (allowed-tools)"."""
    names: frozenset[str] = frozenset()
    """Tools pre-approved whatever their arguments."""
    skills: frozenset[str] = frozenset()
    """Skills whose every tool is pre-approved."""
    commands: tuple[str, ...] = ()
    """`Bash(...)` patterns: shell commands pre-approved when their words match one."""
    unchecked: tuple[str, ...] = ()
    """Entries whose pattern we cannot check (`Read(src/**)`): they pre-approve nothing."""

    def verdict(self, call: ToolCall) -> Preapproval | None:
        """Whether the list pre-approves `call`: granted, refused with why, or None when it
        does not speak of that tool at all."""
        tool = call.name
        skill = tool.partition(TOOL_SEPARATOR)[0] if TOOL_SEPARATOR in tool else None
        if tool in self.names or (skill is not None and skill in self.skills):
            return Preapproval(True, f"pre-approved by {self.source}")
        if tool != SHELL_TOOL or not self.commands:
            return None
        command = _argument(call, "command")
        if command is None:
            return Preapproval(False, f"{self.source}: the call names no command")
        refused = chained(command)
        if refused is not None:
            return Preapproval(False, f"not pre-approved by {self.source}: {refused}")
        for pattern in self.commands:
            if command_matches(pattern, command):
                return Preapproval(True, f"pre-approved by {self.source}: Bash({pattern})")
        patterns = " ".join(f"Bash({p})" for p in self.commands)
        return Preapproval(
            False, f"not pre-approved by {self.source}: the command matches none of {patterns}"
        )


def skill_preapproval(
    info: SkillInfo, call: ToolCall, permissions: Permissions
) -> Preapproval | None:
    """What an active skill's `allowed-tools` says of `call` in a run with `permissions`:
    granted, refused with why, or None when the list does not speak of that tool (or is a
    limit: `restrict` mode, a `ToolRule`). A skill whose folder lies in the run's workspace,
    where a model could have written it, pre-approves nothing."""
    if info.allowed_tools is None or allowed_tools_mode(info, permissions) == "restrict":
        return None
    verdict = preapproved_tools(info).verdict(call)
    if verdict is not None and verdict.granted and not info.preapprove:
        return Preapproval(False, f"skill {info.name!r} (allowed-tools) {NO_PREAPPROVAL}")
    root = permissions.workspace.expanduser().resolve()
    trusted = info.builtin or not is_inside(root, info.folder)
    if verdict is not None and verdict.granted and not trusted:
        return Preapproval(
            False,
            f"skill {info.name!r} (allowed-tools) pre-approves nothing: its folder "
            f"{info.folder} lies in the run's workspace ({root}), where files can be "
            "written during a run",
        )
    if (
        verdict is not None
        and verdict.granted
        and call.name in COMMAND_TOOLS
        and permissions.sandbox.backend == "none"
    ):
        return Preapproval(
            False,
            f"skill {info.name!r} (allowed-tools) pre-approves no command here: commands run "
            "unconfined (sandbox backend none), and a pre-approved command runs only in a "
            "sandbox",
        )
    return verdict


def standing_approvals(skills: Iterable[SkillInfo], permissions: Permissions) -> list[str]:
    """What each skill's `allowed-tools` will pre-approve once the model loads it, in a run
    whose permissions put calls to a person: said at the start, since any installed skill
    that lists `Bash` is a standing approval the moment it is loaded. Empty when the run asks
    nothing (then nothing is pre-approved)."""
    asks = "ask" in (permissions.shell, permissions.python, *permissions.tools.values())
    if not asks:
        return []
    root = permissions.workspace.expanduser().resolve()
    unconfined = permissions.sandbox.backend == "none"
    found = []
    for info in skills:
        if info.allowed_tools is None or allowed_tools_mode(info, permissions) == "restrict":
            continue
        if not info.builtin and is_inside(root, info.folder):
            continue  # pre-approves nothing, and says so at the call
        listed = preapproved_tools(info)
        granted = sorted(listed.names) + [f"{name}__*" for name in sorted(listed.skills)]
        if not info.preapprove:
            if granted or listed.commands:
                found.append(f"skill {info.name!r} lists allowed-tools and {NO_PREAPPROVAL}")
            continue
        if unconfined:  # a command tool, by its name or its skill's, asks (skill_preapproval)
            granted = [g for g in granted if g not in COMMAND_TOOLS and g not in COMMAND_SKILLS]
        elif listed.commands:
            granted += [f"Bash({pattern})" for pattern in listed.commands]
        if granted:
            found.append(
                f"skill {info.name!r} pre-approves, once loaded: {', '.join(granted)} "
                "(its allowed-tools; these run without asking)"
            )
    return found


def preapproved_tools(info: SkillInfo) -> PreapprovedTools:
    """The calls a skill's `allowed-tools` lists, read as pre-approvals."""
    source = f"skill {info.name!r} (allowed-tools)"
    names: set[str] = set()
    skills: set[str] = set()
    commands: list[str] = []
    unchecked: list[str] = []
    for token in tool_tokens(info.allowed_tools):
        base, _, rest = token.partition("(")
        pattern = rest[:-1].strip() if rest.endswith(")") else ""
        if base == "Bash" and pattern not in ("", "*"):
            commands.append(pattern)
            continue
        if pattern not in ("", "*"):
            unchecked.append(token)  # a path or domain pattern we do not check: ask as before
            continue
        found, whole, _ = resolve_tools([base])
        names.update(found)
        skills.update(whole)
    return PreapprovedTools(
        source, frozenset(names), frozenset(skills), tuple(commands), tuple(unchecked)
    )


def chained(command: str) -> str | None:
    """Why a shell command could run more than the words it shows (None if it cannot): any
    character the shell reads as a separator, a substitution or a redirection, even quoted,
    is enough, so no quoting trick gets past the check."""
    for char, why in _CHAINING.items():
        if char in command:
            return f"the command holds {char!r}: {why}"
    return None


def command_matches(pattern: str, command: str) -> bool:
    """Whether a command's words match a `Bash(...)` pattern: `git add:*` and `git add *` take
    any words after `git add`, `npm test` only those words; `*` inside a word matches within
    that word. Words are compared whole: `git add:*` does not match `git addx`."""
    try:
        words = shlex.split(command)
        wanted = shlex.split(pattern[:-2] if pattern.endswith(":*") else pattern)
    except ValueError:  # an unclosed quote
        return False
    rest = pattern.endswith(":*") or (bool(wanted) and wanted[-1] == "*")
    if wanted and wanted[-1] == "*":
        wanted = wanted[:-1]
    if not wanted or len(words) < len(wanted) or (not rest and len(words) != len(wanted)):
        return False
    return all(fnmatch.fnmatchcase(word, want) for word, want in zip(words, wanted, strict=False))


def _argument(call: ToolCall, name: str) -> str | None:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    found = value.get(name) if isinstance(value, dict) else None
    return found if isinstance(found, str) else None
