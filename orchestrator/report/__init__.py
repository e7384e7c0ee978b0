"""The HTML run report: one self-contained page a person opens in a browser.

    from orchestrator.report import write_report
    write_report("run.jsonl", "report.html")

It shows the task graph, a timeline of every agent's model and tool calls, tokens (and cost,
when the trace has it) per agent as a tree, the skills each agent loaded, every error, and
each conversation. See docs/report.md. An optional part of the package: it reads the core's
JSONL trace, and the core never imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..events import TraceEvent
from ..trace.reader import TraceReader, iter_trace
from .collect import collect
from .model import AgentRun, RunReport
from .page import render_page

__all__ = ["AgentRun", "RunReport", "collect", "render_report", "write_report"]


def render_report(events: Iterable[TraceEvent], *, source: str = "") -> str:
    """The report page for `events` (a trace's events, in file order) as an HTML string."""
    return render_page(collect(events, source=source))


def write_report(
    trace: str | Path, output: str | Path | None = None, *, reader: TraceReader | None = None
) -> Path:
    """Write the report of the trace at `trace` to `output` (default: next to the trace,
    with `.html` for its suffix); returns where it went. `reader`: the trace's reader, when
    the caller wants to see afterwards what it skipped (`reader.problems`)."""
    trace = Path(trace)
    target = Path(output) if output is not None else trace.with_suffix(".html")
    page = render_report(reader or iter_trace(trace), source=str(trace))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
