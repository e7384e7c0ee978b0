"""The task graph as SVG: layers by longest path, nodes coloured by status.

Nodes are every job step, forked task and agent of the trace. Solid arrows are `depends_on`;
dashed ones go from an agent to the tasks it forked that wait for nothing else. Layer *n*
holds the nodes whose longest chain of edges from a root has *n* edges; a layer taller than
`rows_for(count)` wraps into several columns, so a fan-out of 1,000 stays a block, not a line;
the fork edges into such a block are drawn as one bracket instead of a thousand curves.
Within a layer nodes are ordered by where their predecessors sit (one barycentre sweep).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from .markup import esc, shorten, status_class, tokens
from .model import AgentRun, RunReport

NODE_W, NODE_H = 184, 46
GAP_X, GAP_Y, WRAP_GAP = 64, 12, 14
PAD = 12
CENTRE_UP_TO = 12  # columns are centred on each other up to this many rows, else top-aligned
BUNDLE_OVER = 8  # fork edges from one agent into one wrapped layer, past which they bundle


@dataclass
class Node:
    path: str
    label: str
    status: str | None
    detail: str
    anchor: str | None  # the id of the agent's section in the page
    layer: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass
class Block:
    """Where one layer's nodes sit; `wrapped` when they take more than one column."""

    left: float
    top: float
    bottom: float
    wrapped: bool


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str  # "dep" or "fork"


def graph(report: RunReport, anchors: dict[str, str]) -> tuple[dict[str, Node], list[Edge]]:
    """The nodes (by path) and edges of a report's task graph, not yet placed."""
    runs = report.latest_runs()
    paths = list(dict.fromkeys([*report.tasks, *runs]))
    nodes = {path: _node(report, path, runs.get(path), anchors) for path in paths}
    edges: list[Edge] = []
    for task in report.tasks.values():
        deps = [d for d in task.depends_on if d in nodes]
        edges.extend(Edge(d, task.path, "dep") for d in deps)
        if not deps and task.caller in nodes:
            edges.append(Edge(task.caller, task.path, "fork"))
    return nodes, list(dict.fromkeys(edges))


def _node(report: RunReport, path: str, run: AgentRun | None, anchors: dict[str, str]) -> Node:
    task = report.tasks.get(path)
    status = run.status if run else (task.status if task else None)
    runs = sum(1 for a in report.agents.values() if a.path == path)
    parts = [task.subagent if task and task.subagent else (run.model if run else "")]
    if run:
        parts.append(f"{tokens(run.total_tokens)} tok")
    if runs > 1:
        parts.append(f"{runs} runs")
    if task is not None and task.background:
        parts.append("background")
    detail = " · ".join(p for p in parts if p)
    return Node(
        path=path,
        label=path.rpartition("/")[2],
        status=status if run or (task and task.status) else None,
        detail=detail,
        anchor=anchors.get(run.key) if run else None,
    )


def layers(nodes: dict[str, Node], edges: list[Edge]) -> list[list[str]]:
    """Longest-path layers, each ordered by its predecessors' positions."""
    preds: dict[str, list[str]] = defaultdict(list)
    succs: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        preds[edge.target].append(edge.source)
        succs[edge.source].append(edge.target)
    level = dict.fromkeys(nodes, 0)
    waiting = {path: len(preds[path]) for path in nodes}
    ready = [path for path in nodes if waiting[path] == 0]
    while ready:
        path = ready.pop()
        for target in succs[path]:
            level[target] = max(level[target], level[path] + 1)
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    grouped: list[list[str]] = [[] for _ in range(max(level.values(), default=0) + 1)]
    for path in nodes:  # first appearance order, then the barycentre sweep
        grouped[level[path]].append(path)
        nodes[path].layer = level[path]
    position: dict[str, float] = {}
    for layer in grouped:
        if position:
            layer.sort(key=lambda p: _barycentre(p, preds, position))
        position.update({path: float(i) for i, path in enumerate(layer)})
    return grouped


def _barycentre(path: str, preds: dict[str, list[str]], position: dict[str, float]) -> float:
    placed = [position[p] for p in preds[path] if p in position]
    return sum(placed) / len(placed) if placed else math.inf


def rows_for(count: int) -> int:
    """How many nodes one column holds before a layer wraps."""
    return max(14, math.ceil(math.sqrt(count * 2)))


def place(nodes: dict[str, Node], grouped: list[list[str]]) -> tuple[float, float, list[Block]]:
    """Give every node its x and y; returns the drawing's width and height, and each layer's
    block."""
    rows = rows_for(len(nodes))
    tallest = min(rows, max((len(layer) for layer in grouped), default=1))
    height = tallest * (NODE_H + GAP_Y) - GAP_Y + 2 * PAD
    blocks: list[Block] = []
    x = PAD
    for layer in grouped:
        chunks = [layer[i : i + rows] for i in range(0, len(layer), rows)] or [[]]
        centre = tallest <= CENTRE_UP_TO
        top = PAD + (tallest - len(chunks[0])) * (NODE_H + GAP_Y) / 2 if centre else PAD
        for i, chunk in enumerate(chunks):
            for row, path in enumerate(chunk):
                nodes[path].x = x + i * (NODE_W + WRAP_GAP)
                nodes[path].y = top + row * (NODE_H + GAP_Y)
        bottom = top + len(chunks[0]) * (NODE_H + GAP_Y) - GAP_Y
        blocks.append(Block(x, top, bottom, wrapped=len(chunks) > 1))
        x += len(chunks) * (NODE_W + WRAP_GAP) - WRAP_GAP + GAP_X
    return x - GAP_X + PAD, height, blocks


def render_dag(report: RunReport, anchors: dict[str, str]) -> str:
    """The graph as an inline SVG element (no external references, everything escaped)."""
    nodes, edges = graph(report, anchors)
    if not nodes:
        return '<p class="empty">No agents ran.</p>'
    width, height, blocks = place(nodes, layers(nodes, edges))
    parts = [
        f'<svg class="dag" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="task graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>'
        "</defs>",
    ]
    single, bundles = _bundles(nodes, edges, blocks)
    parts.extend(_edge(nodes[e.source], nodes[e.target], e.kind) for e in single)
    parts.extend(_bundle(nodes[source], block, count) for (source, block), count in bundles)
    parts.extend(_node_svg(node) for node in nodes.values())
    parts.append("</svg>")
    return "".join(parts)


def _bundles(
    nodes: dict[str, Node], edges: list[Edge], blocks: list[Block]
) -> tuple[list[Edge], list[tuple[tuple[str, Block], int]]]:
    """The edges drawn one by one, and the fork edges bundled per (source, wrapped layer)."""
    groups: dict[tuple[str, int], list[Edge]] = defaultdict(list)
    for edge in edges:
        if edge.kind == "fork" and blocks[nodes[edge.target].layer].wrapped:
            groups[(edge.source, nodes[edge.target].layer)].append(edge)
    bundled = {key for key, group in groups.items() if len(group) > BUNDLE_OVER}
    single = [
        e for e in edges if not (e.kind == "fork" and (e.source, nodes[e.target].layer) in bundled)
    ]
    return single, [((s, blocks[layer]), len(groups[(s, layer)])) for s, layer in bundled]


def _bundle(source: Node, block: Block, count: int) -> str:
    """Many fork edges into one wrapped layer: a curve to a bracket along the block."""
    x1, y1 = source.x + NODE_W, source.y + NODE_H / 2
    bar = block.left - 14
    y2 = min(max(y1, block.top + 10), block.bottom - 10)
    bend = max(16.0, (bar - x1) / 2)
    return (
        f'<path class="edge fork bundle" data-source="{esc(source.path)}" data-target="" '
        f'd="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {bar - bend:.1f},{y2:.1f} '
        f'{bar:.1f},{y2:.1f}"/><path class="bracket" d="M{bar + 6:.1f},{block.top:.1f} '
        f'H{bar:.1f} V{block.bottom:.1f} H{bar + 6:.1f}"/><text class="count" '
        f'transform="translate({bar - 5:.1f},{(block.top + block.bottom) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">forks {count:,} tasks</text>'
    )


def _edge(source: Node, target: Node, kind: str) -> str:
    x1, y1 = source.x + NODE_W, source.y + NODE_H / 2
    x2, y2 = target.x - 2, target.y + NODE_H / 2
    bend = max(24.0, (x2 - x1) / 2)
    return (
        f'<path class="edge {kind}" data-source="{esc(source.path)}" '
        f'data-target="{esc(target.path)}" d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} '
        f'{x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" marker-end="url(#arrow)"/>'
    )


def _node_svg(node: Node) -> str:
    title = f"{node.path}: {(node.status or 'not started').replace('_', ' ')}"
    if node.detail:
        title += f" ({node.detail})"
    body = (
        f'<g class="node {status_class(node.status)}" data-path="{esc(node.path)}" '
        f'transform="translate({node.x:.1f},{node.y:.1f})"><title>{esc(title)}</title>'
        f'<rect class="box" width="{NODE_W}" height="{NODE_H}" rx="7"/>'
        f'<rect class="stripe" width="6" height="{NODE_H}" rx="3"/>'
        f'<text x="16" y="19" class="label">{esc(shorten(node.label, 22))}</text>'
        f'<text x="16" y="35" class="detail">{esc(shorten(node.detail, 28))}</text></g>'
    )
    if node.anchor:
        return f'<a href="#{node.anchor}" class="jump">{body}</a>'
    return body
