"""Live progress of a run, fed by trace events.

`ProgressState` folds events into a picture of the run (each agent's status, the sub-agent
definition it runs, steps, tokens, times, running tool, when it was last heard of).
`LiveView` draws it with rich on a terminal, redrawn several times a second so times move
and a model that has been silent for long says so: a tree of steps and sub-agents, one row
per agent (rows.py), and a budget bar. `PlainProgress` writes one line per notable event,
for pipes and CI.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..events import (
    Compact,
    Fork,
    ModelCall,
    PartEvent,
    RunEnd,
    RunStart,
    TaskEnd,
    ToolEnd,
    ToolStart,
    TraceEvent,
)
from ..messages import inert
from .output import drawing_stream, inert_proxies
from .rows import SILENCE_AFTER, AgentState, Row, row_of


@dataclass
class ProgressState:
    """Every agent seen so far, in the order they appeared, and the budget."""

    max_tokens: int | None = None
    agents: dict[str, AgentState] = field(default_factory=dict)
    budget_remaining: float | None = None

    def agent(self, path: str) -> AgentState:
        if path not in self.agents:
            self.agents[path] = AgentState(path)
        return self.agents[path]

    def update(self, event: TraceEvent) -> AgentState | None:  # noqa: C901 - one case per kind
        """Fold one event in; returns the agent it changed, if any."""
        changed: AgentState | None = None
        match event:
            case Fork():
                self._on_fork(event)
            case RunStart():
                changed = self._on_run_start(event)
            case ModelCall():
                changed = self._on_model_call(event)
            case Compact():
                changed = self.agent(event.agent)
                changed.compactions += 1
                changed.note = compaction_note(event)
            case ToolStart():
                changed = self.agent(event.agent)
                changed.tool = event.name
            case ToolEnd():
                changed = self.agent(event.agent)
                changed.tool = None
            case RunEnd():
                changed = self.agent(event.agent)
                changed.status, changed.ended, changed.tool = event.status, event.ts, None
                changed.note = event.error
            case PartEvent():
                changed = self._on_part(event)
            case TaskEnd():
                changed = self._on_task_end(event)
        heard = self.agents.get(event.agent)
        if heard is not None and event.ts is not None:
            heard.last = event.ts
        return changed

    def _on_fork(self, event: Fork) -> None:
        for task in event.tasks:
            state = self.agent(task.path)
            state.definition = task.agent
            state.background = state.background or bool(event.background)

    def _on_run_start(self, event: RunStart) -> AgentState:
        state = self.agent(event.agent)
        state.status, state.started = "running", event.ts
        if event.resumed:  # a run going on from an earlier attempt: what it had done
            state.steps = event.steps or 0
            state.tokens = event.usage.total_tokens if event.usage is not None else 0
            state.note = "resumed"
        if event.budget_remaining is not None and self.budget_remaining is None:
            self.budget_remaining = event.budget_remaining
        return state

    def _on_model_call(self, event: ModelCall) -> AgentState:
        state = self.agent(event.agent)
        state.steps = event.step
        state.tokens += event.usage.total_tokens
        state.cached += event.usage.cache_read_tokens
        if event.cost is not None:
            state.cost = (state.cost or 0.0) + event.cost
        if event.budget_remaining is not None:
            self.budget_remaining = event.budget_remaining
        return state

    def _on_part(self, event: PartEvent) -> AgentState | None:
        """An optional part's event (a remote agent's task, say, which has no run here): what
        its agent is doing, and the tokens it spent elsewhere."""
        if event.activity is None and event.usage is None:
            return None
        state = self.agent(event.agent)
        if event.usage is not None:
            state.tokens += event.usage.total_tokens
        if event.activity == "":
            state.tool = None
        elif event.activity is not None:
            if state.status == "waiting":
                state.status, state.started = "running", event.ts
            state.tool = event.activity
            # One line: a remote's text (a question, say) cannot pass for lines of our own.
            state.note = " ".join((event.note or "").split()) or state.note
        return state

    def _on_task_end(self, event: TaskEnd) -> AgentState | None:
        state = self.agent(event.agent)
        if event.restored:  # ended in an earlier attempt of a resumed run
            state.status, state.ended = event.status, event.ts
            state.steps = event.steps or 0
            state.tokens = event.usage.total_tokens if event.usage is not None else 0
            state.note = "kept from an earlier attempt"
            return state
        state.overlap = float(event.overlap_s) if event.overlap_s is not None else None
        if event.status != "skipped" and state.status not in ("waiting", "running"):
            return state if state.overlap is not None else None
        state.status, state.ended, state.tool = event.status, event.ts, None
        state.note = event.reason
        return state

    @property
    def used(self) -> int:
        return sum(a.tokens for a in self.agents.values())


def compaction_note(event: Compact) -> str:
    """A `compact` event in words: `compacted 12 tool results, 13,100 -> 6,200 tokens of a
    16,384-token window`."""
    count = len(event.replaced or [])
    window = event.window
    of = f" of a {window:,}-token window" if window is not None else ""
    before, after = event.tokens_before, event.tokens_after
    sizes = f", {before:,} -> {after:,} tokens" if before is not None and after is not None else ""
    return f"compacted {count} tool result{'s' if count != 1 else ''}{sizes}{of}"


class PlainProgress:
    """One line per agent start and end, and per skipped task, on a stream (stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.state = ProgressState()
        self.began = time.time()

    def __call__(self, event: TraceEvent) -> None:
        changed = self.state.update(event)
        shown = (RunStart, RunEnd, TaskEnd, PartEvent, Compact)
        if changed is None or not isinstance(event, shown):
            return
        ts = event.ts if event.ts is not None else time.time()
        if isinstance(event, Compact):
            line = f"[{ts - self.began:7.2f}s] {changed.path}: {compaction_note(event)}"
            print(line, file=self.stream, flush=True)
            return
        row = row_of(changed, ts)
        line = f"[{ts - self.began:7.2f}s] {changed.path}: {row.status}"
        if isinstance(event, TaskEnd) and row.overlap is not None:
            line += f" (background, overlapped its parent's work {row.overlap:.1f}s)"
            print(line, file=self.stream, flush=True)
            return
        if isinstance(event, PartEvent):
            if not event.activity:
                return
            line = f"[{ts - self.began:7.2f}s] {changed.path}: {changed.tool}"
        elif isinstance(event, RunStart):
            line += f" ({row.definition})" if row.definition else ""
        else:
            took = f", {row.seconds:.1f}s" if row.seconds is not None else ""
            line += f" (steps {row.steps}, tokens {row.tokens:,}{took})"
        if row.note:
            line += f": {row.note}"
        print(line, file=self.stream, flush=True)


class LiveView:
    """A rich live display of the run: a tree of agents and a budget bar.

    It is drawn anew several times a second (from rich's refresh thread), so each agent's
    time runs on and the "waiting on the model" hint appears after `silence_after` seconds
    without a word from an agent's model; a lock keeps a redraw from reading the state while
    an event changes it.
    """

    def __init__(
        self,
        title: str,
        max_tokens: int | None,
        console: Console | None = None,
        *,
        silence_after: float = SILENCE_AFTER,
    ) -> None:
        self.title = title
        self.state = ProgressState(max_tokens=max_tokens)
        self.console = console or Console(file=drawing_stream())
        self.silence_after = silence_after
        self.lock = threading.Lock()
        self.live = self._new_live()

    def __call__(self, event: TraceEvent) -> None:
        with self.lock:
            changed = self.state.update(event)
        if changed is not None:
            self.live.refresh()

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        inert_proxies()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.refresh()
        self.live.__exit__(*exc)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The display stopped for the block (a prompt on the terminal), then drawn again."""
        running = self.live.is_started
        if running:
            self.live.stop()
        try:
            yield
        finally:
            if running:  # a new display below the prompt, which stays on the screen
                self.live = self._new_live()
                self.live.start()
                inert_proxies()

    def _new_live(self) -> Live:
        return Live(
            console=self.console,
            refresh_per_second=4,
            transient=False,
            get_renderable=self.render,
        )

    def rows(self, now: float | None = None) -> list[tuple[str, Row]]:
        """Each agent's path and row, in the order they appeared."""
        now = time.time() if now is None else now
        with self.lock:
            agents = list(self.state.agents.items())
            return [(path, row_of(agent, now, self.silence_after)) for path, agent in agents]

    def render(self) -> Group:
        return Group(self._tree(), self._budget())

    def _tree(self) -> Tree:
        root = Tree(Text(inert(self.title), style="bold"))
        nodes: dict[str, Tree] = {}
        for path, row in self.rows():
            parent_path = path.rsplit("/", 1)[0] if "/" in path else None
            parent = nodes.get(parent_path, root) if parent_path else root
            nodes[path] = parent.add(_label(row))
        return root

    def _budget(self) -> Table:
        table = Table.grid(padding=(0, 1))
        used = self.state.used
        total = self.state.max_tokens
        if total:
            table.add_row(
                Text("budget"),
                ProgressBar(total=total, completed=min(used, total), width=40),
                Text(f"{used:,} / {total:,} tokens"),
            )
        else:
            table.add_row(Text("tokens"), Text(f"{used:,} (no budget set)"))
        costs = [a.cost for a in self.state.agents.values() if a.cost is not None]
        if costs:
            table.add_row(Text("cost"), Text(f"${sum(costs):.4f}"))
        return table


def _label(row: Row) -> Text:
    """A row as one line of text: its cells, two spaces apart (one after the name)."""
    label = Text()
    for index, cell in enumerate(row.cells()):
        if index:
            label.append(" " if index == 1 else "  ")
        label.append(inert(cell.text), style=cell.style)
    return label
