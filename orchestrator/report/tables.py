"""The report's tables: the run at a glance, tokens and cost per agent as a tree, skills, errors.

Cost appears only where the trace has it (a `cost` on `model_call` or `run_end` events): the
report never prices tokens itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

from ..messages import plural
from .markup import cost, esc, pill, seconds, shorten, tokens
from .model import AgentRun, RunReport


def render_summary(report: RunReport) -> str:
    """The headline figures."""
    started = (
        datetime.fromtimestamp(report.first_ts).strftime("%Y-%m-%d %H:%M:%S")
        if report.first_ts
        else "—"
    )
    inputs = sum(a.input_tokens for a in report.agents.values())
    outputs = sum(a.output_tokens for a in report.agents.values())
    stats = [
        ("agents", f"{len(report.agents):,}", _graph_size(report)),
        ("tokens", tokens(report.total_tokens), f"{tokens(inputs)} in · {tokens(outputs)} out"),
        ("time", seconds(report.duration), f"started {started}"),
        ("errors", f"{len(report.errors):,}", "tool errors and failed runs"),
    ]
    total_cost = report.total_cost
    stats.append(
        ("cost", cost(total_cost), "as the trace recorded it")
        if total_cost is not None
        else ("cost", "—", "not in the trace")
    )
    cards = "".join(
        f'<div class="stat" data-stat="{esc(name)}"><div class="k">{esc(name)}</div>'
        f'<div class="v">{esc(value)}</div><div class="s">{esc(note)}</div></div>'
        for name, value, note in stats
    )
    return f'<div class="stats">{cards}</div>'


def _graph_size(report: RunReport) -> str:
    forks = {task.caller for task in report.tasks.values()}
    if not forks:
        return "no forks"
    return f"{plural(len(report.tasks), 'task')} in {plural(len(forks), 'graph')}"


def render_agents(report: RunReport, anchors: dict[str, str]) -> str:
    """Tokens (and cost, when recorded) per agent, as an indented tree, with totals."""
    agents = report.tree()
    if not agents:
        return '<p class="empty">No agents ran.</p>'
    with_cost = report.total_cost is not None
    subtree = report.subtree_tokens()
    nested = any(subtree[a.key] != a.total_tokens for a in agents)
    head = ["agent", "status", "steps", "input", "output", "tokens"]
    head += ["with sub-agents"] if nested else []
    head += ["cost"] if with_cost else []
    head += ["time", "skills"]
    columns = (nested, with_cost)
    rows = [
        _agent_row(a, anchors.get(a.key, ""), subtree[a.key], columns, _aside(report, a))
        for a in agents
    ]
    totals = [
        "<td><b>total</b></td><td></td>",
        f'<td class="n">{sum(a.steps for a in agents):,}</td>',
        f'<td class="n">{tokens(sum(a.input_tokens for a in agents))}</td>',
        f'<td class="n">{tokens(sum(a.output_tokens for a in agents))}</td>',
        f'<td class="n"><b>{tokens(report.total_tokens)}</b></td>',
        "<td></td>" if nested else "",
        f'<td class="n"><b>{cost(report.total_cost)}</b></td>' if with_cost else "",
        f'<td class="n">{seconds(report.duration)}</td><td></td>',
    ]
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<div class="scroll"><table class="agents"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody><tfoot><tr>{''.join(totals)}</tr></tfoot></table></div>"
    )


def _aside(report: RunReport, agent: AgentRun) -> str:
    """What the row says of a background task: that it was one, and its overlap."""
    task = report.tasks.get(agent.path)
    if task is None or not task.background:
        return ""
    overlap = f", overlapped its parent's work {seconds(task.overlap)}" if task.overlap else ""
    return f' <span class="chip" data-background>background{esc(overlap)}</span>'


def _compacted(count: int) -> str:
    if not count:
        return ""
    times = "once" if count == 1 else f"{count} times"
    why = "its conversation was compacted to fit the context window"
    return f' <span class="sub" title="{why}">compacted {times}</span>'


def _agent_row(
    agent: AgentRun, anchor: str, subtree: int, columns: tuple[bool, bool], aside: str = ""
) -> str:
    nested, with_cost = columns
    took = (
        seconds(agent.ended - agent.started)
        if agent.started is not None and agent.ended is not None
        else ""
    )
    name = agent.key.rpartition("/")[2]
    cells = [
        f'<td class="tree" style="padding-left:{agent.depth * 18 + 8}px">'
        f'<a href="#{anchor}" title="{esc(agent.key)}">{esc(name)}</a>'
        f"{_sub(agent.subagent)}{aside}</td>",
        f"<td>{pill(agent.status)}{_compacted(agent.compactions)}</td>",
        f'<td class="n">{agent.steps:,}</td>',
        f'<td class="n">{tokens(agent.input_tokens)}</td>',
        f'<td class="n">{tokens(agent.output_tokens)}</td>',
        f'<td class="n">{tokens(agent.total_tokens)}</td>',
        f'<td class="n">{tokens(subtree) if subtree != agent.total_tokens else ""}</td>'
        if nested
        else "",
        f'<td class="n">{cost(agent.cost)}</td>' if with_cost else "",
        f'<td class="n">{took}</td>',
        f"<td>{''.join(_chip(s) for s in agent.skills)}</td>",
    ]
    return f'<tr data-agent="{esc(agent.key)}">{"".join(cells)}</tr>'


def _sub(subagent: str | None) -> str:
    return f' <span class="muted">{esc(subagent)}</span>' if subagent else ""


def _chip(skill: str) -> str:
    return f'<span class="chip">{esc(skill)}</span>'


def render_skills(report: RunReport, anchors: dict[str, str]) -> str:
    """Each skill that was loaded, and which agents loaded it (or started with it loaded:
    `preloaded`)."""
    loaded: dict[str, list[AgentRun]] = defaultdict(list)
    for agent in report.tree():
        for skill in agent.skills:
            loaded[skill].append(agent)
    if not loaded:
        return '<p class="empty">No agent loaded a skill.</p>'
    items = []
    for skill, agents in sorted(loaded.items()):
        links = ", ".join(
            f'<a href="#{anchors.get(a.key, "")}">{esc(a.key)}</a>'
            + (' <span class="muted">(preloaded)</span>' if skill in a.preloaded else "")
            for a in agents[:50]
        )
        more = f" and {len(agents) - 50:,} more" if len(agents) > 50 else ""
        count = plural(len(agents), "agent")
        items.append(f"<li>{_chip(skill)} <span class='muted'>{count}</span>: {links}{more}</li>")
    return f'<ul class="skills">{"".join(items)}</ul>'


def render_requests(report: RunReport, anchors: dict[str, str]) -> str:
    """What the run asked a person, each with its answer or `waiting`; a question is a
    model's or a remote's text, shown as text."""
    if not report.asked.requests:
        return '<p class="empty">Nothing was asked.</p>'
    rows = []
    for request in report.asked.requests.values():
        answer = report.asked.answers.get(request.id)
        if answer is None:
            given = '<span class="pill warn">waiting</span>'
        elif answer.action != "accept":
            given = f'<span class="pill bad">{esc(answer.action)}d</span> {esc(answer.by)}'
        else:
            given = f"<code>{esc(shorten(json.dumps(answer.value), 200))}</code>"
        rows.append(
            f"<tr><td><code>{esc(request.id)}</code></td>"
            f'<td><a href="#{anchors.get(request.agent, "")}">{esc(request.agent)}</a></td>'
            f"<td>{esc(request.kind)}</td><td>{esc(shorten(request.question, 400))}</td>"
            f"<td>{given}</td></tr>"
        )
    head = "<tr><th>id</th><th>agent</th><th>kind</th><th>question</th><th>answer</th></tr>"
    table = f'<table class="requests"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def render_errors(report: RunReport, anchors: dict[str, str]) -> str:
    """Every error in the order it happened."""
    if not report.errors:
        return '<p class="empty ok-text">No errors.</p>'
    start = report.first_ts or 0.0
    rows = "".join(
        f'<tr><td class="n">{seconds(e.ts - start)}</td>'
        f'<td><a href="#{anchors.get(e.agent, "")}">{esc(e.agent)}</a></td>'
        f'<td><span class="pill bad">{esc(e.kind.replace("_", " "))}</span></td>'
        f"<td><code>{esc(e.where)}</code></td><td>{esc(shorten(e.text, 400))}</td></tr>"
        for e in report.errors
    )
    head = "<tr><th>at</th><th>agent</th><th>kind</th><th>where</th><th>what</th></tr>"
    table = f'<table class="errors"><thead>{head}</thead><tbody>{rows}</tbody></table>'
    return f'<div class="scroll">{table}</div>'
