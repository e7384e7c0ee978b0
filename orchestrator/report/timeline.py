"""The timeline: one row per agent run, its span light, its model and tool calls as bars.

Positions are percentages of the trace's duration, so the page scales with the window. Very
short calls (a scripted model answers in microseconds) still show: bars have a minimum width
in the CSS.
"""

from __future__ import annotations

from .markup import esc, nice_step, seconds, status_class, tokens
from .model import AgentRun, Bar, RunReport


def render_timeline(report: RunReport, anchors: dict[str, str]) -> str:
    """The timeline as HTML rows under a time axis."""
    agents = report.tree()
    if not agents:
        return '<p class="empty">No agents ran.</p>'
    start = report.first_ts or 0.0
    span = max(report.duration, 1e-6)
    rows = [_axis(span)]
    rows.extend(_row(agent, start, span, anchors.get(agent.key, "")) for agent in agents)
    return f'<div class="timeline" role="list">{"".join(rows)}</div>'


def _axis(span: float) -> str:
    step = nice_step(span)
    ticks = []
    at = 0.0
    while at <= span * 1.0001:
        left = at / span * 100
        ticks.append(f'<span class="tick" style="left:{left:.3f}%">{esc(_tick(at, step))}</span>')
        at += step
    track = f'<div class="track">{"".join(ticks)}</div>'
    return f'<div class="trow axis"><div class="tlabel"></div>{track}</div>'


def _tick(at: float, step: float) -> str:
    if at == 0:
        return "0"
    if step >= 60:
        return f"{at / 60:g} min"
    if step >= 0.1:
        return f"{round(at, 3):g} s"
    return f"{round(at * 1000, 3):g} ms"


def _row(agent: AgentRun, start: float, span: float, anchor: str) -> str:
    began = agent.started if agent.started is not None else start
    ended = agent.ended if agent.ended is not None else start + span
    run_title = (
        f"{agent.path}: {agent.status.replace('_', ' ')}, {seconds(ended - began)}, "
        f"{tokens(agent.total_tokens)} tokens"
    )
    bars = [
        f'<div class="runspan {status_class(agent.status)}" title="{esc(run_title)}" '
        f'style="{_position(began, ended, start, span)}"></div>'
    ]
    bars.extend(_bar(bar, start, span, ended) for bar in agent.bars)
    indent = agent.depth * 14
    label = (
        f'<a class="tlabel" href="#{anchor}" style="padding-left:{indent + 6}px" '
        f'title="{esc(agent.key)}">{esc(agent.key.rpartition("/")[2])}</a>'
    )
    return (
        f'<div class="trow" role="listitem" data-agent="{esc(agent.key)}">{label}'
        f'<div class="track">{"".join(bars)}</div></div>'
    )


def _bar(bar: Bar, start: float, span: float, fallback_end: float) -> str:
    end = bar.end if bar.end is not None else fallback_end
    title = f"{bar.label}: {seconds(end - bar.start)}"
    if bar.tokens is not None:
        title += f", {tokens(bar.tokens)} tokens"
    if bar.error:
        title += f" [{bar.error}]"
    kind = f"bar {bar.kind}{' err' if bar.error else ''}"
    where = _position(bar.start, end, start, span)
    return f'<div class="{kind}" title="{esc(title)}" style="{where}"></div>'


def _position(begin: float, end: float, start: float, span: float) -> str:
    left = max(0.0, (begin - start) / span * 100)
    width = max(0.0, (end - begin) / span * 100)
    return f"left:{left:.3f}%;width:{min(width, 100 - left):.3f}%"
