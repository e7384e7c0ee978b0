"""The public face: one obvious way to run a job, sync wrappers that match their async twins,
the planner's own tools, and old import paths that still work, with a warning."""

from __future__ import annotations

import asyncio
import inspect
import shutil
import warnings
from pathlib import Path

import pytest
import yaml

from orchestrator import Agent, Orchestrator, load_job, run_job, run_job_sync, tool
from orchestrator.models import ScriptedModel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def quickstart(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("out"))
    return tmp_path / "examples" / "quickstart.yaml"


def test_a_job_runs_without_being_named_twice(tmp_path: Path) -> None:
    job = load_job(quickstart(tmp_path))
    first = Orchestrator.from_job(job).run_job_sync(trace=tmp_path / "a.jsonl")
    second = run_job_sync(job, trace=tmp_path / "b.jsonl")
    assert first.status == second.status == "completed"
    assert first.output == second.output and first.output
    assert asyncio.run(run_job(job, trace=tmp_path / "c.jsonl")).output == first.output


def test_run_job_without_a_job_needs_an_orchestrator_made_from_one() -> None:
    planner = Orchestrator(ScriptedModel({"planner": [{"content": "hi"}]}))
    with pytest.raises(ValueError, match="needs a job"):
        planner.run_job_sync()
    assert planner.run_sync("Say hi.").output == "hi"


def test_no_run_returns_a_type_that_depends_on_its_arguments() -> None:
    """One return type per call: a goal gives a RunResult, a job a JobResult."""
    hints = {
        call: inspect.signature(call).return_annotation
        for call in (Orchestrator.run, Orchestrator.run_sync, Agent.run, Agent.run_sync)
    }
    assert all("|" not in str(hint) and "JobResult" not in str(hint) for hint in hints.values())
    for call in (Orchestrator.run_job, Orchestrator.run_job_sync, run_job_sync):
        assert "JobResult" in str(inspect.signature(call).return_annotation)


def test_every_sync_wrapper_takes_its_async_twins_parameters() -> None:
    pairs = [
        (Agent.run, Agent.run_sync),
        (Orchestrator.run, Orchestrator.run_sync),
        (Orchestrator.run_job, Orchestrator.run_job_sync),
        (Orchestrator.resume, Orchestrator.resume_sync),
        (run_job, run_job_sync),
    ]
    for twin, wrapper in pairs:
        assert list(inspect.signature(twin).parameters) == list(
            inspect.signature(wrapper).parameters
        ), wrapper.__qualname__


async def test_every_sync_wrapper_refuses_a_running_event_loop(tmp_path: Path) -> None:
    job = load_job(quickstart(tmp_path))
    planner = Orchestrator.from_job(job)
    calls = [
        lambda: planner.run_sync("Go."),
        lambda: planner.run_job_sync(),
        lambda: planner.run_job_sync(job),
        lambda: run_job_sync(job),
        lambda: Orchestrator.resume_sync(tmp_path / "none.jsonl"),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="running event loop"):
            call()


def test_the_planner_takes_tools_of_its_own() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: the first
            b: the second
        """
        return a + b

    script = {
        "planner": [
            {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            {"content": "5"},
        ]
    }
    model = ScriptedModel(script)
    result = Orchestrator(model, tools=[add]).run_sync("What is 2 + 3?")
    assert result.output == "5"
    assert [m.content for m in result.messages if m.role == "tool"] == ["5"]
    assert "add" in [t.name for t in model.requests[0].tools]


def test_what_the_readme_and_the_docs_import_can_be_imported() -> None:
    root = Path(__file__).resolve().parents[1]
    lines = {
        line
        for document in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
        for line in document.read_text().splitlines()
        if line.startswith("from orchestrator") and not line.endswith("(")
    }
    assert "from orchestrator import Agent, tool" in lines  # README's
    assert "from orchestrator import Orchestrator, load_job, run_job_sync" in lines  # the API's
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for line in sorted(lines):
            exec(line, {})  # noqa: S102 - the documents' own import lines


def test_a_spec_script_can_drive_a_job_and_the_api_alike(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("name: j\nmodel: scripted:s.yaml\ngoal: Say hi.\n")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"goal": [{"content": "hi"}]}))
    assert run_job_sync(load_job(tmp_path / "job.yaml")).output == "hi"
