"""`bench/mcp_first_load.py` runs (once per server), so the script cannot rot."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

# Starts real MCP servers: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow


def test_first_load_bench_measures_both_servers() -> None:
    from bench.mcp_first_load import measure, render

    results = measure(1)
    assert set(results) == {"mcp-server-time", "mcp-server-git"}
    assert results["mcp-server-git"]["tools"] >= 10
    assert all(row["schema_tokens"] > 0 for row in results.values())
    assert "| mcp-server-git | " in render(results)
