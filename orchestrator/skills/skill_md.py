"""SKILL.md, the open Agent Skills format: a YAML frontmatter, the specification's rules for
it, its body, and the lenient reading that loads folders written for other clients.

Reading the file. A scan reads only the frontmatter (`find_frontmatter`, `read_frontmatter`);
`split_skill_text` splits a whole file. Every broken rule is a `Problem`. `fatal` problems
leave a skill out of a lenient load (a SKILL.md that is not UTF-8, a frontmatter that is never
closed, a file larger than `MAX_SKILL_FILE_BYTES`, refused by its size unread); the rest are
warnings, and the lenient reading makes up for what is missing.
`orchestrator skills check` (`check.py`) treats every problem as an error. YAML scalars are
all read as strings, as the reference validator does: `version: 1.0` is "1.0", `name: yes` is
"yes", and a date stays the text it was. Frontmatter that other clients accept but YAML does
not (an unquoted `: ` inside a value) is read again with those values quoted
(`parse_forgiving`).

The specification's rules, as the reference validator reads them. `validate(data,
folder_name)` returns every rule `data` breaks, in the order of the fields. Names follow the
reference validator (agentskills `skills-ref`): normalised to NFKC and stripped, then
lowercase Unicode letters and digits and single inner hyphens (`技能` and `мой-навык` are
names; `НАВЫК` is not), at most 64 characters, the same as the folder's name (compared after
NFKC too). None of these problems is fatal: a lenient load makes up for them; a strict check
reports them all.

The body: its first paragraph (a description when the frontmatter gives none) and the
substitutions Claude Code makes when a skill is loaded.

- `$ARGUMENTS` is the text given to `load_skill(name, arguments=...)`; `$ARGUMENTS[N]` is its
  N-th word (shell-style, from 0). When the body has no `$ARGUMENTS` and arguments were given,
  they are appended as a last line `ARGUMENTS: ...`, as Claude Code does.
- `${CLAUDE_SKILL_DIR}` and `${SKILL_DIR}` are the skill's folder (an absolute path).

Lenient reading (`read_skill_folder`): a skill folder written for another client loads with a
name and a description whenever one can be found, as forgiving as the clients users know.

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
import os
import re
import shlex
import unicodedata
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from ..security.inputs import YamlInputError, YamlTooLarge, compose_yaml
from ..security.inventory import SKILL_FILES, reads
from .skill import SkillError, SkillInfo, parse_keywords, parse_needs

SKILL_FILE = SKILL_FILES[0]
MAX_FRONTMATTER_CHARS = 65_536
MAX_SKILL_FILE_BYTES = 1_048_576
"""The largest SKILL.md read; a larger one is left out (and refused by `skills check` and
`load_skill`) with its size, without being read."""
FILE_TOO_LARGE = "file-too-large"
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


@reads("skill")
def read_frontmatter(path: Path) -> tuple[str | None, list[Problem]]:
    """The frontmatter text of a SKILL.md (None if it has none), reading little more."""
    try:
        with path.open("rb") as file:
            _refuse_large(file, path.name)
            data = _read_head(file)
    except OSError as exc:
        raise FrontmatterError(
            Problem("unreadable", f"cannot read SKILL.md: {exc.strerror}", True)
        ) from None
    return _decode_head(data)


@reads("skill")
def find_frontmatter(folder: Path) -> tuple[Path, str | None, list[Problem]] | None:
    """A folder's skill file and its frontmatter (None if it has none); None when the folder
    has no skill file.

    Made for scanning many folders: it opens the file rather than checking it exists first.
    """
    for name in (SKILL_FILE, "skill.md"):
        path = folder / name
        try:
            with path.open("rb") as file:
                _refuse_large(file, name)
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
    keys are noticed. Errors give lines of SKILL.md (the frontmatter starts on its line 2).
    """
    try:
        # The empty line stands for the opening '---': the reader counts lines of the file.
        node = compose_yaml("\n" + text, SKILL_FILE)
    except YamlTooLarge as exc:
        raise FrontmatterError(Problem(TOO_LARGE, f"frontmatter {exc.detail}", True)) from None
    except YamlInputError as exc:
        reason = exc.detail.removeprefix(exc.where).removeprefix("invalid YAML: ")
        where = f", {exc.where.removesuffix(': ')}" if exc.where else ""
        message = f"invalid YAML in {SKILL_FILE}{where}: {reason}"
        raise FrontmatterError(Problem("yaml", message)) from None
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
    """The values of the known `keys` (and of `allowed-tools-mode` however it is spelt), each
    from its line to the next known key's: a string (surrounding quotes removed), or a list
    when it is only `- item` lines."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _TOP_KEY.match(line)
        if match and (match.group("key") in keys or is_mode_field(match.group("key"))):
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


@reads("skill")
def read_skill_text(path: Path) -> str:
    """A whole SKILL.md as text. One larger than `MAX_SKILL_FILE_BYTES` is refused unread
    (FrontmatterError, fatal, naming its size); UnicodeDecodeError when it is not UTF-8."""
    with path.open("rb") as file:
        _refuse_large(file, path.name)
        data = file.read(MAX_SKILL_FILE_BYTES + 1)
    if len(data) > MAX_SKILL_FILE_BYTES:  # a file whose size the system does not know
        raise FrontmatterError(_too_large(path.name, f"more than {MAX_SKILL_FILE_BYTES:,}"))
    return data.decode("utf-8")


def _refuse_large(file: BinaryIO, name: str) -> None:
    """FrontmatterError when the open file is larger than a skill file may be."""
    size = os.fstat(file.fileno()).st_size
    if size > MAX_SKILL_FILE_BYTES:
        raise FrontmatterError(_too_large(name, f"{size:,}"))


def _too_large(name: str, size: str) -> Problem:
    return Problem(
        FILE_TOO_LARGE,
        f"{name} is {size} bytes; a skill file may have at most {MAX_SKILL_FILE_BYTES:,} "
        "(its instructions go whole into the conversation), so it is not read",
        True,
    )


# The specification's rules.

KNOWN_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
CLIENT_FIELDS = (
    # Claude Code's own frontmatter fields: understood (or knowingly ignored) when loading.
    "when_to_use",
    "disable-model-invocation",
    "user-invocable",
    "argument-hint",
    "context",
    "agent",
    "model",
    "effort",
    "hooks",
    "paths",
    "shell",
    "version",
)
OWN_FIELDS = ("allowed-tools-mode",)
"""Fields of this project's own, understood at the top level (or in `metadata`)."""
MODE_FIELD = "allowed-tools-mode"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
_SEPARATORS = re.compile(r"(?:[^\w]|_)+")


def normal_name(name: str) -> str:
    """A name as it is compared: NFKC-normalised, surrounding spaces stripped."""
    return unicodedata.normalize("NFKC", name.strip())


def name_format_error(name: str) -> str | None:
    """Why a (normalised) name breaks the naming rules, or None if it does not."""
    if not name:
        return "must not be empty"
    if name != name.lower():
        return "must be lowercase"
    if name.startswith("-") or name.endswith("-"):
        return "must not start or end with a hyphen"
    if "--" in name:
        return "must not contain consecutive hyphens"
    if not all(c.isalnum() or c == "-" for c in name):
        return "contains invalid characters: only letters, digits and hyphens are allowed"
    return None


def slug(text: str) -> str:
    """`text` made to fit the naming rules: lowercase, runs of other characters as one
    hyphen, no hyphen at either end, at most 64 characters; "" when nothing is left."""
    words = _SEPARATORS.sub("-", normal_name(text).lower()).strip("-")
    return words[:MAX_NAME].rstrip("-")


def validate(
    data: dict[str, Any], folder_name: str, *, fields: Collection[str] = KNOWN_FIELDS
) -> list[Problem]:
    """Every rule of the specification that `data` breaks, in the order of the fields
    (`fields`: those not reported as unknown; the specification's by default)."""
    problems: list[Problem] = []
    unknown = [key for key in data if key not in fields]
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


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """Fields that neither the specification nor a client we follow defines."""
    known = (*KNOWN_FIELDS, *CLIENT_FIELDS, *OWN_FIELDS)
    return [key for key in data if key not in known and not is_mode_field(key)]


def _name_problems(name: Any, folder_name: str) -> list[Problem]:
    if name is None:
        return [Problem("name-missing", "the frontmatter has no 'name'")]
    if not isinstance(name, str) or not name.strip():
        return [Problem("name-missing", "'name' must be a non-empty string")]
    name = normal_name(name)
    problems = []
    if len(name) > MAX_NAME:
        problems.append(
            Problem("name-length", f"name is {len(name)} characters; at most {MAX_NAME} allowed")
        )
    reason = name_format_error(name)
    if reason is not None:
        problems.append(Problem("name-format", f"name {name!r} {reason}"))
    if name != normal_name(folder_name):
        problems.append(
            Problem("name-folder", f"name {name!r} does not match its folder {folder_name!r}")
        )
    return problems


def _description_problems(description: Any) -> list[Problem]:
    if description is None:
        return [Problem("description-missing", "the frontmatter has no 'description'")]
    if not isinstance(description, str) or not description.strip():
        return [Problem("description-missing", "'description' must be a non-empty string")]
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


# The body.

MAX_PARAGRAPH = 1024
_ARGUMENT = re.compile(r"\$ARGUMENTS(?:\[(\d+)\])?")
_SKILL_DIR = re.compile(r"\$\{(?:CLAUDE_)?SKILL_DIR\}")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
_SKIPPED = ("```", "~~~", "<!--", "|", "---", "***", "===")


def first_paragraph(body: str) -> str | None:
    """The body's first paragraph of prose (headings, code, tables and comments skipped), its
    lines joined; the first heading when there is no prose; None when there is neither."""
    heading: str | None = None
    lines: list[str] = []
    fenced = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or (not line and not lines):
            continue
        if not line:
            break
        found = _HEADING.match(line)
        if found:
            if lines:
                break
            heading = heading or found.group(1) or None
            continue
        if line.startswith(_SKIPPED) and not lines:
            continue
        lines.append(line)
    text = " ".join(lines) or heading
    return text[:MAX_PARAGRAPH].rstrip() if text else None


def substitute(body: str, folder: Path, arguments: str = "") -> str:
    """The body with `$ARGUMENTS` and the skill-folder variables filled in."""
    text = _SKILL_DIR.sub(lambda _: str(folder), body)
    if not _ARGUMENT.search(text):
        return f"{text}\n\nARGUMENTS: {arguments}" if arguments.strip() else text
    words = _split(arguments)

    def fill(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return arguments
        index = int(match.group(1))
        return words[index] if index < len(words) else ""

    return _ARGUMENT.sub(fill, text)


def _split(arguments: str) -> list[str]:
    try:
        return shlex.split(arguments)
    except ValueError:  # an unclosed quote: plain words
        return arguments.split()


def read_body(info: SkillInfo) -> str:
    """The SKILL.md body (all of the file when it has no frontmatter), stripped; for a job's
    MCP server (no SKILL.md), a line saying what the skill is."""
    if info.servers:
        names = ", ".join(sorted(info.servers))
        return f"The tools of the MCP server {names}, declared in the job spec."
    try:
        return split_skill_text(read_skill_text(info.skill_file))[1]
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{info.folder}: cannot read SKILL.md: {exc}") from None
    except FrontmatterError as exc:
        raise SkillError(f"{info.folder}: {exc}") from None


# Lenient reading.

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
            data, more = parse_forgiving(text, (*KNOWN_FIELDS, *CLIENT_FIELDS, *OWN_FIELDS))
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
        problems += mode_notes(data)
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


def _body(skill_file: Path) -> str:
    try:
        return split_skill_text(read_skill_text(skill_file))[1]
    except (OSError, UnicodeDecodeError, FrontmatterError):
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
    metadata = metadata_strings(raw_metadata)
    return SkillInfo(
        name=name or normal_name(data["name"]),
        description=description or data["description"].strip(),
        folder=skill_file.parent,
        skill_file=skill_file,
        license=_text(data.get("license")),
        compatibility=_text(data.get("compatibility")),
        allowed_tools=_tool_list(data.get("allowed-tools")),
        allowed_tools_mode="restrict"
        if any(_restricts(v) for _, v in _modes(data))
        else "pre-approve",
        metadata=metadata,
        needs=parse_needs(metadata, skill_file.parent),
        keywords=parse_keywords(keywords),
        when_to_use=_text(data.get("when_to_use")),
        model_invocable=not _flag(data.get("disable-model-invocation")),
        context=context.lower() if context else None,
        agent=_text(data.get("agent")),
    )


def is_mode_field(key: object) -> bool:
    """Whether a key is `allowed-tools-mode` however it is spelt (`allowed_tools_mode`,
    `allowedToolsMode`): a restriction must not be lost to its spelling."""
    return isinstance(key, str) and re.sub(r"[-_\s]", "", key).lower() == "allowedtoolsmode"


def _modes(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each `allowed-tools-mode` the frontmatter writes, at its top level or in `metadata`:
    (where, the value as written)."""
    metadata = data.get("metadata")
    found = [(str(key), value) for key, value in data.items() if is_mode_field(key)]
    if isinstance(metadata, dict):
        found += [(f"metadata.{k}", v) for k, v in metadata.items() if is_mode_field(k)]
    return found


def _restricts(value: Any) -> bool:
    """Anything but `pre-approve` restricts: a mistyped restriction never pre-approves."""
    return not (isinstance(value, str) and value.strip().lower() == "pre-approve")


def mode_notes(data: dict[str, Any]) -> list[Problem]:
    """A note for each `allowed-tools-mode` not written as `pre-approve` or `restrict` under
    its own name: what the load made of it."""
    notes = []
    for where, value in _modes(data):
        if where.rpartition(".")[2] == MODE_FIELD and value in ("pre-approve", "restrict"):
            continue
        meaning = "restrict" if _restricts(value) else "pre-approve"
        notes.append(
            Problem(
                MODE_FIELD,
                f"{where}: {value!r} read as {MODE_FIELD}: {meaning} (it takes pre-approve or "
                "restrict; anything else restricts)",
            )
        )
    return notes


def _tool_list(value: Any) -> str | None:
    if isinstance(value, list):
        value = " ".join(str(item) for item in value if isinstance(item, str))
    return _text(value)


def metadata_strings(value: Any) -> dict[str, str]:
    """`metadata` as `SkillInfo` keeps it: strings as written, nested values as JSON."""
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
