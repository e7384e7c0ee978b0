"""A SKILL.md body: its first paragraph (a description when the frontmatter gives none) and the
substitutions Claude Code makes when a skill is loaded.

- `$ARGUMENTS` is the text given to `load_skill(name, arguments=...)`; `$ARGUMENTS[N]` is its
  N-th word (shell-style, from 0). When the body has no `$ARGUMENTS` and arguments were given,
  they are appended as a last line `ARGUMENTS: ...`, as Claude Code does.
- `${CLAUDE_SKILL_DIR}` and `${SKILL_DIR}` are the skill's folder (an absolute path).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

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
