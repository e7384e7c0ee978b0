"""Tests that start Ray, Chromium or MCP servers carry the `slow` marker, so the inner loop
(`pytest -m "not slow"`) never starts them. A scan of the test modules' source."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HEAVY_IMPORTS = {"ray", "browser", "mcp_helpers", "mcp_server", "legacy_mcp_server"}
"""Importing one of these (Ray itself, tests/browser.py, the MCP helpers) marks the whole module."""
RAY_FIXTURE = "ray_cluster"


def _imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _module_is_slow(tree: ast.Module, source: str) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and "mark.slow" in (ast.get_source_segment(source, node.value) or "")
        for node in tree.body
    )


def _unmarked(path: Path) -> list[str]:
    """What in the module at `path` starts something heavy without the slow marker."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    if _module_is_slow(tree, source):
        return []
    if heavy := sorted(_imports(tree) & HEAVY_IMPORTS):
        return [f"{path.name} imports {', '.join(heavy)}: add `pytestmark = pytest.mark.slow`"]
    if RAY_FIXTURE not in source:
        return []
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if RAY_FIXTURE not in "\n".join(lines[first - 1 : node.end_lineno]):
            continue
        decorators = "\n".join(lines[first - 1 : node.lineno])
        if not node.name.startswith("test"):
            found.append(f"{path.name}: {node.name} uses {RAY_FIXTURE}: mark the module slow")
        elif "mark.slow" not in decorators:
            found.append(f"{path.name}::{node.name} uses {RAY_FIXTURE}: mark it slow")
    for node in tree.body:  # `pytestmark = pytest.mark.usefixtures("ray_cluster")` and the like
        if isinstance(node, ast.Assign) and RAY_FIXTURE in "\n".join(
            lines[node.lineno - 1 : node.end_lineno]
        ):
            found.append(f"{path.name} uses {RAY_FIXTURE} for every test: mark the module slow")
    return found


def test_every_test_that_starts_ray_chromium_or_mcp_is_marked_slow() -> None:
    modules = sorted(path for path in TESTS.glob("test_*.py") if path.name != Path(__file__).name)
    problems = [problem for path in modules for problem in _unmarked(path)]
    assert not problems, "\n".join(problems)


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    cases = {
        "test_a.py": "import ray\n",
        "test_b.py": "from mcp_helpers import kit_server\n",
        "test_c.py": "import pytest\nfrom browser import Chromium\npytestmark = pytest.mark.skip\n",
        "test_d.py": "def test_x(ray_cluster):\n    pass\n",
        "test_e.py": "import pytest\npytestmark = pytest.mark.usefixtures('ray_cluster')\n",
    }
    fine = {
        "test_f.py": "import ray\npytestmark = [mark.usefixtures('ray_cluster'), mark.slow]\n",
        "test_g.py": "import pytest\n@pytest.mark.slow\ndef test_x(ray_cluster):\n    pass\n",
        "test_h.py": "from skill_factory import write_skill\ndef test_x():\n    pass\n",
    }
    for name, text in (cases | fine).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert all(_unmarked(tmp_path / name) for name in cases)
    assert not any(_unmarked(tmp_path / name) for name in fine)
