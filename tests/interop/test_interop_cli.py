"""Real jobs through the command line, against the real server and model (see conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from interop_server import SEED, LlamaServer, edit_spec, start_server, stop_server
from invariants import check_calls_answered, check_statuses, check_trace
from trace_lines import trace_lines

from orchestrator import rebuild_conversations

pytestmark = pytest.mark.interop
JOB_STATUSES = {"completed", "failed", "budget_exhausted", "cancelled"}
SHAPES = {"no tools", "tools, tool_choice auto", "tools, tool_choice none"}


def orchestrator(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def of_type(events: list[dict], kind: str, agent: str | None = None) -> list[dict]:
    return [e for e in events if e["type"] == kind and agent in (None, e["agent"])]


def test_the_quickstart_with_streaming_off(llama_server: LlamaServer, quickstart: Path) -> None:
    edit_spec(
        quickstart,
        model=llama_server.model(stream=False),
        budget={"max_tokens": 60000, "max_steps": 3, "max_parallel": 2},
    )
    offset = llama_server.log_size()

    done = orchestrator(
        "run", "quickstart.yaml", "--json", "--quiet", "--trace", "t.jsonl", cwd=quickstart.parent
    )

    assert done.returncode in (0, 3, 4), done.stderr
    assert json.loads(done.stdout)["status"] in JOB_STATUSES
    events = check_trace(quickstart.parent / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    assert of_type(events, "model_stream_fallback") == []
    calls = of_type(events, "model_call", "goal")
    (end,) = of_type(events, "run_end", "goal")
    assert 1 <= len(calls) <= 3
    if end["status"] == "max_steps":  # the step cap forced an answer: tools were disabled
        assert calls[-1]["tool_choice"] == "none"


def test_the_quickstart_streamed_falls_back_where_the_server_cannot_stream(
    llama_server: LlamaServer, quickstart: Path
) -> None:
    edit_spec(
        quickstart,
        model=llama_server.model(),  # streaming is on by default
        budget={"max_tokens": 60000, "max_steps": 2, "max_parallel": 2},
    )
    offset = llama_server.log_size()

    done = orchestrator(
        "run", "quickstart.yaml", "--stream", "--quiet", "--trace", "t.jsonl", cwd=quickstart.parent
    )

    assert done.returncode in (0, 3, 4), done.stderr
    events = check_trace(quickstart.parent / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    # The first request offers tools with tool_choice auto, which this server answers with an
    # empty stream: asked again whole, and that shape is sent whole from then on.
    shapes = [e["request"] for e in of_type(events, "model_stream_fallback")]
    assert shapes[0] == "tools, tool_choice auto"
    assert len(shapes) == len(set(shapes)) and set(shapes) <= SHAPES
    (end,) = of_type(events, "run_end", "goal")
    assert done.stdout.rstrip("\n").endswith(end["output"].rstrip("\n"))


FAN_OUT = """\
name: fan-out
model: {model}
models:
  cheap: {cheap}
budget: {{max_steps: 2, max_parallel: 2}}
permissions: {{workspace: .}}
steps:
  - {{id: north, model: cheap, task: "In one sentence: what is the capital of Norway?"}}
  - id: south
    model: {{name: cheap, temperature: 0}}
    task: "In one sentence: what is the capital of Chile?"
  - id: both
    depends_on: [north, south]
    task: "Join the two answers into one line: {{steps.north.output}} / {{steps.south.output}}"
"""


def test_a_fork_of_two_sub_agents_on_a_cheap_model(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    model, cheap = llama_server.model(), llama_server.model(max_output_tokens=32)
    spec = FAN_OUT.format(model=json.dumps(model), cheap=json.dumps(cheap))
    (tmp_path / "fan-out.yaml").write_text(spec, encoding="utf-8")
    offset = llama_server.log_size()

    done = orchestrator(
        "run", "fan-out.yaml", "--json", "--quiet", "--trace", "t.jsonl", cwd=tmp_path
    )

    assert done.returncode in (0, 3, 4), done.stderr
    result = json.loads(done.stdout)
    assert result["status"] in JOB_STATUSES
    events = check_trace(tmp_path / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    (fork,) = of_type(events, "fork", "job")
    assert [t["id"] for t in fork["tasks"]] == ["north", "south", "both"]
    ran = {e["agent"] for e in of_type(events, "run_start")}
    assert {"north", "south"} <= ran
    for step, cap in (("north", 32), ("south", 32), ("both", 96)):
        # Each step's own output cap was sent: its answers (a tool call is generated in parts,
        # each under the cap) are no longer. Every step that ran ends in an answer.
        answers = [
            c for c in of_type(events, "model_call", step) if c["finish_reason"] != "tool_calls"
        ]
        assert answers or step not in ran, step
        assert all(c["usage"]["output_tokens"] <= cap for c in answers), (step, answers)


def test_ask_streams_the_answer(llama_server: LlamaServer, tmp_path: Path) -> None:
    options = {"base_url": llama_server.base_url, "temperature": "0", "max_output_tokens": "48"}
    flags = [arg for key, value in options.items() for arg in ("--model-option", f"{key}={value}")]
    offset = llama_server.log_size()

    done = orchestrator(
        "ask",
        "Say hello to the team in five words.",
        "--model",
        "openai-compatible:smollm2",
        *flags,
        "--model-option",
        "extra_body={seed: 7}",
        "--max-steps",
        "2",
        "--trace",
        "t.jsonl",
        "--quiet",
        cwd=tmp_path,
    )

    assert done.returncode in (0, 3), done.stderr
    events = check_trace(tmp_path / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    (end,) = of_type(events, "run_end", "planner")
    assert done.stdout.rstrip("\n").endswith(end["output"].rstrip("\n"))
    # Only the shape the server cannot stream fell back; a forced answer streamed for real.
    shapes = {e["request"] for e in of_type(events, "model_stream_fallback")}
    assert shapes <= {"tools, tool_choice auto"}


SMALL_WINDOW = 4096


def test_the_quickstart_with_default_settings_in_a_small_window(
    quickstart: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The quickstart as a newcomer runs it (streaming on, the default 4,096 output tokens)
    against a server whose window is small and unknown to the run (llama-cpp-python says it
    nowhere but in a refusal): the run completes or ends with a defined status, never with the
    server's HTTP 400. An agent whose conversation outgrows the window learns it from the
    refusal (window and the server's count of the prompt), compacts and goes on; whether the
    tiny model's run gets that far depends on its decisions."""
    log = tmp_path_factory.mktemp("small-window") / "server.log"
    process, server = start_server(log, n_ctx=SMALL_WINDOW)
    try:
        model = {
            "name": "openai-compatible:smollm2",
            "base_url": server.base_url,
            "temperature": 0,
            "timeout": 120,
            "extra_body": {"seed": SEED},
        }
        edit_spec(quickstart, model=model, budget={"max_steps": 6, "max_parallel": 2})
        done = orchestrator(
            "run",
            "quickstart.yaml",
            "--json",
            "--quiet",
            "--trace",
            "t.jsonl",
            cwd=quickstart.parent,
        )
        statuses = server.statuses_since(0)
    finally:
        stop_server(process)

    assert done.returncode in (0, 3, 4), done.stderr
    assert json.loads(done.stdout)["status"] in JOB_STATUSES
    events = trace_lines(quickstart.parent / "t.jsonl")
    ends = of_type(events, "run_end")
    assert ends
    for end in ends:
        assert end["status"] != "error", f"{end['agent']} failed: {end['error']}"
        if end["status"] == "context_full":  # a clear status, naming the window
            assert f"context window of {SMALL_WINDOW:,} tokens" in end["error"], end["error"]
    for agent, messages in rebuild_conversations(quickstart.parent / "t.jsonl").items():
        check_calls_answered(agent, messages)
    # A refusal only where an agent learned the window (and, at most once more, the server's
    # count of its prompt); every other request was answered.
    agents = {e["agent"] for e in of_type(events, "run_start")}
    assert set(statuses) <= {200, 400}, statuses
    assert statuses.count(400) <= 2 * len(agents), statuses
    # Each model call was answered once (a stream the server could not serve, twice).
    answered = of_type(events, "model_call") + of_type(events, "model_stream_fallback")
    assert statuses.count(200) == len(answered)


def test_the_readmes_local_model_recipe_as_written(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """README's local-model recipe, its `orchestrator` command run as written; only the port
    is the test server's. The server's window is the recipe's (8,192 tokens)."""
    import re
    import shlex

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- local-model-recipe -->", 1)[1].split("```", 2)[1]
    (command,) = [line for line in block.splitlines() if line.startswith("orchestrator ")]
    args = shlex.split(command.replace("http://127.0.0.1:8080/v1", llama_server.base_url))
    assert re.search(r"--model-option context_window=8192\b", command)
    offset = llama_server.log_size()

    done = orchestrator(*args[1:], "--trace", "t.jsonl", cwd=tmp_path)

    # The tiny model may answer well, answer nothing, or run out of steps: each is a defined
    # end. What must hold: no request refused, every call answered, an answer or a reason.
    assert done.returncode in (0, 3), done.stderr
    check_statuses(llama_server.statuses_since(offset))
    events = check_trace(tmp_path / "t.jsonl")
    (end,) = of_type(events, "run_end", "planner")
    assert f"ask: {end['status']} in " in done.stderr
    if done.returncode == 0:
        assert done.stdout.strip() and done.stdout.rstrip("\n").endswith(end["output"].rstrip())
    elif end["status"] == "completed":  # exit 3 for a completed run: its answer was empty
        assert "final answer was empty" in done.stderr


TYPED = """\
name: typed
model: {model}
budget: {{max_steps: 1}}
permissions: {{workspace: .}}
steps:
  - id: capital
    task: "What is the capital of Norway? Answer in JSON."
    output_schema:
      type: object
      properties:
        city: {{type: string, minLength: 1, maxLength: 24}}
        sure: {{type: boolean}}
      required: [city, sure]
    output_mode: native
    output_retries: 0
"""


def test_a_native_output_schema_is_held_by_the_servers_grammar(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    # llama-cpp-python's server takes the schema only as `json_object` with `schema` beside
    # it, and turns it into a grammar: the tiny model's one answer validates, with no retry.
    # A long timeout: compiling and following the grammar is slow on a busy CPU.
    model = llama_server.model(output_format="json_object", stream=False, timeout=600)
    (tmp_path / "typed.yaml").write_text(TYPED.format(model=json.dumps(model)), encoding="utf-8")
    offset = llama_server.log_size()

    done = orchestrator(
        "run", "typed.yaml", "--json", "--quiet", "--trace", "t.jsonl", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed"
    data = result["data"]
    assert set(data) == {"city", "sure"}, data
    assert isinstance(data["city"], str) and 1 <= len(data["city"]) <= 24
    assert isinstance(data["sure"], bool)
    events = check_trace(tmp_path / "t.jsonl")
    check_statuses(llama_server.statuses_since(offset))
    (call,) = of_type(events, "model_call", "capital")
    assert call["tool_choice"] in (None, "none")
    (end,) = of_type(events, "run_end", "capital")
    assert (end["status"], end["data"]) == ("completed", data)
