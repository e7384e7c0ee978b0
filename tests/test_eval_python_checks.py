"""An eval's `python:` checks run in a sandboxed process, never in the orchestrator's own.

The hostile eval ships a `checks.py` that writes a marker beside the eval's folder when it is
imported and again when its check is called. Run in the sandbox it leaves no marker on the
host, and its verdict (read from the run's workspace) still comes back; the eval says so
before the checks run. Where no sandbox can run, such an eval is refused before anything
runs, unless asked to run its checks unconfined, which it then says loudly.
"""

from __future__ import annotations

from pathlib import Path

from cli_process import orchestrator
from eval_factory import eval_folder, twelve, write_eval
from test_sandbox import needs_bubblewrap

from orchestrator.eval import EvalOptions, load_eval, run_eval_sync
from orchestrator.security.sandbox import INSTALL_BUBBLEWRAP

HOSTILE_CHECKS = """\
from pathlib import Path
MARKERS = Path({markers!r})
def mark(name):
    try:
        (MARKERS / name).write_text("ran on the host")
    except OSError:
        pass
mark("imported")
def counted(run):
    mark("called")
    count = (run.workspace / "out" / "count.txt").read_text().strip()
    return count == "12", f"count {{count}}"
"""


def hostile_eval(tmp_path: Path) -> tuple[Path, Path]:
    """An eval whose check module writes markers into `markers` (beside its folder)."""
    root = eval_folder(tmp_path / "eval")
    markers = tmp_path / "markers"
    markers.mkdir()
    (root / "checks.py").write_text(HOSTILE_CHECKS.format(markers=str(markers)))
    scorers = [{"name": "counted", "python": "checks.py:counted"}]
    return write_eval(root, {"cases": [twelve()], "scorers": scorers}), markers


@needs_bubblewrap
def test_a_check_runs_sandboxed_leaves_no_marker_and_its_verdict_comes_back(
    tmp_path: Path,
) -> None:
    path, markers = hostile_eval(tmp_path)

    result = run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "out"))

    assert list(markers.iterdir()) == []
    [counted] = [s for s in result.lines[0]["scores"] if s["name"] == "counted"]
    assert counted["passed"] and counted["reason"] == "count 12"


@needs_bubblewrap
def test_the_eval_command_says_it_runs_python_checks_and_where(tmp_path: Path) -> None:
    path, markers = hostile_eval(tmp_path)

    done = orchestrator("eval", path, "--out", tmp_path / "out", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    [note] = [line for line in done.stderr.splitlines() if "python: checks" in line]
    assert note.startswith("note: ") and str(path.parent / "checks.py") in note
    assert "sandboxed process (bubblewrap)" in note
    assert list(markers.iterdir()) == []


def test_without_a_sandbox_an_eval_with_python_checks_is_refused(tmp_path: Path) -> None:
    path, markers = hostile_eval(tmp_path)
    empty = tmp_path / "empty-path"
    empty.mkdir()

    done = orchestrator(
        "eval", path, "--out", tmp_path / "out", cwd=tmp_path, env={"PATH": str(empty)}
    )

    assert done.returncode == 2, done.stderr
    assert "checks.py" in done.stderr and INSTALL_BUBBLEWRAP in done.stderr
    assert "--unconfined-checks" in done.stderr
    assert list(markers.iterdir()) == []
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_asked_to_run_checks_unconfined_it_does_and_says_so(tmp_path: Path) -> None:
    path, markers = hostile_eval(tmp_path)
    empty = tmp_path / "empty-path"
    empty.mkdir()

    done = orchestrator(
        "eval",
        path,
        "--out",
        tmp_path / "out",
        "--unconfined-checks",
        cwd=tmp_path,
        env={"PATH": str(empty)},
    )

    assert done.returncode == 0, done.stderr
    [warning] = [line for line in done.stderr.splitlines() if "python: checks" in line]
    assert warning.startswith("warning: ") and "UNCONFINED" in warning
    assert sorted(p.name for p in markers.iterdir()) == ["called", "imported"]
