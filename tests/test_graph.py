from __future__ import annotations

import pytest

from orchestrator.errors import ConfigError
from orchestrator.messages import suggest
from orchestrator.tasks import GraphError, GraphProblem, build_graph


def problems_of(items: list[tuple[str, list[str]]]) -> list[GraphProblem]:
    with pytest.raises(GraphError) as caught:
        build_graph(items, noun="step")
    return caught.value.problems


def test_valid_graph_has_edges_from_dependency_to_dependent() -> None:
    graph = build_graph([("load", []), ("risks", ["load"]), ("report", ["load", "risks"])])

    assert set(graph.edges) == {("load", "risks"), ("load", "report"), ("risks", "report")}
    assert graph.nodes["report"]["index"] == 2


def test_graph_error_is_a_config_error_with_plain_message() -> None:
    with pytest.raises(ConfigError, match="depends on itself"):
        build_graph([("a", ["a"])])


def test_duplicate_id_points_at_second_occurrence() -> None:
    [problem] = problems_of([("a", []), ("b", []), ("a", [])])

    assert problem.path("steps") == "steps[2].id"
    assert "duplicate step id 'a'" in problem.message


def test_unknown_dependency_suggests_close_match() -> None:
    [problem] = problems_of([("load", []), ("risks", ["lod"])])

    assert problem.path("steps") == "steps[1].depends_on[0]"
    assert "unknown step 'lod'" in problem.message
    assert "did you mean 'load'?" in problem.message


def test_unknown_dependency_without_close_match_has_no_hint() -> None:
    [problem] = problems_of([("load", []), ("risks", ["zzzz"])])

    assert "did you mean" not in problem.message


def test_self_dependency() -> None:
    [problem] = problems_of([("a", []), ("b", ["a", "b"])])

    assert problem.path("tasks") == "tasks[1].depends_on[1]"
    assert problem.message == "step 'b' depends on itself"


def test_cycle_is_named_from_its_first_node() -> None:
    [problem] = problems_of([("x", []), ("a", ["c"]), ("b", ["a"]), ("c", ["x", "b"])])

    assert "a -> c -> b -> a" in problem.message
    assert problem.path("steps") == "steps[1].depends_on[0]"


def test_cycle_through_first_node_even_when_a_shorter_one_exists_elsewhere() -> None:
    [problem] = problems_of([("a", ["b"]), ("b", ["c"]), ("c", ["b", "a"])])

    assert problem.message.startswith("dependency cycle: a -> b -> c -> a ")


def test_every_problem_is_reported_in_input_order() -> None:
    problems = problems_of(
        [
            ("a", ["b"]),
            ("b", ["a"]),
            ("c", ["nope"]),
            ("c", []),
            ("d", ["d"]),
            ("e", ["f"]),
            ("f", ["e"]),
        ]
    )

    assert [p.path("steps") for p in problems] == [
        "steps[0].depends_on[0]",
        "steps[2].depends_on[0]",
        "steps[3].id",
        "steps[4].depends_on[0]",
        "steps[5].depends_on[0]",
    ]
    assert "a -> b -> a" in problems[0].message
    assert "e -> f -> e" in problems[4].message
    assert str(GraphError(problems)).count(";") >= 4


def test_suggest() -> None:
    assert suggest("reviwer", ["reviewer", "analyst"]) == " (did you mean 'reviewer'?)"
    assert suggest("zzz", ["reviewer"]) == ""
