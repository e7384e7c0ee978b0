"""Every benchmark workload runs once at a tiny size, so the scripts cannot rot.

Peers run only where their package is installed (the benchmark's own environment, from
bench/requirements.txt); CI's test environment does not install them, so those cases skip.
Nothing here asserts on timings.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from bench import ours, report, report_size, run, worker, workloads
from bench.common import repeat
from bench.peers import FRAMEWORKS, OURS, PEERS, Framework
from bench.skills_tokens import write_catalog

TINY = workloads.Settings(
    loop_steps=5,
    loop_runs=1,
    fanout_sizes=(2,),
    fanout_latency=0.001,
    fanout_runs=1,
    catalog_sizes=(3,),
    tools_per_skill=5,
    scan_repeats=1,
)
PEER_PACKAGES = {"langgraph": "langgraph", "pydantic_ai": "pydantic_ai", "openai_agents": "agents"}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(tmp_path_factory.mktemp("bench") / "skills", 3, TINY.tools_per_skill)


def run_all(framework: Any, catalog: Path) -> dict[str, Any]:
    return {
        "loop": workloads.loop(framework, TINY),
        "fanout": workloads.fanout(framework, TINY),
        "tokens": workloads.tokens(framework, [catalog]),
        "scan": workloads.scan(framework, [catalog], TINY),
    }


def check_figures(results: dict[str, Any], progressive: bool) -> None:
    loop = results["loop"]
    assert loop["steps"] == 5 and loop["us_per_step"] > 0
    (fan,) = results["fanout"]
    assert fan["subagents"] == 2 and fan["ratio"] >= 1 and fan["peak_mb"] > 0
    (tokens,) = results["tokens"]
    assert tokens["skills"] == 3 and tokens["tools"] == 15
    assert 0 < tokens["first_request_eager"] < tokens["job_eager"]
    if progressive:
        assert 0 < tokens["first_request"] < tokens["first_request_eager"]
    assert results["scan"]["skills"] == 3 and results["scan"]["ms"] > 0


def test_our_workloads_run_at_a_tiny_size(catalog: Path) -> None:
    results = run_all(ours, catalog)
    check_figures(results, progressive=True)
    assert 0 < results["loop"]["counting_share"] < 1


@pytest.mark.parametrize("peer", PEERS, ids=[p.key for p in PEERS])
def test_peer_workloads_run_at_a_tiny_size(peer: Framework, catalog: Path) -> None:
    pytest.importorskip(PEER_PACKAGES[peer.key], reason=f"{peer.name} is not installed")
    module = importlib.import_module(peer.module)
    check_figures(run_all(module, catalog), progressive=False)


def test_a_peer_that_cannot_be_imported_is_reported_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, catalog: Path
) -> None:
    missing = Framework("missing", "Missing", "bench.peers.no_such_peer", ("no-such-peer",))
    monkeypatch.setitem(FRAMEWORKS, "missing", missing)
    outcome = worker.outcome("missing", "loop", TINY, [catalog])
    assert outcome["status"] == "unavailable"
    assert "no_such_peer" in outcome["reason"]


def test_the_report_shows_every_framework_and_why_one_did_not_run(catalog: Path) -> None:
    ok = {name: {"status": "ok", "result": r} for name, r in run_all(ours, catalog).items()}
    missing = {"status": "unavailable", "reason": "ModuleNotFoundError: No module named 'x'"}
    results = {
        "settings": {"loop_steps": 5, "fanout_sizes": [2], "catalog_sizes": [3]},
        "frameworks": {OURS.key: ok, PEERS[0].key: dict.fromkeys(ok, missing)},
    }
    text = report.table(results)
    assert "| Loop, 5 steps: µs per step |" in text
    assert "Fan-out K=2: wall / ideal" in text and "Tools, 3 skills: 3-skill job tokens" in text
    assert f"{PEERS[0].name}, loop: unavailable: ModuleNotFoundError" in text


def test_worker_settings_survive_the_trip_through_json() -> None:
    assert worker.settings_from_json(worker.settings_to_json(TINY)) == TINY


def test_runs_stop_at_the_deadline_but_one_always_runs() -> None:
    calls: list[int] = []
    results, cut = repeat(lambda: calls.append(1), runs=5, budget_s=1e9, deadline=0.0)
    assert (len(results), cut) == (1, True)
    results, cut = repeat(lambda: calls.append(1), runs=3, budget_s=1e9, deadline=None)
    assert (len(results), cut) == (3, False)


def test_the_budget_is_split_into_deadlines_by_expected_cost() -> None:
    schedule = run.deadlines(["ours", "langgraph"], ["loop", "scan"], budget=100.0, start=0.0)
    order = [schedule[w, k] for w in ("loop", "scan") for k in ("ours", "langgraph")]
    assert order == sorted(order) and order[-1] == pytest.approx(100.0)
    assert schedule["loop", "langgraph"] - schedule["loop", "ours"] > schedule["loop", "ours"]


def test_report_size_runs() -> None:
    figures = report_size.measure(3, 1, browser=False)
    assert figures["agents"] == 4 and figures["report_mb"] > 0 and figures["chromium"] is None


def test_cli_startup_measures_the_commands_once() -> None:
    from bench import cli_startup

    results = cli_startup.measure({"here": cli_startup.HERE}, runs=1)
    assert results["python"]["-c pass s"] > 0
    assert results["here"]["--version s"] > 0 and results["here"]["--help modules"] > 0


def test_write_cost_measures_every_kind_of_write(tmp_path: Path) -> None:
    from bench import write_cost

    figures = write_cost.measure(tmp_path, 100, calls=3)
    assert len(figures) == 4 and all(len(spent) == 3 for spent in figures.values())
    assert (tmp_path / "sub" / "file.bin").stat().st_size == 100


def test_background_fork_measures_both_forks_once() -> None:
    from bench import background_fork

    (row,) = background_fork.measure(runs=1, step=0.01, ratios=[1.0])
    assert len(row["background_s"]) == len(row["blocking_s"]) == 1
    assert row["ideal_background_s"] < row["ideal_blocking_s"]
    assert "| 0.04 s / 0.04 s |" in background_fork.table([row])


def test_the_context_window_workload_runs_at_a_tiny_size() -> None:
    from bench import context_window

    rows = context_window.measure(steps=12, window=4096)
    windowed, noted, own, unlimited = rows
    assert {row["status"] for row in rows} == {"completed"}
    assert noted["calls"] == windowed["calls"] + noted["compactions"]
    assert windowed["compactions"] >= 1 and unlimited["compactions"] == 0
    assert windowed["largest_asked"] <= 4096 < unlimited["largest_request"]
    # In the model's own count too, no request passes the window.
    assert own["own_count"] and own["compactions"] >= 1
    assert own["largest_asked"] <= 4096 and own["over_window"] == 0
    assert 0 < windowed["cache_read_share"] < unlimited["cache_read_share"] <= 1
    table = context_window.report(rows)
    assert f"| {windowed['largest_asked']:,} ({windowed['largest_asked'] / 4096:.1%}) |" in table
