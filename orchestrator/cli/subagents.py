"""`orchestrator subagents list|check`: the sub-agent definitions a run would see.

Without `--subagents`, `list` searches the working folder as a job searches its own:
`subagents/`, `.claude/agents/`, `.codex/agents/`; `--user-skills` adds the home folders.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..tasks import SubagentRegistry, builtin_subagent_folders, check_subagent_folder
from ..tasks.discovery import project_subagent_folders, user_subagent_folders


def register(commands: argparse._SubParsersAction) -> None:
    group = commands.add_parser("subagents", help="list or check sub-agent definitions")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the sub-agents a run would see, first wins")
    listing.add_argument(
        "--subagents",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder to search first (repeatable); without it, the working folder's "
        "subagents/, .claude/agents/ and .codex/agents/",
    )
    listing.add_argument(
        "--user-skills",
        action="store_true",
        help="also search ~/.claude/agents and ~/.codex/agents",
    )
    listing.add_argument("--no-builtin", action="store_true", help="leave the built-ins out")
    listing.set_defaults(handler=_list)

    check = actions.add_parser("check", help="report every problem in a folder; non-zero if any")
    check.add_argument("folder", metavar="DIR")
    check.set_defaults(handler=_check)


def _list(args: argparse.Namespace) -> int:
    folders = [Path(p) for p in args.subagents] or project_subagent_folders(Path.cwd())
    if args.user_skills:
        folders += user_subagent_folders()
    registry = SubagentRegistry(folders=[*folders, *builtin_subagent_folders(not args.no_builtin)])
    for warning in registry.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    width = max(len(name) for name in registry.names)
    for agent in registry:
        where = f"  ({agent.path})" if agent.path else "  (built in)"
        if agent.format != "orchestrator":
            where += f" [{agent.format}]"
        print(f"{agent.name.ljust(width)}  {agent.description}{where}")
    return 0


def _check(args: argparse.Namespace) -> int:
    problems = check_subagent_folder(args.folder)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
        return 1
    print(f"ok: {args.folder}")
    return 0
