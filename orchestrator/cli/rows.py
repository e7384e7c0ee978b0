"""What the live view shows of each agent: its `AgentState`, read into one `Row` of `Cell`s.

`row_of(agent, now)` reads an agent's state (kept up to date by progress.py) into a row: its
name and the sub-agent definition it runs, status, steps, tokens, time, the tool it is in, and
a hint when its model has said nothing for `silence_after` seconds. The views only lay cells
out, so a new figure (cache tokens, cost) is a field and a cell here, not a format string per
view.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

SILENCE_AFTER = 10.0
"""Seconds without a word from an agent's model before the live view says it is waiting."""
SILENCE_VARIABLE = "ORCHESTRATOR_SILENCE_SECONDS"

STYLES = {
    "waiting": "dim",
    "running": "yellow",
    "completed": "green",
    "skipped": "dim",
    "max_steps": "magenta",
    "budget_exhausted": "magenta",
    "loop_detected": "magenta",
    "context_full": "magenta",
    "output_invalid": "red",
    "input_required": "cyan",
    "cancelled": "red",
    "error": "red",
}


@dataclass
class AgentState:
    """What the view knows of one agent."""

    path: str
    definition: str | None = None
    """The sub-agent definition the agent runs (`researcher`, `planner`)."""
    status: str = "waiting"
    steps: int = 0
    tokens: int = 0
    cached: int = 0
    """Input tokens the provider's prompt cache served."""
    cost: float | None = None
    """US dollars, when the agent's model has a price."""
    tool: str | None = None
    note: str | None = None
    compactions: int = 0
    """How many times the agent's conversation was compacted to fit its model's window."""
    started: float | None = None
    ended: float | None = None
    last: float | None = None
    """When an event of this agent was last seen (a model's answer, a tool's end...)."""
    background: bool = False
    """A task of a background fork: it runs beside the agent that started it."""
    overlap: float | None = None
    """Once it ended: seconds it ran while that agent did its own work."""


@dataclass(frozen=True)
class Cell:
    """One piece of a row: its text and its rich style."""

    text: str
    style: str = ""


@dataclass(frozen=True)
class Row:
    """One agent of the run, as a line of the view."""

    name: str
    definition: str | None
    status: str
    steps: int
    tokens: int
    seconds: float | None
    cached: int = 0
    cost: float | None = None
    tool: str | None = None
    silent: float | None = None
    """Seconds the agent's model has been silent, once past the threshold."""
    note: str | None = None
    background: bool = False
    overlap: float | None = None

    @property
    def started(self) -> bool:
        return self.status not in ("waiting", "skipped")

    def cells(self) -> list[Cell]:
        """The row's cells, in the order they are shown; empty ones left out."""
        cells = [Cell(self.name, "bold")]
        if self.definition:
            cells.append(Cell(f"({self.definition})", "dim"))
        cells.append(Cell(self.status, STYLES.get(self.status, "")))
        if self.background:
            overlap = f", overlapped {self.overlap:.1f}s" if self.overlap else ""
            cells.append(Cell(f"background{overlap}", "blue"))
        if self.started:
            cells.append(Cell(f"steps {self.steps}", "dim"))
            cells.append(Cell(f"tokens {self.tokens:,}", "dim"))
            if self.cached:
                cells.append(Cell(f"cached {self.cached:,}", "dim"))
            if self.cost is not None:
                cells.append(Cell(f"${self.cost:.4f}", "dim"))
        if self.seconds is not None:
            cells.append(Cell(f"{self.seconds:.1f}s", "dim"))
        if self.tool:
            cells.append(Cell(f"▸ {self.tool}", "cyan"))
        if self.silent is not None:
            cells.append(Cell(f"waiting on the model for {self.silent:.0f}s", "yellow"))
        if self.note:
            cells.append(Cell(self.note, "dim"))
        return cells


def row_of(agent: AgentState, now: float, silence_after: float = SILENCE_AFTER) -> Row:
    """`agent`'s row at time `now`."""
    seconds = None
    if agent.started is not None:
        seconds = max(0.0, (agent.ended or now) - agent.started)
    quiet = now - agent.last if agent.last is not None else 0.0
    waiting = agent.status == "running" and agent.tool is None and quiet >= silence_after
    return Row(
        name=agent.path.rsplit("/", 1)[-1],
        definition=agent.definition,
        status=agent.status,
        steps=agent.steps,
        tokens=agent.tokens,
        seconds=seconds,
        cached=agent.cached,
        cost=agent.cost,
        tool=agent.tool,
        silent=quiet if waiting else None,
        note=agent.note,
        background=agent.background,
        overlap=agent.overlap,
    )


def silence_after() -> float:
    """The threshold for the "waiting on the model" hint: `ORCHESTRATOR_SILENCE_SECONDS`,
    else `SILENCE_AFTER`."""
    try:
        value = float(os.environ.get(SILENCE_VARIABLE, SILENCE_AFTER))
    except ValueError:
        return SILENCE_AFTER
    return value if value > 0 else SILENCE_AFTER
