"""`orchestrator skills check`: every rule of the specification, every problem, strictly.

Unlike a catalog scan, a check reads the whole SKILL.md, imports `tools.py` (the user asked
for this folder to be checked) and validates `.mcp.json` (without starting its servers), and
every problem counts, fatal or not: nothing is made up for, a frontmatter YAML cannot read is
not read again with its values quoted. On the reference validator's own test cases
(agentskills `skills-ref`) it reaches the same verdicts. A `${VAR}` that `.mcp.json` uses and
this environment lacks is a warning, not a problem: it may well be set where the job runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..agent import Tool
from ..security.inventory import reads
from .discovery import walk_skill_folders
from .servers import check_config
from .skill import SkillError, qualified_tool_name
from .skill_md import (
    FrontmatterError,
    Problem,
    normal_name,
    parse_yaml,
    skill_file_in,
    split_skill_text,
    validate,
)
from .sources import TOOLS_FILE, import_module_from


@dataclass
class FolderReport:
    """What a check found in one skill folder."""

    folder: Path
    name: str | None = None
    problems: list[Problem] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    """What may fail elsewhere but is not wrong in the folder (a `${VAR}` unset here)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def check_folders(paths: Iterable[str | Path]) -> list[FolderReport]:
    """Check each path: a skill folder, or a folder of skill folders."""
    reports: list[FolderReport] = []
    for path in map(Path, paths):
        reports += [check_folder(folder) for folder in _skill_folders(path)]
    _flag_duplicates(reports)
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


@reads("skill")
def check_folder(folder: Path) -> FolderReport:
    """Every problem of one skill folder."""
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
        frontmatter, _, problems = split_skill_text(skill_file.read_text(encoding="utf-8"))
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
    report.problems += problems + more + validate(data, folder.name)
    name = data.get("name")
    report.name = normal_name(name) if isinstance(name, str) and name.strip() else None
    _check_tools(folder, report.name or folder.name, report)
    for problem in check_config(folder):  # the .mcp.json, read without starting anything
        (report.problems if problem.fatal else report.warnings).append(problem)
    return report


def _check_tools(folder: Path, skill: str, report: FolderReport) -> None:
    path = folder / TOOLS_FILE
    if not path.is_file():
        return
    digest = hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:12]
    try:
        module = import_module_from(path, f"_orchestrator_check_{digest}")
    except SkillError as exc:
        report.problems.append(Problem("tools-import", str(exc), True))
        return
    names = [v.name for v in vars(module).values() if isinstance(v, Tool)]
    report.tools = [qualified_tool_name(skill, n) for n in dict.fromkeys(names)]


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
