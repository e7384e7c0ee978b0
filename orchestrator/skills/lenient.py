"""Lenient loading: a skill folder written for another client loads with a name and a
description whenever one can be found, as forgiving as the clients users know.

- The name is NFKC-normalised and stripped. A missing name, or one that breaks the naming
  rules (`Agent Development`, `-21risk-automation`), falls back to the folder's name (made to
  fit the rules if it does not: `Agent_Dev` -> `agent-dev`), with a warning.
- A missing description falls back to the body's first paragraph.
- A frontmatter that YAML cannot read is read again with its values quoted (an unquoted
  `Use when: ...`), then line by line for the fields we know (a description running over
  unindented lines); if that fails too, or there is no frontmatter at all, the folder's name
  and the first paragraph are used.
- `metadata` keeps strings as written and nested values as JSON; `allowed-tools` may be a
  YAML list or a string.

A skill is left out only when no description can be found, or its SKILL.md cannot be read
(not UTF-8, a frontmatter never closed). Every fallback is a warning naming the rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .body import first_paragraph
from .frontmatter import (
    TOO_LARGE,
    FrontmatterError,
    Problem,
    find_frontmatter,
    parse_forgiving,
    read_skill_text,
    split_skill_text,
)
from .rules import (
    CLIENT_FIELDS,
    KNOWN_FIELDS,
    MAX_NAME,
    name_format_error,
    normal_name,
    slug,
    unknown_fields,
    validate,
)
from .skill import SkillInfo, parse_keywords

_TRUE = frozenset({"true", "yes", "on", "1"})
_UNDERSTOOD: dict[str, tuple[str, type]] = {
    # Breaches of the specification that a lenient load reads as their authors meant:
    # rule -> (field, the type it then has).
    "allowed-tools-type": ("allowed-tools", list),
    "metadata-type": ("metadata", dict),
}


@dataclass
class Reading:
    """What a lenient read of one folder found."""

    skill_file: Path | None = None
    """The SKILL.md, or None when the folder has none (it is not a skill)."""
    info: SkillInfo | None = None
    """The skill, or None when it had to be left out."""
    problems: list[Problem] = field(default_factory=list)


def read_skill_folder(folder: Path) -> Reading:
    """Read one folder's SKILL.md leniently (frontmatter only, unless a fallback needs more)."""
    try:
        found = find_frontmatter(folder)
    except FrontmatterError as exc:
        return Reading(folder / "SKILL.md", None, [exc.problem])
    if found is None:
        return Reading()
    skill_file, text, problems = found
    reading = Reading(skill_file, None, list(problems))
    data: dict[str, Any] = {}
    parsed = False
    fallback = "; the folder's name and the body's first paragraph are used"
    if text is None:
        reading.problems = [
            replace(p, message=p.message + fallback) if p.rule == "frontmatter" else p
            for p in reading.problems
        ]
    else:
        try:
            data, more = parse_forgiving(text, (*KNOWN_FIELDS, *CLIENT_FIELDS))
            reading.problems += more
            parsed = True
        except FrontmatterError as exc:
            if exc.problem.rule == TOO_LARGE:  # hostile, not sloppy: no fallback reading
                reading.problems.append(exc.problem)
                return reading
            reading.problems.append(replace(exc.problem, message=exc.problem.message + fallback))
    reading.info = _resolve(data, parsed, skill_file, reading.problems)
    return reading


def _resolve(
    data: dict[str, Any], parsed: bool, skill_file: Path, problems: list[Problem]
) -> SkillInfo | None:
    """The skill's info, with fallbacks for its name and description; None if left out."""
    folder = skill_file.parent
    name, name_note = _name(data.get("name"), folder.name)
    description = _description(data.get("description"))
    if description is None:
        description = first_paragraph(_body(skill_file))
    if parsed:
        problems += _notes(validate(data, folder.name), data, name_note, description)
    if name is None:
        problems.append(Problem("name-missing", f"no usable name: {name_note}", True))
        return None
    if description is None:
        if not parsed:
            problems.append(_description_note(Problem("description-missing", "no description")))
        return None
    return to_info(data, skill_file, name=name, description=description)


def _notes(
    checks: list[Problem], data: dict[str, Any], name_note: str, description: str | None
) -> list[Problem]:
    """The specification's problems, each saying what the lenient load did about it."""
    notes = []
    for problem in checks:
        if problem.rule == "name-folder" and name_note:
            continue  # the name came from a fallback, whose note says which
        key, kind = _UNDERSTOOD.get(problem.rule, ("", type(None)))
        if key and isinstance(data.get(key), kind):
            continue
        if problem.rule in ("name-format", "name-missing"):
            problem = replace(problem, message=f"{problem.message}; {name_note}")
        elif problem.rule == "description-missing":
            problem = _description_note(problem, description)
        elif problem.rule == "unknown-field":
            unknown = unknown_fields(data)
            if not unknown:
                continue  # only fields of a client we follow
            problem = replace(
                problem, message=f"unknown frontmatter fields (ignored): {', '.join(unknown)}"
            )
        notes.append(problem)
    return notes


def _name(raw: Any, folder_name: str) -> tuple[str | None, str]:
    """The skill's name, and (when it is a fallback) what was done to find it."""
    if isinstance(raw, str) and raw.strip():
        name = normal_name(raw)
        if name_format_error(name) is None:
            return name, ""
    folder = normal_name(folder_name)
    if len(folder) <= MAX_NAME and name_format_error(folder) is None:
        return folder, f"loaded under its folder's name {folder!r}"
    for candidate in (slug(raw if isinstance(raw, str) else ""), slug(folder_name)):
        if candidate and name_format_error(candidate) is None:
            return candidate, f"loaded as {candidate!r}"
    return None, f"neither the name nor the folder's name {folder_name!r} can be made one"


def _description(raw: Any) -> str | None:
    return raw.strip() if isinstance(raw, str) and raw.strip() else None


def _description_note(problem: Problem, found: str | None = None) -> Problem:
    if found is not None:
        return replace(problem, message=f"{problem.message}; the body's first paragraph is used")
    return Problem(
        problem.rule, f"{problem.message}, and the body has no paragraph to use instead", True
    )


def _unknown_note(data: dict[str, Any], problem: Problem) -> Problem | None:
    unknown = unknown_fields(data)
    if not unknown:
        return None  # only fields of a client we follow
    return Problem("unknown-field", f"unknown frontmatter fields (ignored): {', '.join(unknown)}")


def _body(skill_file: Path) -> str:
    try:
        return split_skill_text(read_skill_text(skill_file))[1]
    except (OSError, FrontmatterError):
        return ""


def to_info(
    data: dict[str, Any],
    skill_file: Path,
    *,
    name: str | None = None,
    description: str | None = None,
) -> SkillInfo:
    """A SkillInfo from a frontmatter (and the name and description the fallbacks found)."""
    raw_metadata = data.get("metadata")
    keywords = raw_metadata.get("keywords") if isinstance(raw_metadata, dict) else None
    context = _text(data.get("context"))
    return SkillInfo(
        name=name or normal_name(data["name"]),
        description=description or data["description"].strip(),
        folder=skill_file.parent,
        skill_file=skill_file,
        license=_text(data.get("license")),
        compatibility=_text(data.get("compatibility")),
        allowed_tools=_tool_list(data.get("allowed-tools")),
        metadata=_string_map(raw_metadata),
        keywords=parse_keywords(keywords),
        when_to_use=_text(data.get("when_to_use")),
        model_invocable=not _flag(data.get("disable-model-invocation")),
        context=context.lower() if context else None,
        agent=_text(data.get("agent")),
    )


def _tool_list(value: Any) -> str | None:
    if isinstance(value, list):
        value = " ".join(str(item) for item in value if isinstance(item, str))
    return _text(value)


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {
        str(key): item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
        for key, item in value.items()
    }


def _flag(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in _TRUE


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None
