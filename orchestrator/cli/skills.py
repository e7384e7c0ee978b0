"""`orchestrator skills list | show | check`: the skill catalog on the command line.

Without `--skills`, `list` and `show` search the working folder as a job searches its own:
`skills/`, `.claude/skills/`, `.agents/skills/`; `--user-skills` adds the home folders.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import TypedDict

from ..eval import EvalError
from ..eval.skill_folder import EVALS_FILE, TRIGGER_FILES, read_evals, read_triggers
from ..messages import plural
from ..security import SandboxUnavailable
from ..skills import (
    DEFAULT_INDEX_TOKENS,
    LoadedSkill,
    SkillCatalog,
    SkillError,
    SkillInfo,
    builtin_skills_folder,
    check_folders,
)
from ..skills.catalog import load_folder
from ..skills.check import FolderReport, tools_in_sandbox
from ..skills.disclosure import DISCLOSURES
from ..skills.discovery import project_skill_folders, user_skill_folders
from ..skills.files import list_files
from ..skills.servers import ConfigProblem, server_summary, sync_server_scope, with_servers_sync
from ..skills.skill import qualified_tool_name
from ..skills.skill_md import Problem as SkillProblem
from ..skills.skill_md import read_body
from ..skills.sources import TOOLS_FILE
from .skill_view import model_view_confined, print_view


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `skills` command group to the top-level parser's subparsers."""
    group = subparsers.add_parser(
        "skills",
        help="list, show and check skills",
        description="Skills are folders with a SKILL.md; see docs/skills.md.",
    )
    group.set_defaults(handler=lambda args: _print_help(group))
    commands = group.add_subparsers(dest="skills_command", metavar="COMMAND")

    listing = commands.add_parser("list", help="list the skills on the search path")
    _search_path_options(listing)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=list_command)

    show = commands.add_parser("show", help="show one skill: fields, tools, files, body")
    show.add_argument("name", help="the skill's name")
    show.add_argument(
        "--connect",
        action="store_true",
        help="start (or connect to) the skill's MCP servers and list their tools",
    )
    show.add_argument(
        "--as-model",
        action="store_true",
        help="show the skill as the model gets it: its index line, the load_skill result and "
        "the tools array as a scripted run sends them, and their token costs (loading imports "
        "its tools.py and starts its MCP servers, as a run's load does)",
    )
    show.add_argument(
        "--disclosure",
        choices=DISCLOSURES,
        default="progressive",
        help="with --as-model: how the skills' tools reach the model (default progressive)",
    )
    show.add_argument(
        "--arguments", default="", metavar="TEXT", help="with --as-model: load_skill's arguments"
    )
    show.add_argument("--json", action="store_true", help="with --as-model: print JSON")
    _index_option(show)
    _search_path_options(show)
    show.set_defaults(handler=show_command)

    check = commands.add_parser(
        "check", help="check skill folders against the specification, strictly"
    )
    check.add_argument(
        "dirs", nargs="+", metavar="DIR", help="a skill folder, or a folder of skill folders"
    )
    check.add_argument(
        "--strict", action="store_true", help="warnings fail the check too (exit code 1)"
    )
    check.add_argument(
        "--connect",
        action="store_true",
        help="also start each skill's MCP servers, as a run's load would, and report one that "
        "does not start (from this process: use it on skills you trust)",
    )
    _index_option(check)
    check.set_defaults(handler=check_command)


def _search_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skills",
        action="append",
        default=[],
        metavar="DIR",
        help="a skill folder or a folder of skills, searched before the built-in ones "
        "(repeatable; earlier folders win); without it, the working folder's skills/, "
        ".claude/skills/ and .agents/skills/",
    )
    parser.add_argument(
        "--user-skills",
        action="store_true",
        help="also search ~/.claude/skills and ~/.agents/skills",
    )
    parser.add_argument("--no-builtin", action="store_true", help="leave the built-in skills out")


def _index_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index-tokens",
        type=int,
        default=DEFAULT_INDEX_TOKENS,
        metavar="N",
        help=f"the skill index's token cap (default {DEFAULT_INDEX_TOKENS:,}, as a run's)",
    )


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _catalog(args: argparse.Namespace) -> SkillCatalog:
    # The command prints the catalog's warnings itself; keep the logger from repeating them.
    logging.getLogger("orchestrator.skills").addHandler(logging.NullHandler())
    folders = [Path(p) for p in args.skills] or project_skill_folders(Path.cwd())
    if args.user_skills:
        folders += user_skill_folders()
    catalog = SkillCatalog(folders, include_builtin=not args.no_builtin)
    for warning in catalog.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return catalog


class _SkillRow(TypedDict):
    """One skill as `orchestrator skills list` shows it (a JSON object with --json)."""

    name: str
    source: str
    description: str
    tools: bool  # whether it brings tools of its own


def list_command(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    builtin = builtin_skills_folder()
    rows: list[_SkillRow] = [
        {
            "name": info.name,
            "source": "built-in" if builtin and info.folder.parent == builtin else str(info.folder),
            "description": info.about,
            "tools": info.gives_tools,
        }
        for info in catalog
    ]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("No skills found.")
        return 0
    width = max(len(row["name"]) for row in rows)
    room = max(30, shutil.get_terminal_size((120, 24)).columns - width - 3)
    for row in rows:
        text = row["description"]
        text = text if len(text) <= room else text[: room - 3] + "..."
        print(f"{row['name']:<{width}}  {text}")
    print(f"\n{plural(len(rows), 'skill')} from: {', '.join(map(str, catalog.paths))}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    info = catalog.get(args.name)
    if info is None:
        close = catalog.suggest(args.name, by_search=False)  # a person asked: spelling only
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        print(f"Unknown skill {args.name!r}.{hint} (`skills list` shows all)", file=sys.stderr)
        return 1
    if args.as_model:
        try:
            view = model_view_confined(
                catalog,
                info.name,
                disclosure=args.disclosure,
                index_tokens=args.index_tokens,
                arguments=args.arguments,
            )
        except (SkillError, SandboxUnavailable) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print_view(view, as_json=args.json)
        return 0
    try:
        has_code = info.tools_digest is not None  # a tools.py
        skill, confined = _load_confined(info) if has_code else (catalog.load(info.name), [])
    except SkillError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    fields = {
        "name": info.name,
        "description": " ".join(info.description.split()),
        "when_to_use": info.when_to_use,
        "folder": str(info.folder),
        "license": info.license,
        "compatibility": info.compatibility,
        "allowed-tools": info.allowed_tools,
        "context": f"{info.context} (agent: {info.agent or 'general'})" if info.forks else None,
        "model invocation": None if info.model_invocable else "disabled",
        "keywords": ", ".join(info.keywords) or None,
        "metadata": json.dumps(info.metadata, ensure_ascii=False) if info.metadata else None,
    }
    for key, value in fields.items():
        if value:
            print(f"{key}: {value}")
    if info.has_servers:
        skill = _servers(info, skill, connect=args.connect)
        for failure in skill.failures:  # a server that cannot start fails the command
            print(f"error: skill {info.name!r}: {failure}", file=sys.stderr)
    none = "none (instructions only)" if not info.has_servers or args.connect else "none listed"
    listed = [*confined, *((t.name, t.description) for t in skill.tools)]
    print("tools:" if listed else f"tools: {none}")
    for name, description in listed:
        print(f"  - {name}: {' '.join(description.split())}")
    for note in skill.notes:
        print(f"\n{note}")
    files = list_files(info)
    print(f"files: {', '.join(files)}")
    print(f"\n{skill.body}")
    return 1 if skill.failures else 0


def _load_confined(info: SkillInfo) -> tuple[LoadedSkill, list[tuple[str, str]]]:
    """A skill with a `tools.py`, for `show`: its body read, and its tools listed from an
    import in the sandbox (a built-in skill's in this process: it is the package's code).
    Where no sandbox can run, the tools are not listed, and stderr says why."""
    if info.builtin:
        loaded = load_folder(info)
        return replace(loaded, tools=()), [(t.name, t.description) for t in loaded.tools]
    skill = LoadedSkill(info=info, body=read_body(info))
    try:
        found = tools_in_sandbox(info.folder)
    except SandboxUnavailable as exc:
        print(f"warning: {TOOLS_FILE} not imported: {exc}", file=sys.stderr)
        return skill, []
    return skill, [(qualified_tool_name(info.name, name), text) for name, text, _ in found]


def _servers(info: SkillInfo, skill: LoadedSkill, *, connect: bool) -> LoadedSkill:
    """Print the skill's MCP servers; with `connect`, the skill with their tools (the servers
    stop again before this returns)."""
    try:
        servers = server_summary(info)
    except ConfigProblem as exc:
        print(f"mcp servers: cannot be read: {exc}")
        return skill
    print("mcp servers:")
    for name, where in servers.items():
        print(f"  - {name}: {where}")
    if not connect:
        print("  (`--connect` starts them and lists their tools)")
        return skill
    with sync_server_scope() as pool:
        skill = with_servers_sync(skill, None)
        for connection in pool.connections.values():
            if connection.up:
                print(f"  - {connection.name}: connected, protocol {connection.protocol}")
    return skill


def check_command(args: argparse.Namespace) -> int:
    reports = check_folders(args.dirs, index_tokens=args.index_tokens)
    connected: dict[Path, list[str]] = {}
    if args.connect:
        catalog = SkillCatalog([Path(d) for d in args.dirs if Path(d).is_dir()])
        connected = _connect_servers(reports, catalog)
    for report in reports:
        found = _eval_files(report) + connected.get(report.folder, [])
        _print_report(report)
        for line in found:
            print(f"      {line}")
    failed = sum(not report.ok for report in reports)
    warned = sum(bool(report.warnings) for report in reports)
    print(
        f"\n{plural(len(reports), 'folder')} checked: {len(reports) - failed} valid, "
        f"{failed} with problems" + (f", {warned} with warnings" if warned else "")
    )
    if args.strict and warned:
        print("--strict: warnings fail the check")
        return 1
    return 1 if failed else 0


def _connect_servers(reports: list[FolderReport], catalog: SkillCatalog) -> dict[Path, list[str]]:
    """`check --connect`: start each checked skill's MCP servers as a run's load would
    (its `tools.py` is not imported: only the servers start). A server that does not start
    is a problem of its folder; the tools of those that do are listed, by folder."""
    listed: dict[Path, list[str]] = {}
    for report in reports:
        info = catalog.get(report.name) if report.name else None
        if info is None or not info.has_servers:
            continue
        if info.folder.resolve() != report.folder.resolve():
            continue
        with sync_server_scope():
            skill = with_servers_sync(LoadedSkill(info=info, body=""), None)
        for failure in skill.failures:
            report.problems.append(SkillProblem("mcp-start", failure, True))
        if not skill.failures:
            names = ", ".join(tool.name for tool in skill.tools) or "none"
            listed[report.folder] = [f"mcp servers started; their tools: {names}"]
    return listed


def _eval_files(report: FolderReport) -> list[str]:
    """What the folder's eval files hold (docs/eval.md, *A skill's own evals*); a file that
    cannot be read is a problem of the folder."""
    found: list[str] = []
    if not report.folder.is_dir():
        return found
    for relative in (EVALS_FILE, *TRIGGER_FILES):
        path = report.folder / relative
        if not path.is_file():
            continue
        try:
            if relative == EVALS_FILE:
                cases = read_evals(path).evals
                checks = sum(len(c.expectations) + len(c.assertions) for c in cases)
                found.append(
                    f"{relative}: {plural(len(cases), 'case')}, {plural(checks, 'expectation')}"
                )
            else:
                queries = read_triggers(path)
                should = sum(q.should_trigger for q in queries)
                found.append(
                    f"{relative}: {len(queries)} trigger queries ({should} should load it)"
                )
        except EvalError as exc:
            reasons = "; ".join(map(str, exc.problems))
            report.problems.append(
                SkillProblem("eval-file", f"{relative}: cannot be read: {reasons}", False)
            )
    return found


def _print_report(report: FolderReport) -> None:
    for warning in report.warnings:
        print(f"warn  {report.folder}: {warning.message} [{warning.rule}]")
    if report.ok:
        count = len(report.tools)
        tools = f", {plural(count, 'tool')}" if count else ""
        print(f"ok    {report.folder} ({report.name}{tools})")
        if report.needs:
            print(f"      its scripts ask for: {report.needs.described()}")
        return
    print(f"FAIL  {report.folder}")
    for problem in report.problems:
        print(f"  - {problem.message} [{problem.rule}]")
