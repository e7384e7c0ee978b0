"""The package's layout holds: the import contract and a small top level.

How long a function may be is ruff's C901 (complexity 15), not a line count: long functions
are fine when they read top to bottom.

The contract itself lives in pyproject.toml (`[tool.importlinter]`); docs/architecture.md draws it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchestrator"
MAX_TOP_LEVEL_MODULES = 12
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the package in `tree` (a checkout: pyproject.toml and orchestrator/)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_checkout(tmp_path: Path) -> Path:
    tree = tmp_path / "checkout"
    tree.mkdir()
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    shutil.copytree(PACKAGE, tree / "orchestrator", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


def test_the_import_contract_holds() -> None:
    found = _lint_imports(ROOT)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "BROKEN" not in found.stdout
    assert found.stdout.count("KEPT") >= 4


@pytest.mark.parametrize(
    ("module", "bad_import", "named"),
    [
        # A lower layer reaching up: the loop importing the job runner.
        (
            "agent/loop.py",
            "from ..jobs import runner",
            "orchestrator.agent.loop -> orchestrator.jobs",
        ),
        # The ground floor reaching up, even only for type hints.
        (
            "messages.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .cli import main",
            "orchestrator.messages -> orchestrator.cli",
        ),
        # An optional part reaching up to the evals that use it.
        (
            "report/page.py",
            "from ..eval import spec",
            "orchestrator.report.page -> orchestrator.eval",
        ),
        # The core reaching an optional part other than by name: the fork importing A2A.
        (
            "tasks/fork.py",
            "from .. import a2a",
            "orchestrator.tasks.fork -> orchestrator.a2a",
        ),
        # Two siblings importing each other.
        ("tasks/subagents.py", "from . import fork", "No cycles are allowed in orchestrator.tasks"),
    ],
)
def test_a_broken_layer_fails_the_contract(
    tmp_path: Path, module: str, bad_import: str, named: str
) -> None:
    tree = _copy_checkout(tmp_path)
    target = tree / "orchestrator" / module
    lines = target.read_text().splitlines()
    # After the module docstring and `from __future__`, so the file stays valid Python.
    at = next(i for i, line in enumerate(lines) if line.startswith("from __future__")) + 1
    target.write_text("\n".join([*lines[:at], bad_import, *lines[at:]]) + "\n")
    found = _lint_imports(tree)
    assert found.returncode != 0
    assert "BROKEN" in found.stdout
    assert named in found.stdout


def test_the_skills_room_shares_no_module_name() -> None:
    """A module of `skills/` is named for its concept, and no other room uses the name.

    `sources/mcp/` is left out: it moves out of the core next."""
    room = PACKAGE / "skills"
    mcp = room / "sources" / "mcp"
    names = {p.name for p in room.rglob("*.py") if mcp not in p.parents} - {"__init__.py"}
    elsewhere = {p.name for p in PACKAGE.rglob("*.py") if room not in p.parents}
    assert names & elsewhere == set()


def test_the_top_level_stays_small() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_TOP_LEVEL_MODULES, loose
    rooms = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert {"agent", "models", "skills", "tasks", "jobs", "trace", "security", "cli"} <= rooms
