"""SKILL.md: split off the YAML frontmatter and parse it.

Every broken rule is a `Problem`. `fatal` problems leave a skill out of a lenient load (a
SKILL.md that is not UTF-8, a frontmatter that is never closed); the rest are warnings, and
the lenient reader (`lenient.py`) makes up for what is missing. `orchestrator skills check`
treats every problem as an error. The specification's rules themselves are in `rules.py`.

YAML scalars are all read as strings, as the reference validator does: `version: 1.0` is
"1.0", `name: yes` is "yes", and a date stays the text it was. Frontmatter that other clients
accept but YAML does not (an unquoted `: ` inside a value) is read again with those values
quoted (`parse_forgiving`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from ..security.inventory import SKILL_FILES
from ..security.yaml_input import YamlInputError, YamlTooLarge, compose_yaml

SKILL_FILE = SKILL_FILES[0]
MAX_FRONTMATTER_CHARS = 65_536
DELIMITER = "---"
MAX_DEPTH = 20
MAX_VALUES = 10_000  # YAML aliases can make a few lines stand for billions of values
TOO_LARGE = "yaml-too-large"  # no lenient second reading: the file is hostile, not sloppy
_CLOSING = re.compile(rb"\n---[ \t]*\r?\n")
_CHUNK = 4096
_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<key>[A-Za-z0-9_.-]+):[ \t]+(?P<value>\S.*?)\s*$")
_NOT_PLAIN = tuple("\"'[{|>&*!%@`")
_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(?P<value>.*?))?\s*$")
_ITEM = re.compile(r"^[ \t]*-[ \t]+(?P<item>.*?)\s*$")


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


NO_FRONTMATTER = Problem("frontmatter", "SKILL.md must start with YAML frontmatter (a '---' line)")


def skill_file_in(folder: Path) -> Path | None:
    """The folder's SKILL.md (or `skill.md`, which the reference validator also accepts)."""
    for name in SKILL_FILES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def read_frontmatter(path: Path) -> tuple[str | None, list[Problem]]:
    """The frontmatter text of a SKILL.md (None if it has none), reading little more."""
    try:
        with path.open("rb") as file:
            data = _read_head(file)
    except OSError as exc:
        raise FrontmatterError(
            Problem("unreadable", f"cannot read SKILL.md: {exc.strerror}", True)
        ) from None
    return _decode_head(data)


def find_frontmatter(folder: Path) -> tuple[Path, str | None, list[Problem]] | None:
    """A folder's skill file and its frontmatter (None if it has none); None when the folder
    has no skill file.

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
    if not data.lstrip(b"\xef\xbb\xbf").startswith(b"---"):
        return data  # no frontmatter: the first chunk is all a scan needs
    while not _CLOSING.search(data) and len(data) <= MAX_FRONTMATTER_CHARS:
        more = file.read(_CHUNK)
        if not more:
            break
        data += more
    return data


def _decode_head(data: bytes) -> tuple[str | None, list[Problem]]:
    found = _CLOSING.search(data)
    try:
        if found:
            text = data[: found.end()].decode("utf-8")
        else:
            # Cut off at the chunk or the size limit, the last character may be split.
            cut = len(data) >= _CHUNK
            text = data.decode("utf-8", errors="replace" if cut else "strict")
    except UnicodeDecodeError:
        raise FrontmatterError(Problem("encoding", "SKILL.md is not UTF-8 text", True)) from None
    return _frontmatter(iter(text.splitlines(keepends=True)))[:2]


def split_skill_text(text: str) -> tuple[str | None, str, list[Problem]]:
    """The frontmatter text (None if there is none), the body (stripped) and the problems
    of a whole SKILL.md."""
    lines = iter(text.splitlines(keepends=True))
    frontmatter, problems, first = _frontmatter(lines)
    return frontmatter, (first + "".join(lines)).strip(), problems


def _frontmatter(lines: Iterator[str]) -> tuple[str | None, list[Problem], str]:
    """The frontmatter, its problems, and the first line when it is the body's."""
    problems: list[Problem] = []
    first = next(lines, "")
    if first.startswith("\ufeff"):
        problems.append(Problem("bom", "SKILL.md starts with a byte-order mark"))
        first = first[1:]
    if first.rstrip() != DELIMITER:
        return None, [*problems, NO_FRONTMATTER], first
    collected: list[str] = []
    size = 0
    for line in lines:
        if line.rstrip() == DELIMITER:
            return "".join(collected), problems, ""
        collected.append(line)
        size += len(line)
        if size > MAX_FRONTMATTER_CHARS:
            break
    raise FrontmatterError(
        Problem("frontmatter", "SKILL.md frontmatter is not closed with a '---' line", True)
    )


def parse_yaml(text: str) -> tuple[dict[str, Any], list[Problem]]:
    """The frontmatter as a mapping; FrontmatterError if it is not YAML or not a mapping.

    The YAML is only composed (by the package's YAML reader, which refuses alias bombs) and
    the nodes are turned into Python values here: every scalar stays a string, and repeated
    keys are noticed.
    """
    try:
        node = compose_yaml(text, SKILL_FILE)
    except YamlTooLarge as exc:
        raise FrontmatterError(Problem(TOO_LARGE, f"frontmatter {exc.detail}", True)) from None
    except YamlInputError as exc:
        reason = exc.detail.removeprefix("invalid YAML: ")
        raise FrontmatterError(Problem("yaml", f"invalid YAML in frontmatter: {reason}")) from None
    if node is None:
        return {}, []
    if not isinstance(node, yaml.MappingNode):
        raise FrontmatterError(Problem("yaml", "the frontmatter must be a YAML mapping"))
    duplicates: list[str] = []
    data = _python_value(node, duplicates, 0, [MAX_VALUES])
    problems = [
        Problem("yaml-duplicate-key", f"the frontmatter repeats the key {key!r}")
        for key in dict.fromkeys(duplicates)
    ]
    return data, problems


def parse_forgiving(text: str, keys: Collection[str] = ()) -> tuple[dict[str, Any], list[Problem]]:
    """`parse_yaml`, and when that fails, a second try with unquoted values that hold a
    `: ` quoted, as clients that accept such frontmatter read it; then, given the `keys` a
    client knows, a last try line by line (a key at the start of a line begins its value,
    every other line continues it: multi-line descriptions with `<example>` blocks).
    FrontmatterError if nothing works; the problem says what was wrong either way."""
    try:
        return parse_yaml(text)
    except FrontmatterError as exc:
        if exc.problem.rule == TOO_LARGE:
            raise
        quoted = quote_colon_values(text)
        try:
            if quoted == text:
                raise
            data, problems = parse_yaml(quoted)
        except FrontmatterError:
            data = parse_by_lines(text, keys)
            if not data:
                raise exc from None
            note = Problem("yaml", f"{exc.problem.message}; read line by line instead")
            return data, [note]
        note = Problem("yaml", f"{exc.problem.message}; read again with its values quoted")
        return data, [note, *problems]


def parse_by_lines(text: str, keys: Collection[str]) -> dict[str, Any]:
    """The values of the known `keys`, each from its line to the next known key's: a string
    (surrounding quotes removed), or a list when it is only `- item` lines."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _TOP_KEY.match(line)
        if match and match.group("key") in keys:
            current = found.setdefault(match.group("key"), [])
            current[:] = [match.group("value") or ""]
        elif current is not None:
            current.append(line)
    return {key: _line_value(lines) for key, lines in found.items()}


def _line_value(lines: list[str]) -> Any:
    first, rest = lines[0], [line for line in lines[1:] if line.strip()]
    items = [_ITEM.match(line) for line in rest]
    if not first and rest and all(items):
        return [m.group("item").strip("\"'") for m in items if m]
    value = "\n".join([first, *lines[1:]]).strip()
    if value.startswith("[") and value.endswith("]"):  # a flow list: [Read, "Grep"]
        return [item.strip().strip("\"'") for item in value[1:-1].split(",") if item.strip()]
    if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value


def quote_colon_values(text: str) -> str:
    """The frontmatter with each plain `key: value` whose value holds `: ` (or ends in `:`)
    double-quoted, its more-indented continuation lines folded in."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        match = _KEY_LINE.match(lines[index])
        index += 1
        value = match.group("value") if match else ""
        if not match or value.startswith(_NOT_PLAIN) or not _has_colon(value):
            out.append(lines[index - 1])
            continue
        indent = len(match.group("indent").expandtabs())
        parts = [value]
        while index < len(lines) and _continues(lines[index], indent):
            parts.append(lines[index].strip())
            index += 1
        joined = " ".join(p for p in parts if p)
        out.append(f"{match.group('indent')}{match.group('key')}: {json.dumps(joined)}")
    return "\n".join(out) + "\n"


def _has_colon(value: str) -> bool:
    return ": " in value or value.endswith(":")


def _continues(line: str, indent: int) -> bool:
    if not line.strip():
        return False
    return len(line) - len(line.lstrip(" \t")) > indent and not _KEY_LINE.match(line)


def _python_value(node: yaml.Node, duplicates: list[str], depth: int, left: list[int]) -> Any:
    """The node as Python values; `left` counts down the values still allowed."""
    if depth > MAX_DEPTH:
        raise FrontmatterError(Problem(TOO_LARGE, "the frontmatter is nested too deeply", True))
    left[0] -= 1
    if left[0] < 0:
        message = f"the frontmatter holds more than {MAX_VALUES:,} values (YAML aliases?)"
        raise FrontmatterError(Problem(TOO_LARGE, message, True))
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


def fatal(problems: Iterable[Problem]) -> Problem | None:
    """The first problem that leaves a skill out, if any."""
    return next((p for p in problems if p.fatal), None)


def read_skill_text(path: Path, limit: int = 1_048_576) -> str:
    """A whole SKILL.md (up to `limit` bytes), for the fallbacks that need its body."""
    with path.open("rb") as file:
        data = file.read(limit)
    return data.decode("utf-8", errors="replace")
