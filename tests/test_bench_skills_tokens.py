"""bench/skills_tokens.py runs, at a tiny size, and shows what it is meant to show."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench" / "skills_tokens.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_skills_tokens", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_at_a_tiny_size() -> None:
    bench = load_bench()
    small, larger = bench.smoke()
    assert (small["skills"], small["tools"]) == (3, 6)
    assert (larger["skills"], larger["tools"]) == (12, 24)
    for row in (small, larger):
        assert 0 < row["progressive_tokens"] < row["eager_tokens"]
        assert row["scan_ms_median"] > 0
        assert 100 < row["tokens_per_tool"] < 300
    # The index is capped (300 tokens here): 12 skills cost what fits, not four times 3 skills.
    assert larger["progressive_tokens"] < 2 * small["progressive_tokens"]
    assert "first request costs" in bench.report([small, larger])
