"""SKILL.md: split off the YAML frontmatter, parse it, and check it against the specification.

Every rule of the Agent Skills specification is a `Problem`. `fatal` problems stop the skill
from being understood (no frontmatter, unparsable YAML, no name or description, a malformed
name), so a lenient load leaves the skill out; the rest (a long description, a name that is
not its folder's, unknown fields) are warnings and the skill loads. `orchestrator skills
check` treats every problem as an error.

YAML scalars are all read as strings, as the reference validator does: `version: 1.0` is
"1.0", `name: yes` is "yes", and a date stays the text it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from .skill import SkillInfo, parse_keywords

SKILL_FILE = "SKILL.md"
KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_FRONTMATTER_CHARS = 65_536
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
DELIMITER = "---"
MAX_DEPTH = 20
MAX_VALUES = 10_000  # YAML aliases can make a few lines stand for billions of values
_CLOSING = re.compile(rb"\n---[ \t]*\r?\n")
_CHUNK = 4096


@dataclass(frozen=True)
class Problem:
    """One broken rule: a short `rule` id, a message for people, and whether it is fatal."""

    rule: str
    message: str
    fatal: bool = False


class FrontmatterError(Exception):
    """SKILL.md cannot be read as frontmatter plus body."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


_BaseLoader: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


class _Loader(_BaseLoader):
    """Composes YAML nodes only; tags are never used, so resolving them is skipped."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return ""


def skill_file_in(folder: Path) -> Path | None:
    """The folder's SKILL.md (or `skill.md`, which the reference validator also accepts)."""
    for name in (SKILL_FILE, "skill.md"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def read_frontmatter(path: Path) -> tuple[str, list[Problem]]:
    """The frontmatter text of a SKILL.md, reading little more than the frontmatter itself."""
    try:
        with path.open("rb") as file:
            data = _read_head(file)
    except OSError as exc:
        raise FrontmatterError(
            Problem("unreadable", f"cannot read SKILL.md: {exc.strerror}", True)
        ) from None
    return _decode_head(data)


def find_frontmatter(folder: Path) -> tuple[Path, str, list[Problem]] | None:
    """A folder's skill file and its frontmatter; None when the folder has no skill file.

    Made for scanning many folders: it opens the file rather than checking it exists first.
    """
    for name in (SKILL_FILE, "skill.md"):
        path = folder / name
        try:
            with path.open("rb") as file:
                data = _read_head(file)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            raise FrontmatterError(
                Problem("unreadable", f"cannot read {name}: {exc.strerror}", True)
            ) from None
        text, problems = _decode_head(data)
        return path, text, problems
    return None


def _read_head(file: BinaryIO) -> bytes:
    data = file.read(_CHUNK)
    while not _CLOSING.search(data) and len(data) <= MAX_FRONTMATTER_CHARS:
        more = file.read(_CHUNK)
        if not more:
            break
        data += more
    return data


def _decode_head(data: bytes) -> tuple[str, list[Problem]]:
    found = _CLOSING.search(data)
    try:
        if found:
            text = data[: found.end()].decode("utf-8")
        else:
            # Cut off at the size limit, the last character may be split: it is not closed anyway.
            cut = len(data) > MAX_FRONTMATTER_CHARS
            text = data.decode("utf-8", errors="replace" if cut else "strict")
    except UnicodeDecodeError:
        raise FrontmatterError(Problem("encoding", "SKILL.md is not UTF-8 text", True)) from None
    return _frontmatter(iter(text.splitlines(keepends=True)))


def split_skill_text(text: str) -> tuple[str, str, list[Problem]]:
    """The frontmatter text, the body (stripped) and the problems of a whole SKILL.md."""
    lines = iter(text.splitlines(keepends=True))
    frontmatter, problems = _frontmatter(lines)
    return frontmatter, "".join(lines).strip(), problems


def _frontmatter(lines: Iterator[str]) -> tuple[str, list[Problem]]:
    problems: list[Problem] = []
    first = next(lines, "")
    if first.startswith("\ufeff"):
        problems.append(Problem("bom", "SKILL.md starts with a byte-order mark"))
        first = first[1:]
    if first.rstrip() != DELIMITER:
        raise FrontmatterError(
            Problem("frontmatter", "SKILL.md must start with YAML frontmatter (a '---' line)", True)
        )
    collected: list[str] = []
    size = 0
    for line in lines:
        if line.rstrip() == DELIMITER:
            return "".join(collected), problems
        collected.append(line)
        size += len(line)
        if size > MAX_FRONTMATTER_CHARS:
            break
    raise FrontmatterError(
        Problem("frontmatter", "SKILL.md frontmatter is not closed with a '---' line", True)
    )


def parse_yaml(text: str) -> tuple[dict[str, Any], list[Problem]]:
    """The frontmatter as a mapping; FrontmatterError if it is not YAML or not a mapping.

    The YAML is only composed (by libyaml when present) and the nodes are turned into Python
    values here: every scalar stays a string, and repeated keys are noticed.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise FrontmatterError(
            Problem("yaml", f"invalid YAML in frontmatter: {reason}", True)
        ) from None
    finally:
        loader.dispose()
    if node is None:
        return {}, []
    if not isinstance(node, yaml.MappingNode):
        raise FrontmatterError(Problem("yaml", "the frontmatter must be a YAML mapping", True))
    duplicates: list[str] = []
    data = _python_value(node, duplicates, 0, [MAX_VALUES])
    problems = [
        Problem("yaml-duplicate-key", f"the frontmatter repeats the key {key!r}")
        for key in dict.fromkeys(duplicates)
    ]
    return data, problems


def _python_value(node: yaml.Node, duplicates: list[str], depth: int, left: list[int]) -> Any:
    """The node as Python values; `left` counts down the values still allowed."""
    if depth > MAX_DEPTH:
        raise FrontmatterError(Problem("yaml", "the frontmatter is nested too deeply", True))
    left[0] -= 1
    if left[0] < 0:
        message = f"the frontmatter holds more than {MAX_VALUES:,} values (YAML aliases?)"
        raise FrontmatterError(Problem("yaml", message, True))
    if isinstance(node, yaml.MappingNode):
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(_python_value(key_node, duplicates, depth + 1, left))
            if key in mapping:
                duplicates.append(key)
            mapping[key] = _python_value(value_node, duplicates, depth + 1, left)
        return mapping
    if isinstance(node, yaml.SequenceNode):
        return [_python_value(item, duplicates, depth + 1, left) for item in node.value]
    return node.value


def validate(data: dict[str, Any], folder_name: str) -> list[Problem]:
    """Every rule of the specification that `data` breaks, in the order of the fields."""
    problems: list[Problem] = []
    unknown = [key for key in data if key not in KNOWN_FIELDS]
    if unknown:
        problems.append(
            Problem(
                "unknown-field",
                f"unknown frontmatter fields: {', '.join(sorted(unknown))} "
                f"(allowed: {', '.join(KNOWN_FIELDS)})",
            )
        )
    problems += _name_problems(data.get("name"), folder_name)
    problems += _description_problems(data.get("description"))
    problems += _optional_problems(data)
    return problems


def _name_problems(name: Any, folder_name: str) -> list[Problem]:
    if name is None:
        return [Problem("name-missing", "the frontmatter has no 'name'", True)]
    if not isinstance(name, str) or not name.strip():
        return [Problem("name-missing", "'name' must be a non-empty string", True)]
    problems = []
    if len(name) > MAX_NAME:
        problems.append(
            Problem("name-length", f"name is {len(name)} characters; at most {MAX_NAME} allowed")
        )
    if not NAME_PATTERN.match(name):
        problems.append(Problem("name-format", _name_format_message(name), True))
    if name != folder_name:
        problems.append(
            Problem("name-folder", f"name {name!r} does not match its folder {folder_name!r}")
        )
    return problems


def _name_format_message(name: str) -> str:
    if name != name.lower():
        reason = "must be lowercase"
    elif name.startswith("-") or name.endswith("-"):
        reason = "must not start or end with a hyphen"
    elif "--" in name:
        reason = "must not contain consecutive hyphens"
    else:
        reason = "may only contain lowercase letters a-z, digits 0-9 and hyphens"
    return f"name {name!r} {reason}"


def _description_problems(description: Any) -> list[Problem]:
    if description is None:
        return [Problem("description-missing", "the frontmatter has no 'description'", True)]
    if not isinstance(description, str) or not description.strip():
        return [Problem("description-missing", "'description' must be a non-empty string", True)]
    if len(description) > MAX_DESCRIPTION:
        return [
            Problem(
                "description-length",
                f"description is {len(description)} characters; at most {MAX_DESCRIPTION} allowed",
            )
        ]
    return []


def _optional_problems(data: dict[str, Any]) -> list[Problem]:
    problems = []
    for key in ("license", "allowed-tools"):
        if key in data and not isinstance(data[key], str):
            problems.append(Problem(f"{key}-type", f"'{key}' must be a string"))
    if "compatibility" in data:
        value = data["compatibility"]
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_COMPATIBILITY:
            problems.append(
                Problem(
                    "compatibility",
                    f"'compatibility' must be a string of 1-{MAX_COMPATIBILITY} characters",
                )
            )
    if "metadata" in data:
        problems += _metadata_problems(data["metadata"])
    return problems


def _metadata_problems(metadata: Any) -> list[Problem]:
    if not isinstance(metadata, dict):
        return [Problem("metadata-type", "'metadata' must be a mapping of strings to strings")]
    bad = [str(key) for key, value in metadata.items() if not isinstance(value, str)]
    if bad:
        return [
            Problem(
                "metadata-type",
                f"'metadata' values must be strings; not so for: {', '.join(bad)}",
            )
        ]
    return []


def fatal(problems: Iterable[Problem]) -> Problem | None:
    """The first problem that leaves a skill out, if any."""
    return next((p for p in problems if p.fatal), None)


def to_info(data: dict[str, Any], skill_file: Path) -> SkillInfo:
    """A SkillInfo from frontmatter that has no fatal problem, fixing what can be fixed."""
    metadata = _string_map(data.get("metadata"))
    allowed = data.get("allowed-tools")
    if isinstance(allowed, list):
        allowed = " ".join(str(item) for item in allowed)
    raw_metadata = data.get("metadata")
    keywords = raw_metadata.get("keywords") if isinstance(raw_metadata, dict) else None
    return SkillInfo(
        name=data["name"].strip(),
        description=data["description"].strip(),
        folder=skill_file.parent,
        skill_file=skill_file,
        license=_string_or_none(data.get("license")),
        compatibility=_string_or_none(data.get("compatibility")),
        allowed_tools=_string_or_none(allowed),
        metadata=metadata,
        keywords=parse_keywords(keywords),
    )


def _string_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {
        str(key): ", ".join(map(str, item)) if isinstance(item, list) else str(item)
        for key, item in value.items()
    }


def _string_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
