"""Repeat detection: an agent that makes the same calls turn after turn is stopped.

A turn repeats the one before when it makes the same calls with the same arguments, in the same
order. At `REPEAT_WARN_AT` repeats in a row the agent gets a note; one more ends its run as
`loop_detected`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import ToolCall

REPEAT_WARN_AT = 3
REPEAT_NOTE = (
    "[orchestrator] You have called {name} with the same arguments {count} times in a row and "
    "got the same kind of answer. Do something different, or give your final answer. Calling "
    "it again the same way ends the run."
)


@dataclass
class RepeatDetector:
    """Counts turns in a row that repeat the previous turn's calls exactly."""

    last_turn: tuple[tuple[str, object], ...] | None = None
    count: int = 0

    def too_often(self, calls: Sequence[ToolCall]) -> bool:
        """Record a turn; True once the repeats go past the warning."""
        turn = tuple((call.name, _arguments_value(call.arguments)) for call in calls)
        self.count = self.count + 1 if turn == self.last_turn else 1
        self.last_turn = turn
        return self.count > REPEAT_WARN_AT

    def note(self) -> str:
        """The warning the agent reads at `REPEAT_WARN_AT` repeats."""
        name = ", ".join(name for name, _ in self.last_turn or ())
        return REPEAT_NOTE.format(name=name, count=self.count)


def _arguments_value(arguments: str) -> object:
    """Arguments as a comparable value: parsed JSON, or the raw text if it is not JSON."""
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
