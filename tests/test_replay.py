"""Record once, replay forever: a run against a real (local) server replays with no server.

The recording is a job run by `orchestrator run` against tests/provider_server.py over HTTP;
the replay is the same job with `--model replay:TRACE`, the server gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from provider_server import ProviderServer
from trace_lines import trace_lines

from orchestrator import Orchestrator, load_job
from orchestrator.errors import ConfigError
from orchestrator.models import ReplayModel, resolve_model

KEY = "sk-test-replay-0123456789"
JOB = """\
name: notes
model: openai:test-model
budget: {max_steps: 5}
permissions: {workspace: .}
steps:
  - {id: read, task: "Read notes.txt and say what it says."}
  - {id: brief, depends_on: [read], task: "Brief me: {steps.read.output}"}
"""
SERVER_SCRIPT = {
    "*": [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]},
        {"tool_calls": [{"name": "files__read_file", "arguments": {"path": "notes.txt"}}]},
        {"content": "The notes say: ship on Friday."},
        {"content": "Brief: we ship on Friday."},
    ]
}


def run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """The job run once against the local server: its trace."""
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "notes.txt").write_text("Ship on Friday.\n")
    with ProviderServer(SERVER_SCRIPT, usage=(321, 12)) as server:
        env = {**clean_env(), "OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": KEY}
        done = run("run", "job.yaml", "--trace", "recorded.jsonl", "--json", cwd=tmp_path, env=env)
        assert len(server.requests) == 4
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "Brief: we ship on Friday."
    return tmp_path / "recorded.jsonl"


@pytest.mark.slow
def test_a_recorded_run_replays_with_no_server(recorded: Path) -> None:
    folder = recorded.parent
    env = clean_env()  # no key, no URL: nothing to reach
    done = run(
        "run", "job.yaml", "--model", "replay:recorded.jsonl", "--trace", "replay.jsonl",
        "--json", cwd=folder, env=env,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["output"] == "Brief: we ship on Friday."
    original = [e for e in trace_lines(recorded) if e["type"] in ("message", "model_call")]
    replayed = [
        e for e in trace_lines(folder / "replay.jsonl") if e["type"] in ("message", "model_call")
    ]
    assert [e.get("message") for e in replayed] == [e.get("message") for e in original]
    assert [e.get("usage") for e in replayed] == [e.get("usage") for e in original]
    assert {e["usage"]["input_tokens"] for e in replayed if e["type"] == "model_call"} == {321}
    assert {e["model"] for e in replayed if e["type"] == "model_call"} == {
        f"replay:{recorded.resolve()}"
    }


@pytest.mark.slow
def test_a_request_that_departs_from_the_recording_fails_clearly(recorded: Path) -> None:
    folder = recorded.parent
    (folder / "notes.txt").write_text("Ship on Monday.\n")  # the tool's result changes

    done = run(
        "run", "job.yaml", "--model", "replay:recorded.jsonl", "--json", "--quiet",
        cwd=folder, env=clean_env(),
    )  # fmt: skip

    assert done.returncode == 3
    read = json.loads(done.stdout)["steps"][0]
    assert read["status"] == "error"
    assert "agent 'read', turn 3: message 6 (tool) departs from the recording" in read["reason"]
    # Where the text first differs, and both sides from there.
    assert "differs from character 9 (line 1)" in read["reason"]
    assert 'recorded "Ship on Friday.\\n", got "Ship on Monday.\\n"' in read["reason"]


def test_replay_in_a_test_of_your_own(recorded: Path, tmp_path: Path) -> None:
    """The example of docs/resume.md: a recorded run as a deterministic fixture."""
    job = load_job(recorded.parent / "job.yaml", model=f"replay:{recorded}")
    result = Orchestrator.from_job(job).run_job_sync(job, trace=tmp_path / "replay.jsonl")

    assert result.status == "completed"
    assert result.output == "Brief: we ship on Friday."
    assert result.step("read").steps == 3


@pytest.mark.slow
def test_replay_refuses_what_it_cannot_answer(recorded: Path, tmp_path: Path) -> None:
    model = resolve_model(f"replay:{recorded}")
    assert isinstance(model, ReplayModel) and set(model.agents) >= {"read", "brief"}
    with pytest.raises(ConfigError, match="cannot read the recording"):
        resolve_model(f"replay:{tmp_path / 'missing.jsonl'}")
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"seq": 1, "ts": 1, "agent": "job", "type": "job_start"}\n')
    with pytest.raises(ConfigError, match="no model responses"):
        ReplayModel(empty)
