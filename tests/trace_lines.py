"""A trace's events as the lines of its file: dicts of JSON values, for tests that assert on
the format itself (the package reads typed events; see orchestrator/events.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.trace import read_trace


def trace_lines(path: str | Path) -> list[dict[str, Any]]:
    """Every event of the trace at `path` that a reader keeps, as its line had it."""
    return [event.as_line() for event in read_trace(path)]
