"""The models of a job spec: mappings, aliases, per-step models, overrides and `.env` keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from provider_server import ProviderServer
from trace_lines import trace_lines

from orchestrator import Orchestrator
from orchestrator.jobs import SpecError, load_job, parse_model_options

KEY = "sk-from-dotenv-0123456789"


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems(path: Path, **overrides: object) -> str:
    with pytest.raises(SpecError) as caught:
        load_job(path, **overrides)
    return str(caught.value)


def test_a_model_mapping_is_validated_with_field_paths(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: {name: openai-compatible:q, base_url: http://127.0.0.1:1/v1, timeout: 0,
                stremm: false}
        goal: g
        """,
    )
    text = problems(path)
    assert "model.timeout: expected a number above 0.0, got the number 0" in text
    assert "model.stremm: unknown field 'stremm' (did you mean 'stream'?)" in text
    path.write_text("name: t\nmodel: {name: openai:gpt-4o, api_key: sk-do-not-write-me}\ngoal: g\n")
    text = problems(path)
    assert "model.api_key: a key does not belong in a file that may be shared" in text
    assert "(api_key_env: MY_KEY)" in text and "sk-do-not-write-me" not in text


def test_aliases_of_the_spec_and_per_step_models(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: strong
        models:
          strong: {name: openai-compatible:big, base_url: "http://127.0.0.1:1/v1"}
          cheap: {name: strong, max_output_tokens: 256}
        steps:
          - {id: a, model: cheap, task: x}
          - {id: b, model: {name: cheap, stream: false}, task: y}
          - {id: c, model: inherit, task: z}
          - {id: d, model: chep, task: w}
        """,
    )
    assert "steps[3].model: unknown model 'chep' (did you mean 'cheap'?)" in problems(path)
    path.write_text(path.read_text().replace("model: chep, ", ""))

    job = load_job(path)

    assert job.model.name == "openai-compatible:big"
    a, b, c, _ = job.steps
    assert (a.model.name, a.model.max_output_tokens, a.model.base_url) == (
        "openai-compatible:big",
        256,
        "http://127.0.0.1:1/v1",
    )
    assert (b.model.max_output_tokens, b.model.stream) == (256, False)
    assert c.model is None


def test_model_overrides_replace_the_name_and_settings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: {name: openai-compatible:a, base_url: "http://127.0.0.1:1/v1", stream: false}
        goal: g
        """,
    )
    same = load_job(path, model="openai-compatible:b", model_options={"timeout": 30})
    assert (same.model.name, same.model.stream, same.model.timeout) == (
        "openai-compatible:b",
        False,
        30,
    )
    other = load_job(path, model="ollama:qwen3:8b")
    assert other.model.name == "ollama:qwen3:8b" and other.model.base_url is None
    assert "--model-option stremm: unknown field" in problems(path, model_options={"stremm": 1})


def test_model_option_values_read_as_yaml() -> None:
    options = parse_model_options(["stream=false", "timeout=120", "extra_body={seed: 7}", "x="])
    assert options == {"stream": False, "timeout": 120, "extra_body": {"seed": 7}, "x": ""}


def test_each_step_runs_on_its_own_model(tmp_path: Path) -> None:
    write(tmp_path, "'*': [{content: from the job's model}]\n", "job-script.yaml")
    # Both steps that name it share one model, as all steps share the job's: two turns.
    turn = "{content: from the step's model}"
    write(tmp_path, f"'*': [{turn}, {turn}]\n", "step-script.yaml")
    path = write(
        tmp_path,
        """\
        name: t
        model: scripted:job-script.yaml
        steps:
          - {id: own, model: scripted:step-script.yaml, task: x}
          - {id: plain, task: y}
          - {id: planned, planner: true, model: scripted:step-script.yaml, task: z}
        output: plain
        """,
    )
    job = load_job(path)

    result = Orchestrator.from_job(job).run_job_sync(job)

    outputs = {step.id: step.output for step in result.steps}
    assert outputs == {
        "own": "from the step's model",
        "plain": "from the job's model",
        "planned": "from the step's model",
    }


def test_a_key_in_a_dotenv_file_beside_the_spec_reaches_the_model_not_the_trace(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text(f"LOCAL_LLM={KEY}\n")
    reply = {"content": f"I was called with {KEY}."}
    with ProviderServer({"*": [reply]}, api_key=KEY) as server:
        path = write(
            tmp_path,
            f"""\
            name: t
            model: {{name: openai-compatible:m, base_url: "{server.openai_url}",
                    api_key_env: LOCAL_LLM, stream: false}}
            goal: Say hello.
            """,
        )
        job = load_job(path)
        result = Orchestrator.from_job(job).run_job_sync(job, trace=tmp_path / "t.jsonl")

    assert result.status == "completed"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "LOCAL_LLM" not in os.environ and job.dotenv == {"LOCAL_LLM": KEY}
    trace = (tmp_path / "t.jsonl").read_text()
    assert KEY not in trace and "I was called with [REDACTED]." in trace


def test_the_real_environment_wins_over_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-the-file-0123456789\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-0123456789")
    path = write(tmp_path, "name: t\nmodel: openai:gpt-4o-mini\ngoal: g\n")

    orchestrator = Orchestrator.from_job(load_job(path))

    assert orchestrator.model.connection._key == "sk-the-real-0123456789"


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_the_command_line_says_which_variable_to_set(tmp_path: Path) -> None:
    write(tmp_path, "name: t\nmodel: haiku\ngoal: g\n")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}

    done = cli("run", "job.yaml", cwd=tmp_path, env=env)

    assert done.returncode == 2
    assert "anthropic: no API key: set ANTHROPIC_API_KEY in the environment or in a .env" in (
        done.stderr
    )
    assert "api_key=" not in done.stderr


@pytest.mark.slow
def test_the_command_line_reaches_a_local_server_with_streaming_off(tmp_path: Path) -> None:
    with ProviderServer({"*": [{"content": "served whole"}] * 2}) as server:
        write(
            tmp_path,
            f"""\
            name: local
            model: {{name: openai-compatible:m, base_url: "{server.openai_url}", stream: false}}
            goal: Say hello.
            """,
        )
        done = cli(
            "run", "job.yaml", "--json", "--trace", "t.jsonl", cwd=tmp_path, env={**os.environ}
        )
        streamed = cli(
            "run",
            "job.yaml",
            "--model-option",
            "stream=true",
            "--quiet",
            cwd=tmp_path,
            env={**os.environ},
        )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "served whole"
    assert [("stream" in body) for body in server.bodies()] == [False, True]
    assert streamed.stdout == "served whole\n"
    assert [e["type"] for e in trace_lines(tmp_path / "t.jsonl")][-1] == "job_end"
