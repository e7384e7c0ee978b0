"""The one rule by which the levels of a run choose an agent's settings.

An agent of a run is set by several levels, most specific first: the call (a job step's own
fields, or what the caller passes), the task a `fork` call gives, the sub-agent definition
that runs it, and the run (the orchestrator's settings, a job's defaults). Each says what it
chooses and leaves the rest as None. `merged` applies the rule, written here once:

- a choice **overrides**: the most specific level that makes one wins (the model, the
  answer's type, mode and retries, compaction, the `note` tool);
- a limit only **narrows**: the smallest any level gives holds (the step cap, the token cap).

Permissions narrow too, by another road: an agent's are its parent's, only ever restricted
(security/permissions.py); the token budget is one for the whole tree, each cap within it.
docs/architecture.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from ..agent import CompactionStrategy
from ..models import ChatModel, OutputMode

if TYPE_CHECKING:
    from ..agent import OutputSpec

Rule = Literal["override", "narrow"]


def _choice(rule: Rule) -> Any:
    return field(default=None, metadata={"rule": rule})


@dataclass(frozen=True)
class Choices:
    """What one level says of an agent's settings; None where it says nothing."""

    model: ChatModel | None = _choice("override")
    output: OutputSpec[Any] | None = _choice("override")
    """What its answer must be."""
    output_mode: OutputMode | None = _choice("override")
    output_retries: int | None = _choice("override")
    compaction: CompactionStrategy | None = _choice("override")
    note: bool | None = _choice("override")
    max_steps: int | None = _choice("narrow")
    max_tokens: int | None = _choice("narrow")


RULES: dict[str, Rule] = {f.name: f.metadata["rule"] for f in fields(Choices)}
"""Each setting and how its levels merge (the table in docs/architecture.md)."""


def merged(*levels: Choices) -> Choices:
    """`levels`, most specific first, merged by the one rule: for a choice the first level
    that makes one; for a limit the smallest given."""
    chosen: dict[str, Any] = {}
    for name, rule in RULES.items():
        given = [value for level in levels if (value := getattr(level, name)) is not None]
        if given:
            chosen[name] = min(given) if rule == "narrow" else given[0]
    return Choices(**chosen)
