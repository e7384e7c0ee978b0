"""The Agent Skills specification's rules for a frontmatter, as the reference validator reads them.

`validate(data, folder_name)` returns every rule `data` breaks, in the order of the fields.
Names follow the reference validator (agentskills `skills-ref`): normalised to NFKC and
stripped, then lowercase Unicode letters and digits and single inner hyphens (`技能` and
`мой-навык` are names; `НАВЫК` is not), at most 64 characters, the same as the folder's name
(compared after NFKC too). None of these problems is fatal: a lenient load makes up for them
(`lenient.py`); a strict check reports them all.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .frontmatter import Problem

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


def unknown_fields(data: dict[str, Any]) -> list[str]:
    """Fields that neither the specification nor a client we follow defines."""
    return [key for key in data if key not in KNOWN_FIELDS and key not in CLIENT_FIELDS]


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
