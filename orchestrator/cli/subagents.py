"""`orchestrator subagents list|check`: the sub-agent definitions a run would see."""

from __future__ import annotations

import argparse
import sys

from ..tasks import SubagentRegistry, builtin_subagent_folders, check_subagent_folder


def register(commands: argparse._SubParsersAction) -> None:
    group = commands.add_parser("subagents", help="list or check sub-agent definitions")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="the sub-agents a run would see, first wins")
    listing.add_argument(
        "--subagents", action="append", default=[], metavar="DIR", help="a folder to search first"
    )
    listing.add_argument("--no-builtin", action="store_true", help="leave the built-ins out")
    listing.set_defaults(handler=_list)

    check = actions.add_parser("check", help="report every problem in a folder; non-zero if any")
    check.add_argument("folder", metavar="DIR")
    check.set_defaults(handler=_check)


def _list(args: argparse.Namespace) -> int:
    folders = [*args.subagents, *builtin_subagent_folders(not args.no_builtin)]
    registry = SubagentRegistry(folders=folders)
    for warning in registry.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    width = max(len(name) for name in registry.names)
    for agent in registry:
        where = f"  ({agent.path})" if agent.path else "  (built in)"
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
