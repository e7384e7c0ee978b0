"""One check at the one entry: a job that would certainly fail is refused the same way, in the
same words, by every door (`run`, `validate`, the Python API, `run-batch`, `serve`, `eval`
and `resume`), before any of its work runs; and `eval` runs multi-step jobs as `run` does."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator

from orchestrator import Orchestrator, load_job, run_job_sync
from orchestrator.cli import main
from orchestrator.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "a: [{content: done}]\n"
GOOD = "name: door\nmodel: scripted:script.yaml\nsteps:\n  - {id: a, task: Say done.}\n"
BAD = {
    "unknown step skill": (
        GOOD.replace("task: Say done.}", "task: Say done., skills: [filez]}"),
        re.escape("steps[0].skills: 'filez' names no skill (did you mean 'files'?)"),
    ),
    "missing workspace": (
        GOOD + "permissions: {workspace: ./nowhere}\n",
        r"permissions\.workspace: the folder /\S+/nowhere does not exist",
    ),
    "unpriced model under a money cap": (
        GOOD + "budget: {max_cost_usd: 1.0}\n",
        r"budget\.max_cost_usd: the budget caps money, but model 'scripted:/\S+' has no price",
    ),
}
CASES = pytest.mark.parametrize("kind", list(BAD))


def write_job(folder: Path, spec: str) -> Path:
    (folder / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    job = folder / "job.yaml"
    job.write_text(spec, encoding="utf-8")
    return job


def refused(stderr: str, problem: str) -> None:
    """The one error line every door prints: the spec file, then the problem."""
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and "job.yaml: " in lines[0], stderr
    assert re.search(problem, lines[0]), stderr


def no_trace_written(folder: Path) -> None:
    """Refused before it starts: no run left a trace."""
    assert not list(folder.rglob("*.jsonl")), list(folder.rglob("*.jsonl"))


@CASES
def test_run_and_validate_refuse_it(tmp_path: Path, kind: str) -> None:
    spec, problem = BAD[kind]
    write_job(tmp_path, spec)
    for command in ("validate", "run"):
        done = orchestrator(command, "job.yaml", cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        refused(done.stderr, problem)
    no_trace_written(tmp_path)


@CASES
def test_the_python_api_refuses_it_before_running(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, problem = BAD[kind]
    monkeypatch.chdir(tmp_path)
    job = load_job(write_job(tmp_path, spec))
    with pytest.raises(SpecError) as module_door:
        run_job_sync(job, trace=tmp_path / "run.jsonl")
    assert re.search(problem, str(module_door.value))
    with pytest.raises(SpecError) as builder_door:
        Orchestrator.from_job(job)
    assert str(builder_door.value) == str(module_door.value)
    no_trace_written(tmp_path)


def test_a_job_handed_to_another_orchestrator_is_checked_there(tmp_path: Path) -> None:
    spec, problem = BAD["unknown step skill"]
    good = Orchestrator.from_job(load_job(write_job(tmp_path, GOOD)))
    bad = load_job(write_job(tmp_path, spec))
    with pytest.raises(SpecError, match=r"names no skill"):
        good.run_job_sync(bad, trace=tmp_path / "run.jsonl")
    assert re.search(problem, str(good.preflight(bad).problems[0]))


@CASES
def test_run_batch_refuses_it_before_any_row(tmp_path: Path, kind: str) -> None:
    spec, problem = BAD[kind]
    write_job(tmp_path, spec)
    (tmp_path / "rows.csv").write_text("id\none\ntwo\n", encoding="utf-8")
    done = orchestrator("run-batch", "job.yaml", "--inputs", "rows.csv", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    refused(done.stderr, problem)
    assert not (tmp_path / "rows.results.jsonl").exists()
    no_trace_written(tmp_path)


@CASES
def test_serve_refuses_it_at_start(tmp_path: Path, kind: str) -> None:
    spec, problem = BAD[kind]
    write_job(tmp_path, spec)
    done = orchestrator("serve", "job.yaml", "--port", "0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    refused(done.stderr, problem)
    assert "serving" not in done.stderr


@CASES
def test_eval_refuses_it_before_any_case_runs(tmp_path: Path, kind: str) -> None:
    spec, problem = BAD[kind]
    write_job(tmp_path, spec)
    (tmp_path / "door.eval.yaml").write_text(
        "name: door\njob: job.yaml\ncases: [{id: one}, {id: two}]\nscorers: [{contains: done}]\n",
        encoding="utf-8",
    )
    done = orchestrator("eval", "door.eval.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    refused(done.stderr, problem)
    assert not (tmp_path / "out" / "results.jsonl").exists()
    no_trace_written(tmp_path)


def test_resume_refuses_it_before_running_again(tmp_path: Path) -> None:
    """A run whose step failed, resumed with `--retry-failed` once its workspace is gone."""
    workspace = tmp_path / "data"  # not `work`, which a run makes when it is missing
    workspace.mkdir()
    spec = GOOD + "permissions: {workspace: ./data}\n"
    write_job(tmp_path, spec)
    (tmp_path / "script.yaml").write_text("a: []\n", encoding="utf-8")  # the step errors
    first = orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    shutil.rmtree(workspace)
    again = orchestrator("resume", "run.jsonl", "--retry-failed", cwd=tmp_path)
    assert again.returncode == 2, again.stderr
    refused(again.stderr, r"permissions\.workspace: the folder /\S+/data does not exist")
    written = (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()
    assert sum(json.loads(line)["type"] == "job_start" for line in written) == 1


def test_validate_loads_the_code_of_the_skills_steps_start_with(tmp_path: Path) -> None:
    """A preloaded skill whose tools.py fails to import: a problem under
    `fail_on_skill_error` (as the run would fail), else a warning; `run` refuses it the same
    way before any model call."""
    skill = tmp_path / "skills" / "broken"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: broken\ndescription: Breaks on import.\n---\nUse it.\n", encoding="utf-8"
    )
    (skill / "tools.py").write_text("raise RuntimeError('no module today')\n", encoding="utf-8")
    spec = GOOD.replace("task: Say done.}", "task: Say done., skills: [broken]}")
    write_job(tmp_path, spec + "fail_on_skill_error: true\n")
    for command in ("validate", "run"):
        done = orchestrator(command, "job.yaml", cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        refused(done.stderr, re.escape("steps[0].skills: skill 'broken' failed to load"))
        assert "no module today" in done.stderr
    no_trace_written(tmp_path)

    write_job(tmp_path, spec)  # without fail_on_skill_error: ok, with the warning
    done = orchestrator("validate", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ok: door" in done.stdout
    assert "warning:" in done.stderr and "no module today" in done.stderr


def test_eval_runs_a_multi_step_job_whose_task_uses_step_outputs(tmp_path: Path) -> None:
    """examples/sales-report.yaml: the writer's task holds `{steps.profile.output}`."""
    (tmp_path / "sales.eval.yaml").write_text(
        f"name: sales\njob: {ROOT / 'examples' / 'sales-report.yaml'}\n"
        "cases: [{id: q3}]\n"
        "scorers: [{file: {path: out/report.md}}]\n",
        encoding="utf-8",
    )
    done = orchestrator("eval", "sales.eval.yaml", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert line["status"] == "completed" and line["passed"] is True, line
    assert line["usage"]["total_tokens"] > 0
    assert "error" not in line


def test_an_eval_whose_run_errored_exits_non_zero_min_pass_or_not(tmp_path: Path) -> None:
    """A step that errors (its scripted model has no turn left) is a run that ended in error,
    not one that failed its checks: exit 3, whatever the pass rate."""
    write_job(tmp_path, GOOD)
    (tmp_path / "script.yaml").write_text("a: []\n", encoding="utf-8")
    (tmp_path / "door.eval.yaml").write_text(
        "name: door\njob: job.yaml\ncases: [{id: one}]\nscorers: [{status: failed}]\n",
        encoding="utf-8",
    )
    done = orchestrator("eval", "door.eval.yaml", "--out", "out", "--min-pass", "0", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "1 run ended in error" in done.stderr
    (line,) = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert line["passed"] is True and line["errored"] is True  # its checks passed
    assert line["error"].startswith("step a (")


def test_one_run_reads_its_spec_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`orchestrator run` reads the spec once; the digest `resume` compares is of those bytes."""
    spec = write_job(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []
    real_open = io.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(str(file)).name == "job.yaml" if isinstance(file, str | Path) else False:
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", counting_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    assert main(["run", "job.yaml", "-q", "--trace", "run.jsonl"]) == 0
    assert len(opened) == 1, opened
    monkeypatch.undo()
    lines = (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()
    start = next(json.loads(x) for x in lines if json.loads(x)["type"] == "job_start")
    assert start["spec_sha256"] == hashlib.sha256(spec.read_bytes()).hexdigest()
