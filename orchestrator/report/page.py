"""The report as one self-contained HTML page.

The page loads nothing: its CSS, script and SVG are inline, and a Content-Security-Policy
forbids every fetch and every script but its own (by hash), so even a trace that smuggled
markup past the escaping could not run it or phone home. Conversations travel as a JSON blob
that the script renders, with `textContent`, only when a conversation is opened: a 1,000-agent
report stays light to open.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from ..security.inventory import reads_no_configuration
from ..security.permissions import sandbox_line
from .dag import render_dag
from .markup import esc, pill, tokens
from .model import AgentRun, RunReport
from .tables import (
    render_agents,
    render_errors,
    render_requests,
    render_skills,
    render_summary,
)
from .timeline import render_timeline

MESSAGE_FIELDS: tuple[str, ...] = ("role", "content", "tool_calls", "tool_call_id", "name")
MESSAGE_FIELDS += ("is_error", "error_type", "reasoning")
SHARED_TEXT = 200  # characters: a text at least this long that repeats is written once
DATA_SHOWN = 200  # characters of an agent's structured answer its conversation's title shows


@reads_no_configuration("the report's own CSS and script, in the package")
@cache
def asset(name: str) -> str:
    """`report.css` or `report.js`, shipped next to this module."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_page(report: RunReport) -> str:
    """The whole report page."""
    agents = report.tree()
    anchors = {agent.key: f"a{i}" for i, agent in enumerate(agents)}
    script = asset("report.js")
    title = f"{report.job or _root_name(report)}: {report.status.replace('_', ' ')}"
    sections = [
        _section("graph", "Task graph", _graph_note(), render_dag(report, anchors), scroll=True),
        _section("timeline", "Timeline", _timeline_note(), render_timeline(report, anchors)),
        _section("agents", "Tokens per agent", _cost_note(report), render_agents(report, anchors)),
        _section("skills", "Skills loaded", "", render_skills(report, anchors)),
        _section("errors", f"Errors ({len(report.errors):,})", "", render_errors(report, anchors)),
        *(
            [_section("requests", "Asked a person", "", render_requests(report, anchors))]
            if report.asked.requests
            else []
        ),
        _section("conversations", "Conversations", _conv_note(), _conversations(agents, anchors)),
    ]
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            f'<meta http-equiv="Content-Security-Policy" content="{_policy(script)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{esc(title)} · orchestrator report</title>",
            f"<style>{asset('report.css')}</style></head><body>",
            _header(report),
            f"<main>{''.join(sections)}</main>",
            f'<script type="application/json" id="conversation-data">{_data(agents)}</script>',
            f"<script>{script}</script></body></html>\n",
        ]
    )


def _policy(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def _header(report: RunReport) -> str:
    name = report.job or _root_name(report)
    kind = "job" if report.job else "run"
    runs = (
        f' <span class="muted">· resumed: {report.attempts} attempts</span>'
        if report.attempts > 1
        else ""
    )
    source = f'<div class="source muted">{esc(report.source)}</div>' if report.source else ""
    if report.sandboxes:
        source += f'<div class="sandbox muted">{esc(sandbox_line(report.sandboxes))}</div>'
    nav = "".join(
        f'<a href="#{k}">{esc(v)}</a>'
        for k, v in [
            ("graph", "graph"),
            ("timeline", "timeline"),
            ("agents", "tokens"),
            ("skills", "skills"),
            ("errors", "errors"),
            ("conversations", "conversations"),
        ]
    )
    return (
        f'<header><div class="title"><span class="kind">{kind}</span><h1>{esc(name)}</h1>'
        f"{pill(report.status)}{runs}</div>{source}{render_summary(report)}"
        f'<nav>{nav}<input id="filter" type="search" placeholder="filter agents…" '
        f'aria-label="filter agents"></nav></header>'
    )


def _root_name(report: RunReport) -> str:
    roots = [a.path for a in report.agents.values() if a.parent_path is None]
    return roots[0] if roots else "empty trace"


def _section(key: str, heading: str, note: str, body: str, *, scroll: bool = False) -> str:
    inner = f'<div class="scroll big">{body}</div>' if scroll else body
    note_html = f'<p class="note">{note}</p>' if note else ""
    return f'<section id="{key}"><h2>{esc(heading)}</h2>{note_html}{inner}</section>'


def _graph_note() -> str:
    return (
        '<span class="key ok">completed</span><span class="key bad">error</span>'
        '<span class="key warn">cancelled</span><span class="key limit">stopped by a limit</span>'
        '<span class="key skip">skipped or not started</span>'
        '<span class="key run">unfinished</span>'
        '<span class="line dep"></span>depends on <span class="line fork"></span>forked by'
    )


def _timeline_note() -> str:
    return (
        '<span class="swatch agentrun"></span>agent run '
        '<span class="swatch model"></span>model call '
        '<span class="swatch tool"></span>tool call <span class="swatch err"></span>failed call'
    )


def _cost_note(report: RunReport) -> str:
    if report.total_cost is None:
        return "The trace records no prices, so no cost is shown; tokens are as counted."
    return "Cost as the trace recorded it."


def _conv_note() -> str:
    return "Every message each agent saw, rebuilt from the trace. Open one to read it."


def _conversations(agents: list[AgentRun], anchors: dict[str, str]) -> str:
    if not agents:
        return '<p class="empty">No conversations.</p>'
    items = [
        f'<details class="conv" id="{anchors[a.key]}" data-index="{i}" '
        f'data-agent="{esc(a.key)}"><summary><span class="path">{esc(a.key)}</span>'
        f"{pill(a.status)}<span class='muted'>{len(a.messages):,} messages · "
        f"{tokens(a.total_tokens)} tokens{_shown_data(a)}</span></summary>"
        "<div class='msgs'></div></details>"
        for i, a in enumerate(agents)
    ]
    return f'<div class="scroll convs">{"".join(items)}</div>'


def _shown_data(agent: AgentRun) -> str:
    """The agent's structured answer, if any, as a short escaped line."""
    if agent.data is None:
        return ""
    shown = json.dumps(agent.data)
    shown = shown if len(shown) <= DATA_SHOWN else shown[: DATA_SHOWN - 3] + "..."
    return f" · data: <code>{esc(shown)}</code>"


def _data(agents: list[AgentRun]) -> str:
    """The conversations as JSON that is safe inside a script element.

    A long text that occurs more than once (the same system prompt for 1,000 sub-agents) is
    written once, in `texts`, and messages point at it by its index.
    """
    seen: dict[str, int] = {}
    for agent in agents:
        for message in agent.messages:
            text = message.get("content")
            if isinstance(text, str) and len(text) >= SHARED_TEXT:
                seen[text] = seen.get(text, 0) + 1
    texts = [text for text, count in seen.items() if count > 1]
    index = {text: i for i, text in enumerate(texts)}
    payload = {
        "texts": texts,
        "agents": [[a.key, [_message(m, index) for m in a.messages]] for a in agents],
    }
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _message(message: dict[str, Any], texts: dict[str, int]) -> dict[str, Any]:
    kept = {k: message[k] for k in MESSAGE_FIELDS if message.get(k) not in (None, "", [], False)}
    if kept.get("content") in texts:
        kept["content"] = texts[kept["content"]]
    return kept
