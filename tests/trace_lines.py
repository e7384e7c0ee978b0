"""A trace's events as the lines of its file: dicts of JSON values, for tests that assert on
the format itself (the package reads typed events; see orchestrator/events.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.events import TraceEvent, parse_event
from orchestrator.trace import Listener, read_trace


def trace_lines(path: str | Path) -> list[dict[str, Any]]:
    """Every event of the trace at `path` that a reader keeps, as its line had it."""
    return [event.as_line() for event in read_trace(path)]


def into(lines: list[dict[str, Any]]) -> Listener:
    """A trace listener that appends each event it hears to `lines`, as its line has it."""
    return lambda event: lines.append(event.as_line())


def typed(line: dict[str, Any]) -> TraceEvent:
    """The typed event a hand-written line is (its `seq` 1 unless given)."""
    event = parse_event({"seq": 1, **line})
    assert event is not None, f"not an event of a known kind and shape: {line}"
    return event
