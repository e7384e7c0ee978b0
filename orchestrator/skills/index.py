"""Level 0: the skill index, the one section of the system prompt that lists skills.

One line per skill (name and description). The section never exceeds its token cap: past it,
the index lists the skills that fit, in search-path order, says how many more exist, and
points to `search_skills`. So the prompt stops growing once the catalog outgrows the cap.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tokens import TokenCounter, default_counter
from .skill import SkillInfo

DEFAULT_INDEX_TOKENS = 2000
MIN_LINE_TOKENS = 6

HEADER = (
    "# Skills\n"
    "Skills are packaged instructions, files and tools for particular kinds of work. Before "
    "you start work that a skill below covers, call load_skill(name): its instructions come "
    "back and its tools become available from your next step. read_skill_file(skill, path) "
    "reads a file in a skill's folder that its instructions mention.\n"
)
MORE = (
    "\n({count} more skills are not listed here. Call search_skills(query) to find skills "
    "by what they do.)"
)


def render_index(
    skills: Sequence[SkillInfo],
    *,
    max_tokens: int = DEFAULT_INDEX_TOKENS,
    counter: TokenCounter | None = None,
) -> str | None:
    """The index section, or None when there are no skills."""
    if not skills:
        return None
    counter = counter or default_counter()
    footer_cost = counter.count_text(MORE.format(count=len(skills)))
    room = max_tokens - counter.count_text(HEADER) - footer_cost
    lines: list[str] = []
    for info in skills:
        if room < MIN_LINE_TOKENS:
            break
        line = info.summary()
        cost = counter.count_text(line) + 1
        if cost <= room:
            lines.append(line)
            room -= cost
    text = _compose(lines, len(skills))
    # Tokens of joined text can differ by a few from the sum of the parts: trim to be sure.
    while lines and counter.count_text(text) > max_tokens:
        lines.pop()
        text = _compose(lines, len(skills))
    return text


def _compose(lines: list[str], total: int) -> str:
    text = HEADER + "\n".join(lines)
    if len(lines) < total:
        text += MORE.format(count=total - len(lines))
    return text
