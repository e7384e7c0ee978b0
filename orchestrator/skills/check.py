"""`orchestrator skills check`: every rule of the specification, every problem, strictly.

Unlike a catalog scan, a check reads the whole SKILL.md, imports `tools.py` (in a sandboxed
process, docs/sandbox.md: checking a skill never runs its code outside one) and validates
`.mcp.json` (without starting its servers), and every problem counts, fatal or not: nothing
is made up for, a frontmatter YAML cannot read is not read again with its values quoted. On
the reference validator's own test cases (agentskills `skills-ref`) it reaches the same
verdicts. A `${VAR}` that `.mcp.json` uses and
this environment lacks is a warning, not a problem: it may well be set where the job runs.

It also looks as deep as a run would, and warns (a warning does not fail the check, unless
the command is given `--strict`) about what would go wrong or cost more there: a tool
parameter without a type (the model is told it takes any JSON value), a tool name that is
sent shortened to a hash, a `.mcp.json` command not found on PATH, a link in SKILL.md to a
file that does not exist (or leads out of the folder, where `read_skill_file` cannot read),
an `allowed-tools` entry that names no tool, a skill the index's token cap leaves out (the
model then finds it only through `search_skills`), a skill named as a built-in one (it
shadows it), and Claude Code's fields, which the loader understands but the specification
does not define.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..security import SandboxSettings, SandboxUnavailable
from ..security.inventory import reads
from ..security.sandbox import Sandbox, resolve_backend
from .allowed import resolve_tools, tool_tokens
from .catalog import DEFAULT_INDEX_TOKENS, SkillCatalog
from .discovery import builtin_skills_folder, walk_skill_folders
from .process import child_environment, run_process
from .servers import ConfigProblem, check_config, expand
from .servers import parse_config as parse_servers_file
from .skill import (
    HOST_PORT,
    NETWORK_KEY,
    TOOL_SEPARATOR,
    SandboxNeeds,
    ServerConfig,
    SkillError,
    config_file_in,
    parse_needs,
    qualified_tool_name,
)
from .skill_md import (
    CLIENT_FIELDS,
    KNOWN_FIELDS,
    SKILL_FILE,
    FrontmatterError,
    Problem,
    is_mode_field,
    metadata_strings,
    mode_notes,
    normal_name,
    parse_yaml,
    read_skill_text,
    skill_file_in,
    split_skill_text,
    validate,
)
from .sources import TOOLS_FILE

_TYPED = frozenset({"type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"})
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^()\s<>]+)>?(?:\s+[\"'][^\"']*[\"'])?\s*\)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MAX_NAMED = 20


@dataclass
class FolderReport:
    """What a check found in one skill folder."""

    folder: Path
    name: str | None = None
    problems: list[Problem] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    """What may fail elsewhere but is not wrong in the folder (a `${VAR}` unset here)."""
    needs: SandboxNeeds = field(default_factory=SandboxNeeds)
    """The hosts and paths the skill's scripts ask for (its `metadata`; `SandboxNeeds`)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def check_folders(
    paths: Iterable[str | Path], *, index_tokens: int = DEFAULT_INDEX_TOKENS
) -> list[FolderReport]:
    """Check each path: a skill folder, or a folder of skill folders. What depends on the
    other skills (`allowed-tools` entries, the index's cap of `index_tokens`) is judged in
    the catalog a run given these paths would have: them, then the built-in skills."""
    given = [Path(p) for p in paths]
    catalog = SkillCatalog([p for p in given if p.is_dir()])
    reports: list[FolderReport] = []
    for path in given:
        reports += [check_folder(folder, catalog) for folder in _skill_folders(path)]
    _flag_duplicates(reports)
    _flag_builtin_shadows(reports)
    _flag_index_cap(reports, catalog, index_tokens)
    return reports


def _skill_folders(path: Path) -> list[Path]:
    """The skill folders at or below `path`; when some of its own subfolders are skills, the
    others are reported too (as folders without a SKILL.md)."""
    if not path.is_dir():
        return [path]
    found = walk_skill_folders(path).folders
    if not found:
        return [path]
    if any(folder.parent == path for folder in found):
        children = {c for c in path.iterdir() if c.is_dir() and not c.name.startswith((".", "__"))}
        lone = [c for c in children if not any(f.is_relative_to(c) for f in found)]
        found = sorted([*found, *lone])
    return found


def check_folder(folder: Path, catalog: SkillCatalog | None = None) -> FolderReport:
    """Every problem of one skill folder; given the `catalog` it would run in, also its
    `allowed-tools` entries that name no tool there."""
    report = FolderReport(folder)
    if not folder.exists():
        report.problems.append(Problem("folder", "no such folder", True))
        return report
    if not folder.is_dir():
        report.problems.append(Problem("folder", "not a folder", True))
        return report
    skill_file = skill_file_in(folder)
    if skill_file is None:
        report.problems.append(Problem("skill-file", "the folder has no SKILL.md", True))
        return report
    try:
        text = read_skill_text(skill_file)
        frontmatter, _, problems = split_skill_text(text)
        if frontmatter is None:  # as the reference validator, only this one problem
            report.problems += problems
            return report
        data, more = parse_yaml(frontmatter)
    except UnicodeDecodeError:
        report.problems.append(Problem("encoding", "SKILL.md is not UTF-8 text", True))
        return report
    except FrontmatterError as exc:
        report.problems.append(exc.problem)
        return report
    # Claude Code's fields are understood when loading: worth a word, not a failure.
    modes = [key for key in data if is_mode_field(key)]  # ours, however spelt: a note below
    checks = validate(data, folder.name, fields=(*KNOWN_FIELDS, *CLIENT_FIELDS, *modes))
    report.problems += problems + more + checks
    report.warnings += mode_notes(data)
    client = sorted(key for key in data if key in CLIENT_FIELDS)
    if client:
        report.warnings.append(
            Problem(
                "client-field",
                "fields of Claude Code, not of the Agent Skills specification (understood "
                f"here; other clients may refuse them): {', '.join(client)}",
            )
        )
    name = data.get("name")
    report.name = normal_name(name) if isinstance(name, str) and name.strip() else None
    report.needs = parse_needs(metadata_strings(data.get("metadata")), folder)
    malformed = [entry for entry in report.needs.network if not HOST_PORT.match(entry)]
    if malformed:
        report.warnings.append(
            Problem(
                "sandbox-network",
                f"metadata.{NETWORK_KEY}: not host:port: {', '.join(malformed)} (no run grants it)",
            )
        )
    _check_tools(folder, report.name or folder.name, report)
    for problem in check_config(folder):  # the .mcp.json, read without starting anything
        (report.problems if problem.fatal else report.warnings).append(problem)
    report.warnings += _server_commands(folder)
    body_start = frontmatter.count("\n") + 2  # the lines before the body: '---', its own
    report.warnings += _links(folder, text.splitlines()[body_start:], body_start + 1)
    if catalog is not None and "allowed-tools" in data:
        report.warnings += _allowed_tools(data["allowed-tools"], catalog)
    return report


def _check_tools(folder: Path, skill: str, report: FolderReport) -> None:
    path = folder / TOOLS_FILE
    if not path.is_file():
        return
    try:
        tools = tools_in_sandbox(folder)
    except SkillError as exc:
        report.problems.append(Problem("tools-import", str(exc), True))
        return
    except SandboxUnavailable as exc:
        report.warnings.append(
            Problem("tools-import", f"{TOOLS_FILE} not imported: {exc}; its tools are unchecked")
        )
        return
    report.tools = [qualified_tool_name(skill, name) for name, _, _ in tools]
    for (name, _, parameters), sent in zip(tools, report.tools, strict=True):
        full = f"{skill}{TOOL_SEPARATOR}{name}"
        if sent != full:
            report.warnings.append(
                Problem(
                    "tool-name",
                    f"{TOOLS_FILE}: {full} is sent as {sent} (provider tool names are at most "
                    "64 characters of a-z, A-Z, 0-9, _ and -); shorten the skill's or the "
                    "tool's name",
                )
            )
        properties: dict[str, Any] = parameters.get("properties", {})
        untyped = [name for name, schema in properties.items() if not _TYPED & schema.keys()]
        if untyped:
            what = (
                f"parameter {untyped[0]} has no type; the model is told it takes"
                if len(untyped) == 1
                else f"parameters {', '.join(untyped)} have no type; the model is told they take"
            )
            report.warnings.append(
                Problem("tool-untyped", f"{TOOLS_FILE}: {sent}: {what} any JSON value")
            )


TOOLS_PROBE = """\
import json, sys
from pathlib import Path
from orchestrator.agent import Tool
from orchestrator.errors import OrchestratorError
from orchestrator.skills.sources import import_module_from
try:
    module = import_module_from(Path(sys.argv[1]), "_orchestrator_check")
except OrchestratorError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
tools = {v.name: v for v in vars(module).values() if isinstance(v, Tool)}
print(json.dumps({"tools": [[t.name, t.description, t.spec.parameters] for t in tools.values()]}))
"""
"""Imports a `tools.py` in a sandboxed process and prints its tools' names and parameters."""


def tools_in_sandbox(folder: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """The tools of a folder's `tools.py` (name, description, parameters schema), imported
    in the default sandbox (the folder read-only, no network, an empty workspace): checking
    or showing a skill never runs its code outside one. SkillError when the import fails;
    SandboxUnavailable when no sandbox can run here."""
    found = sandboxed_probe(
        TOOLS_PROBE,
        str((folder / TOOLS_FILE).resolve()),
        read_only=(folder.resolve(),),
        seconds=60,
        failed=f"{folder / TOOLS_FILE} failed to import in the sandbox",
    )
    return [(str(name), str(text), dict(schema)) for name, text, schema in found["tools"]]


def sandboxed_probe(
    code: str, argument: str, *, read_only: tuple[Path, ...], seconds: float, failed: str
) -> dict[str, Any]:
    """Run `code` (with `argument`) in a sandboxed Python process (`read_only` and the
    package read-only, no network, an empty workspace) and read the JSON object its last
    line prints: how vetting a skill looks at its code without running it outside a
    sandbox. SkillError (`failed`, then what the process said) when it prints none, or
    the object's own `error`; SandboxUnavailable when no sandbox can run here."""
    package = Path(__file__).resolve().parents[1]  # the orchestrator package
    with tempfile.TemporaryDirectory(prefix="orchestrator-check-") as scratch:
        workspace = Path(scratch).resolve()
        settings = SandboxSettings(read_only=(*read_only, package), seconds=seconds)
        sandbox = Sandbox(resolve_backend(settings), settings, workspace)
        argv = [sys.executable, "-c", code, argument]
        env = child_environment({"PYTHONPATH": str(package.parent)})
        result = asyncio.run(run_process(argv, cwd=workspace, env=env, sandbox=sandbox))
    lines = result.output.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if result.exit_code == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        what = result.render(int(seconds)).replace("\n", " ")[-600:]
        raise SkillError(f"{failed}: {what}")
    if "error" in found:
        raise SkillError(str(found["error"]))
    return found


@reads("MCP configuration")
def _server_commands(folder: Path) -> list[Problem]:
    """A warning for each stdio server of the folder's `.mcp.json` whose command is not
    found: on PATH, or (a path) from the server's working folder. A command whose variables
    are unset here is left to the `mcp-variables` warning."""
    path = config_file_in(folder)
    if path is None:
        return []
    try:
        declared = parse_servers_file(path.read_bytes(), folder, str(path))
    except (ConfigProblem, OSError):
        return []  # check_config has said why
    found = []
    for name, server in declared.servers.items():
        missing = _missing_command(server, folder)
        if missing is not None:
            found.append(Problem("mcp-command", f"{path}: server {name!r}: command {missing}"))
    return found


def _missing_command(server: ServerConfig, folder: Path) -> str | None:
    """Why the server's command would not start here, or None."""
    if server.kind != "stdio" or not server.command:
        return None
    try:
        command = expand(server.command, os.environ, folder)
        cwd = folder / expand(server.cwd, os.environ, folder) if server.cwd else folder
    except ConfigProblem:
        return None
    if "/" in command:
        target = cwd / command
        return None if target.is_file() else f"{server.command!r} is not found in {cwd}"
    if shutil.which(command) is None:
        return f"{server.command!r} is not found on PATH"
    return None


def _links(folder: Path, lines: list[str], first_line: int) -> list[Problem]:
    """A warning for each markdown link of the body (outside code) to a file of the folder
    that does not exist, or that leads out of the folder."""
    found = []
    root = folder.resolve()
    fenced = False
    for number, line in enumerate(lines, start=first_line):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            target = match.group(1)
            if target.startswith(("#", "${", "$")) or _SCHEME.match(target):
                continue
            relative = unquote(target.split("#", 1)[0].split("?", 1)[0])
            if not relative:
                continue
            where = f"{SKILL_FILE} line {number}: the link to {target}"
            resolved = (folder / relative).resolve()
            if not resolved.is_relative_to(root):
                found.append(
                    Problem(
                        "link",
                        f"{where} leads out of the skill's folder (read_skill_file cannot read it)",
                    )
                )
            elif not resolved.exists():
                found.append(Problem("link", f"{where} leads to no file"))
    return found


def _allowed_tools(value: Any, catalog: SkillCatalog) -> list[Problem]:
    """A warning for each `allowed-tools` entry that names no tool in `catalog`."""
    found = []
    for entry in tool_tokens(value):
        names, _, foreign = resolve_tools([entry], catalog)
        if foreign:
            why = "names no tool here (another client's?); it allows nothing"
        else:
            why = next((w for n in sorted(names) if (w := _no_tool(n, catalog))), "")
        if why:
            found.append(Problem("allowed-tools", f"allowed-tools: {entry!r} {why}"))
    return found


def _no_tool(name: str, catalog: SkillCatalog) -> str | None:
    """Why `name` (one of our tool names) names no tool of the catalog, or None."""
    skill, _, tool = name.partition(TOOL_SEPARATOR)
    if not tool:
        return None  # a meta-tool (fork, load_skill, ...)
    info = catalog.get(skill)
    if info is None:
        return f"names no tool: there is no skill {skill!r}"
    if info.has_servers or info.tools_digest is None:
        return None  # an MCP server's tools are known once it starts
    try:
        tools = [t.name.partition(TOOL_SEPARATOR)[2] for t in catalog.load(info.name).tools]
    except SkillError:
        return None  # the skill's own check says why
    if tool in tools:
        return None
    return (
        f"names no tool: skill {skill!r} has no tool {tool!r} (it has {', '.join(sorted(tools))})"
    )


def _flag_duplicates(reports: list[FolderReport]) -> None:
    first: dict[str, Path] = {}
    for report in reports:
        if report.name is None:
            continue
        if report.name in first:
            report.problems.append(
                Problem(
                    "duplicate-name",
                    f"another skill is also named {report.name!r}: {first[report.name]}",
                )
            )
        else:
            first[report.name] = report.folder


def _flag_builtin_shadows(reports: list[FolderReport]) -> None:
    """A warning for a skill named as a built-in one: a run that searches its folder gets it
    in the built-in's place (as `skills list` says)."""
    shipped = builtin_skills_folder()
    if shipped is None:
        return
    builtin = {folder.resolve(): folder.name for folder in shipped.iterdir() if folder.is_dir()}
    names = set(builtin.values())
    for report in reports:
        if report.name in names and report.folder.resolve() not in builtin:
            report.warnings.append(
                Problem(
                    "shadows-builtin",
                    f"skill {report.name!r} shadows the built-in skill of that name: a run "
                    "that searches this folder gets this one in its place",
                )
            )


def _flag_index_cap(reports: list[FolderReport], catalog: SkillCatalog, max_tokens: int) -> None:
    """Warn about each checked skill that the index's token cap leaves out."""
    listing = catalog.index_listing(max_tokens)
    if listing is None or not listing.left_out:
        return
    left_out = set(listing.left_out)
    for report in reports:
        info = catalog.get(report.name) if report.name else None
        if info is None or info.name not in left_out or info.folder != report.folder:
            continue
        report.warnings.append(
            Problem(
                "index-cap",
                f"left out of the skill index by its cap of {max_tokens:,} tokens "
                f"({len(listing.listed)} of {len(listing.listed) + len(left_out)} skills "
                "listed): the model finds it only through search_skills",
            )
        )
