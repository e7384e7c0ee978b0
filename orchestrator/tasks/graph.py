"""Task graphs: validate `(id, depends_on)` pairs into a networkx DAG, and walk it in order.

Shared by the job spec's `steps` and the `fork` meta-tool. Edges point from a dependency to
the task that needs it, so a topological order runs dependencies first. Every problem is
found in one pass and reported together, each tied to the position it came from so callers
can name it in their own terms (`steps[1].depends_on[0]`, `tasks[2].id`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx

from ..errors import ConfigError


@dataclass(frozen=True)
class GraphProblem:
    """One problem, at item `index` (and at `dependency`, a position in its depends_on)."""

    index: int
    dependency: int | None
    message: str

    def path(self, items: str) -> str:
        """Where the problem is, e.g. `steps[1].depends_on[0]` for `items="steps"`."""
        if self.dependency is None:
            return f"{items}[{self.index}].id"
        return f"{items}[{self.index}].depends_on[{self.dependency}]"


class GraphError(ConfigError):
    """The tasks do not form a valid DAG; `problems` lists every reason."""

    def __init__(self, problems: Sequence[GraphProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.message for p in self.problems))


def build_graph(
    items: Iterable[tuple[str, Sequence[str]]], *, noun: str = "task"
) -> nx.DiGraph[str]:
    """Validate `(id, depends_on)` pairs and return their DAG, or raise GraphError.

    Nodes keep their position in `items` as the `index` attribute. `noun` names the items in
    messages ("step", "task").
    """
    pairs = [(node, list(deps)) for node, deps in items]
    problems = _duplicates(pairs, noun)
    first: dict[str, int] = {}
    for index, (node, _) in enumerate(pairs):
        first.setdefault(node, index)
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from((node, {"index": index}) for node, index in first.items())
    for index, (node, deps) in enumerate(pairs):
        for position, dep in enumerate(deps):
            problem = _check_dependency(node, dep, first, noun)
            if problem:
                problems.append(GraphProblem(index, position, problem))
            else:
                graph.add_edge(dep, node)
    problems.extend(_cycles(graph, pairs, noun))
    if problems:
        raise GraphError(sorted(problems, key=_position))
    return graph


def suggest(name: str, choices: Iterable[str]) -> str:
    """A " (did you mean 'x'?)" hint for a misspelt name, or "" when nothing is close."""
    matches = difflib.get_close_matches(name, [str(c) for c in choices], n=3, cutoff=0.6)
    if not matches:
        return ""
    return " (did you mean " + " or ".join(repr(m) for m in matches) + "?)"


def _duplicates(pairs: list[tuple[str, list[str]]], noun: str) -> list[GraphProblem]:
    seen: set[str] = set()
    problems = []
    for index, (node, _) in enumerate(pairs):
        if node in seen:
            message = f"duplicate {noun} id {node!r}; ids must be unique"
            problems.append(GraphProblem(index, None, message))
        seen.add(node)
    return problems


def _check_dependency(node: str, dep: str, known: dict[str, int], noun: str) -> str | None:
    if dep == node:
        return f"{noun} {node!r} depends on itself"
    if dep not in known:
        return f"{noun} {node!r} depends on unknown {noun} {dep!r}{suggest(dep, known)}"
    return None


def _cycles(
    graph: nx.DiGraph[str], pairs: list[tuple[str, list[str]]], noun: str
) -> list[GraphProblem]:
    """One named cycle per strongly connected group, read in `depends on` direction."""
    problems = []
    index_of = nx.get_node_attributes(graph, "index")
    depends_on = graph.reverse(copy=False)
    groups = [g for g in nx.strongly_connected_components(graph) if len(g) > 1]
    for group in sorted(groups, key=lambda g: min(index_of[n] for n in g)):
        start = min(group, key=index_of.__getitem__)
        deps = pairs[index_of[start]][1]
        position = next(i for i, dep in enumerate(deps) if dep in group)
        cycle = [start, *nx.shortest_path(depends_on.subgraph(group), deps[position], start)]
        message = f"dependency cycle: {' -> '.join(cycle)} (each {noun} depends on the next)"
        problems.append(GraphProblem(index_of[start], position, message))
    return problems


def _position(problem: GraphProblem) -> tuple[int, int]:
    return problem.index, -1 if problem.dependency is None else problem.dependency
