"""`mypy --strict` on the whole package (the [tool.mypy] section of pyproject.toml): typed all
the way down. `.ci/run` runs the same check; this test keeps it in the test run too."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from user_mypy import error_lines, mypy_on

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_package_passes_mypy_strict() -> None:
    command = [sys.executable, "-m", "mypy", "--strict", "orchestrator"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_a_pydantic_constructor_is_checked_with_its_fields_types(tmp_path: Path) -> None:
    """pydantic's mypy plugin checks constructors (`init_typed`): a result built with wrong
    types is a type error, not a value that passes until run time."""
    (tmp_path / "wrong.py").write_text(
        "from orchestrator import RunResult\n\n"
        'RunResult(agent=1, status="nonsense", steps="many")\n'
    )
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--strict", "--no-incremental", "wrong.py"]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    for field in ('"agent"', '"status"', '"steps"'):
        assert f'Argument {field} to "RunResult"' in done.stdout, done.stdout


def _editable_here() -> bool:
    """Whether the installed package is this checkout, installed editable (as README says)."""
    try:
        found = importlib.metadata.distribution("orchestrator").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return False
    url = json.loads(found or "{}")
    return bool(url.get("dir_info", {}).get("editable")) and url.get("url") == ROOT.as_uri()


@pytest.mark.slow
def test_an_editable_install_is_seen_by_mypy(tmp_path: Path) -> None:
    """`pip install -e .` puts the checkout on the path in a way type checkers read too: a
    user's code outside the checkout is checked against the package's own types."""
    if not _editable_here():
        pytest.skip("the package is not installed editable from this checkout")
    (tmp_path / "mine.py").write_text(
        "from orchestrator import Agent, RunResult\n\n"
        "def answer(result: RunResult) -> int:\n"
        "    return result.status\n"
    )
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "mine.py"]
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env
    )
    assert "Cannot find implementation" not in done.stdout, done.stdout
    assert 'Incompatible return value type (got "Literal[' in done.stdout, done.stdout


@pytest.mark.slow
def test_a_tool_keeps_its_functions_signature_for_mypy(tmp_path: Path) -> None:
    """`@tool` (and `@tool(...)`) returns a tool typed by its function: calling it directly
    is checked as a call of the function."""
    (tmp_path / "calls.py").write_text(
        "from orchestrator import tool\n\n\n"
        "@tool\ndef add(a: int, b: int) -> int:\n"
        '    """Add."""\n    return a + b\n\n\n'
        '@tool(name="twice")\ndef double(a: int) -> int:\n'
        '    """Double."""\n    return 2 * a\n\n\n'
        "total: int = add(1, 2) + double(3)\n"
        'wrong = add("a", "b")\n'
        "text: str = double(1)\n"
    )
    done = mypy_on(tmp_path, "calls.py")
    lines = error_lines(done)
    assert [line.split(":")[1] for line in lines] == ["17", "17", "18"], done.stdout
    assert 'incompatible type "str"; expected "int"' in lines[0]
    assert 'expression has type "int", variable has type "str"' in lines[2]


@pytest.mark.slow
def test_mypy_checks_an_event_s_fields_where_it_is_emitted(tmp_path: Path) -> None:
    """`trace.emit(Kind, ...)` is checked as the kind's constructor: a required field left
    out, a wrong type or a misspelt field is an error before anything runs."""
    (tmp_path / "events.py").write_text(
        "from orchestrator import Trace\n"
        "from orchestrator.events import ToolEnd, ToolStart\n\n"
        "trace = Trace()\n"
        'started = trace.emit(ToolStart, agent="a", call_id="c1", name="read")\n'
        'trace.emit(ToolStart, agent="a", name="read")\n'
        'trace.emit(ToolEnd, agent="a", call_id="c1", name="read", duration_ms="fast")\n'
        'trace.emit(ToolStart, agent="a", call_id="c1", name="read", arguments={})\n'
        "call_id: str = started.call_id if started is not None else ''\n"
    )
    done = mypy_on(tmp_path, "events.py")
    lines = error_lines(done)
    assert [line.split(":")[1] for line in lines] == ["6", "7", "8"], done.stdout
    assert 'Missing named argument "call_id"' in lines[0]
    assert 'incompatible type "str"' in lines[1]
    assert 'Unexpected keyword argument "arguments"' in lines[2]
