"""Command-line habits a newcomer meets in the first hour: README's two set-up commands,
Ctrl-C at start-up, commands printed to be copied, `report last`, `ask` runs named in `trace
list`, preloaded skills in `trace show`, and `skills show` that suggests only close names."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_process import orchestrator
from test_cli_run import make_job

ROOT = Path(__file__).resolve().parents[1]
SET_UP = [
    "pip install -e . && orchestrator run examples/quickstart.yaml",
    'pip install -e ".[dev]" && pytest',
]
"""What a fresh clone runs, as README gives it: install and run the example job offline;
install the development tools and run the tests."""


def test_the_readme_sets_up_a_fresh_clone_with_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in SET_UP:
        assert f"\n```\n{command}\n```\n" in readme, command
    # CI installs and tests exactly as README says.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert SET_UP[1] in ci
    # The first command's run is README's first block, run and compared by
    # tests/test_readme_blocks.py.
    assert readme.index("$ orchestrator run examples/quickstart.yaml") < readme.index(SET_UP[0])


def waits_on_stdin(pid: int) -> bool:
    """Whether the process sleeps reading a pipe (its standard input)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip().endswith("pipe_read")
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs Linux's /proc")
def test_ctrl_c_during_start_up_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    # `run -` reads its spec from standard input: the process is still starting when the
    # interrupt comes, before any run began.
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "-"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not waits_on_stdin(process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert waits_on_stdin(process.pid), "the command never reached its spec"
        os.kill(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 130
    assert err == "interrupted\n"
    assert out == ""


def test_printed_commands_are_shell_quoted(tmp_path: Path) -> None:
    created = orchestrator("init", "another job", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    (line,) = [ln for ln in created.stdout.splitlines() if ln.startswith("run it")]
    command = line.partition(": ")[2]
    assert shlex.split(command) == ["orchestrator", "run", "another job/job.yaml"]
    spec = (tmp_path / "another job" / "job.yaml").read_text()
    assert "orchestrator run 'another job/job.yaml'" in spec

    done = orchestrator("run", "another job/job.yaml", "--trace", "my runs/t 1.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (report,) = [ln for ln in done.stderr.splitlines() if ln.startswith("report: ")]
    words = shlex.split(report.partition(": ")[2])
    assert words[:2] == ["orchestrator", "report"]
    assert Path(words[2]) == (tmp_path / "my runs" / "t 1.jsonl").resolve()


def test_report_last_writes_the_newest_runs_page(tmp_path: Path) -> None:
    nothing = orchestrator("report", "last", cwd=tmp_path)
    assert nothing.returncode == 2
    assert f"no runs in {(tmp_path / '.orchestrator' / 'runs').resolve()}" in nothing.stderr

    make_job(tmp_path, "a: [{content: hi}]\n", "  - {id: a, task: x}\n")
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 0
    done = orchestrator("report", "last", "-o", "page.html", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    (trace,) = (tmp_path / ".orchestrator" / "runs").glob("*.jsonl")
    page = (tmp_path / "page.html").read_text()
    assert trace.stem.split("-t")[0] in page  # the run id of the newest run


def test_trace_list_names_an_ask_run_by_its_goal(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("planner: [{content: Hello.}]\n")
    asked = orchestrator("ask", "Say hello to the world.", "-m", "scripted:s.yaml", cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr

    listed = orchestrator("trace", "list", cwd=tmp_path)
    (row,) = listed.stdout.splitlines()[1:]
    assert '"Say hello to the world."' in row and "completed" in row
    (run,) = [
        json.loads(line)
        for line in orchestrator("trace", "list", "--json", cwd=tmp_path).stdout.splitlines()
    ]
    assert (run["job"], run["goal"]) == (None, "Say hello to the world.")


def test_trace_show_lists_the_skills_an_agent_started_with(tmp_path: Path) -> None:
    make_job(
        tmp_path,
        "a: [{content: done}]\n",
        "  - {id: a, task: x, skills: [files]}\n",
    )
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 0

    shown = orchestrator("trace", "show", "last", cwd=tmp_path)
    (line,) = [ln for ln in shown.stdout.splitlines() if ln.startswith("a  [")]
    assert "preloaded: files" in line
    summary = json.loads(orchestrator("trace", "show", "last", "--json", cwd=tmp_path).stdout)
    (agent,) = [a for a in summary["agents"] if a["path"] == "a"]
    assert agent["preloaded"] == ["files"] and agent["skills"] == []


def test_skills_show_suggests_only_close_names(tmp_path: Path) -> None:
    close = orchestrator("skills", "show", "fils", cwd=tmp_path)
    far = orchestrator("skills", "show", "data-analysiss", cwd=tmp_path)

    assert "Did you mean: files?" in close.stderr
    assert close.returncode == far.returncode == 1
    assert "Did you mean" not in far.stderr
