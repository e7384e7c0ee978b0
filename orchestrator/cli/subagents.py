"""`orchestrator subagents list|show|check`: the sub-agent definitions a run would see.

Without `--subagents`, `list` and `show` search the working folder as a job searches its own:
`subagents/`, `.claude/agents/`, `.codex/agents/`; `--user-skills` adds the home folders.
`check` takes any number of folders, as `skills check` does, and exits 1 if any has a problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..messages import plural
from ..skills.discovery import project_subagent_folders, user_subagent_folders
from ..tasks import SubagentRegistry, builtin_subagent_folders, check_subagent_folder, suggest
from ..tasks.subagents import SubagentDef


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = commands.add_parser(
        "subagents",
        help="list, show and check sub-agent definitions",
        description="Sub-agents are markdown files with frontmatter; see docs/subagents.md.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the sub-agents a run would see, first wins")
    _search_path_options(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=_list)

    show = actions.add_parser("show", help="one sub-agent: its fields and system prompt")
    show.add_argument("name", help="the sub-agent's name")
    _search_path_options(show)
    show.set_defaults(handler=_show)

    check = actions.add_parser(
        "check", help="report every problem in sub-agent folders; non-zero if any"
    )
    check.add_argument("folders", nargs="+", metavar="DIR", help="a folder of definitions")
    check.set_defaults(handler=_check)


def _search_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--subagents",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder to search first (repeatable); without it, the working folder's "
        "subagents/, .claude/agents/ and .codex/agents/",
    )
    parser.add_argument(
        "--user-skills",
        action="store_true",
        help="also search ~/.claude/agents and ~/.codex/agents",
    )
    parser.add_argument("--no-builtin", action="store_true", help="leave the built-ins out")


def _registry(args: argparse.Namespace) -> SubagentRegistry:
    folders = [Path(p) for p in args.subagents] or project_subagent_folders(Path.cwd())
    if args.user_skills:
        folders += user_subagent_folders()
    registry = SubagentRegistry(folders=[*folders, *builtin_subagent_folders(not args.no_builtin)])
    for warning in registry.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return registry


def _list(args: argparse.Namespace) -> int:
    registry = _registry(args)
    if args.json:
        print(json.dumps([_as_json(agent) for agent in registry], indent=2, ensure_ascii=False))
        return 0
    if not len(registry):
        print("No sub-agents found.")
        return 0
    width = max(len(name) for name in registry.names)
    for agent in registry:
        print(f"{agent.name.ljust(width)}  {agent.description}  ({_where(agent)})")
    return 0


def _show(args: argparse.Namespace) -> int:
    registry = _registry(args)
    agent = registry.get(args.name)
    if agent is None:
        print(
            f"Unknown sub-agent {args.name!r}{suggest(args.name, registry.names)}; "
            "`subagents list` shows all.",
            file=sys.stderr,
        )
        return 1
    for key, value in _as_json(agent).items():
        if key != "system" and value not in (None, [], {}):
            shown = ", ".join(value) if isinstance(value, list) else value
            print(f"{key}: {shown}")
    print(f"\n{agent.system}")
    return 0


def _check(args: argparse.Namespace) -> int:
    problems = [problem for folder in args.folders for problem in check_subagent_folder(folder)]
    for problem in problems:
        print(problem)
    checked = plural(len(args.folders), "folder")
    if problems:
        print(f"{checked} checked: {plural(len(problems), 'problem')}", file=sys.stderr)
        return 1
    print(f"ok: {', '.join(args.folders)} ({checked} checked)")
    return 0


def _where(agent: SubagentDef) -> str:
    where = str(agent.path) if agent.path else "built in"
    return where if agent.format == "orchestrator" else f"{where} [{agent.format}]"


def _as_json(agent: SubagentDef) -> dict[str, Any]:
    """What `list --json` and `show` print of a definition."""
    model = agent.model.model_dump(exclude_none=True) if agent.model is not None else None
    return {
        "name": agent.name,
        "description": agent.description,
        "skills": agent.skills,
        "model": model.get("name") if model and set(model) == {"name"} else model,
        "max_steps": agent.max_steps,
        "max_tokens": agent.max_tokens,
        "format": agent.format,
        "path": str(agent.path) if agent.path else None,
        "system": agent.system,
    }
