"""Bad input at the command line: a clear error and an exit code, never a Python traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines

GOOD_JOB = "name: x\nmodel: scripted:script.yaml\ngoal: Say hi.\n"
GOOD_SCRIPT = "goal: [{content: hi}]\n"


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout


BROKEN_JOB = b"name: x\nmodel: scripted:script.yaml\ngoal: \xff\xfe hi\n"
BOTH = ("run", "validate")


@pytest.mark.parametrize(
    ("job", "script", "commands", "message"),
    [
        (BROKEN_JOB, GOOD_SCRIPT.encode(), BOTH, "not UTF-8"),
        (bytes(range(256)), GOOD_SCRIPT.encode(), BOTH, "not UTF-8"),
        (GOOD_JOB.encode(), b"\xff\xfe\x00\x01binary", ("run",), "is not UTF-8 text"),
    ],
    ids=["spec-not-utf8", "spec-binary", "script-not-utf8"],
)
@pytest.mark.slow
def test_files_that_are_not_text(
    tmp_path: Path, job: bytes, script: bytes, commands: tuple[str, ...], message: str
) -> None:
    (tmp_path / "job.yaml").write_bytes(job)
    (tmp_path / "script.yaml").write_bytes(script)
    for command in commands:
        done = orchestrator(command, "job.yaml", cwd=tmp_path)
        no_traceback(done)
        assert done.returncode == 2
        assert message in done.stderr


@pytest.mark.slow
def test_a_skill_file_that_is_not_text_is_left_out_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "skills" / "bin").mkdir(parents=True)
    (tmp_path / "skills" / "bin" / "SKILL.md").write_bytes(b"---\nname: bin\n\xff\xfe\x00---\n")
    (tmp_path / "job.yaml").write_text(GOOD_JOB + "skills: [./skills]\n")
    (tmp_path / "script.yaml").write_text(GOOD_SCRIPT)

    listed = orchestrator("skills", "list", "--skills", "skills", cwd=tmp_path)
    ran = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    for done in (listed, ran):
        no_traceback(done)
        assert "skills/bin" in done.stderr
    assert ran.returncode == 0
    assert ran.stdout.strip() == "hi"


@pytest.mark.parametrize("where", ["a-folder", "/proc/no/such/place.jsonl"])
@pytest.mark.slow
def test_a_trace_that_cannot_be_written(tmp_path: Path, where: str) -> None:
    (tmp_path / "job.yaml").write_text(GOOD_JOB)
    (tmp_path / "script.yaml").write_text(GOOD_SCRIPT)
    (tmp_path / "a-folder").mkdir()
    done = orchestrator("run", "job.yaml", "--trace", where, cwd=tmp_path)

    no_traceback(done)
    assert done.returncode == 2
    assert "cannot write the trace to" in done.stderr


@pytest.mark.slow
def test_validate_reports_what_would_certainly_fail(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "counter.md").write_text(
        "---\nname: counter\ndescription: Counts.\nmodel: opneai:gpt-4o-mini\n"
        "skills: [text-statz]\n---\nCount.\n"
    )
    (agents / "spare.md").write_text(
        "---\nname: spare\ndescription: Unused.\nmodel: nosuchalias\n---\nWait.\n"
    )
    (tmp_path / "job.yaml").write_text(
        "name: x\nmodel: scripted:script.yaml\nsubagents: [./agents]\n"
        "permissions: {workspace: ./missing}\n"
        "steps:\n  - {id: count, agent: counter, task: Count.}\n"
    )
    (tmp_path / "script.yaml").write_text("count: [{content: '3'}]\n")
    for command in ("validate", "run"):
        done = orchestrator(command, "job.yaml", cwd=tmp_path)
        no_traceback(done)
        assert done.returncode == 2
        assert (
            "permissions.workspace: the folder" in done.stderr and "does not exist" in done.stderr
        )
        assert "unknown model provider 'opneai' (did you mean 'openai'?)" in done.stderr
        assert "skills: 'text-statz' names no skill" in done.stderr
        assert (
            "warning: sub-agent 'spare'" in done.stderr
            and "unknown model 'nosuchalias'" in done.stderr
        )
    assert not list(tmp_path.glob(".orchestrator/runs/*"))  # run started nothing


def test_a_misspelt_skill_in_a_step_is_a_validate_error_with_the_close_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "skills" / "loud").mkdir(parents=True)
    (tmp_path / "skills" / "loud" / "SKILL.md").write_text(
        "---\nname: loud\ndescription: Says things loudly.\n---\nShout.\n"
    )
    (tmp_path / "job.yaml").write_text(
        "name: x\nmodel: scripted:script.yaml\nskills: [./skills]\n"
        "steps:\n  - {id: a, task: Shout., skills: [luod]}\n"
    )
    (tmp_path / "script.yaml").write_text("a: [{content: hi}]\n")
    for command in ("validate", "run"):
        done = orchestrator(command, "job.yaml", cwd=tmp_path)
        no_traceback(done)
        assert done.returncode == 2, done.stderr
        assert "steps[0].skills: 'luod' names no skill (did you mean 'loud'?)" in done.stderr
    assert not list(tmp_path.glob(".orchestrator/runs/*"))  # run started nothing


@pytest.mark.parametrize(
    ("spec", "flags", "field"),
    [
        ("model: opnai:gpt-4o\ngoal: Hi.\n", (), "model"),
        (
            "model: scripted:script.yaml\nsteps:\n  - {id: a, task: Hi., model: opnai:gpt-4o}\n",
            (),
            "steps[0].model",
        ),
        (GOOD_JOB.removeprefix("name: x\n"), ("--model", "opnai:gpt-4o"), "--model opnai:gpt-4o"),
    ],
    ids=["job", "step", "flag"],
)
def test_an_unknown_model_provider_is_a_validate_error_naming_its_field(
    tmp_path: Path, spec: str, flags: tuple[str, ...], field: str
) -> None:
    (tmp_path / "job.yaml").write_text("name: x\n" + spec)
    (tmp_path / "script.yaml").write_text(GOOD_SCRIPT)
    for command in ("validate", "run"):
        done = orchestrator(command, "job.yaml", *flags, cwd=tmp_path)
        no_traceback(done)
        assert done.returncode == 2, done.stderr
        assert f"{field}: unknown model provider 'opnai' (did you mean 'openai'?)" in done.stderr


@pytest.mark.parametrize("quiet", [False, True])
@pytest.mark.slow
def test_a_sub_agent_that_cannot_start_says_why(tmp_path: Path, quiet: bool) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "broken.md").write_text(
        "---\nname: broken\ndescription: d\nmodel: scripted:no-such-script.yaml\n---\nWork.\n"
    )
    (tmp_path / "job.yaml").write_text(
        "name: x\nmodel: scripted:script.yaml\nsubagents: [./agents]\n"
        "steps:\n  - {id: first, agent: broken, task: Work.}\n"
        "  - {id: second, depends_on: [first], task: More.}\n"
    )
    (tmp_path / "script.yaml").write_text("second: [{content: never}]\n")
    done = orchestrator("run", "job.yaml", *(["--quiet"] if quiet else []), cwd=tmp_path)

    no_traceback(done)
    assert done.returncode == 3
    assert "step first (broken): error:" in done.stderr
    assert "no-such-script.yaml" in done.stderr
    assert "step second" not in done.stderr  # skipped for its dependency: not a reason of its own


@pytest.mark.parametrize("content", ['{"a": 1}\n', "garbage\n", ""])
@pytest.mark.slow
def test_trace_show_on_a_file_that_is_not_a_trace(tmp_path: Path, content: str) -> None:
    (tmp_path / "notes.jsonl").write_text(content)
    done = orchestrator("trace", "show", "notes.jsonl", cwd=tmp_path)

    no_traceback(done)
    assert done.returncode == 2
    assert "is not a trace: it holds no events" in done.stderr


@pytest.mark.parametrize("flags", [(), ("--stream",)], ids=["progress", "stream"])
@pytest.mark.slow
def test_a_reader_that_goes_away_never_changes_the_run(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    import shutil
    import sys

    examples = Path(__file__).resolve().parents[1] / "examples"
    shutil.copytree(examples, tmp_path / "examples", ignore=shutil.ignore_patterns("out"))
    trace = tmp_path / "t.jsonl"
    # `orchestrator run ... 2>&1 | head -0`: both pipes closed before the run writes a line.
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "examples/quickstart.yaml"]
        + ["--trace", str(trace), *flags],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    process.stderr.close()
    assert process.wait(timeout=120) == 0
    ends = [e for e in trace_lines(trace) if e["type"] in ("task_end", "run_end")]
    assert ends and {e["status"] for e in ends} == {"completed"}, ends
