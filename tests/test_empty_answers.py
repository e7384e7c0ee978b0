"""An empty final answer is never a clean success: a flag in the result, a line on stderr, a
non-zero exit for `ask`, and a failed step when a later step uses the empty output."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from cli_process import orchestrator
from provider_server import ProviderServer
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, load_job, run_job
from orchestrator.models import ScriptedModel
from orchestrator.trace import Trace


async def test_an_empty_or_blank_answer_is_flagged_in_the_result_and_the_trace(
    tmp_path: Path,
) -> None:
    for answer in ("", "  \n\t"):
        trace_path = tmp_path / f"{len(answer)}.jsonl"
        trace = Trace(trace_path)
        agent = Agent(ScriptedModel({"*": [{"content": answer}]}), trace=trace)
        result = await agent.run("Say something.")
        trace.close()

        assert result.status == "completed"
        assert result.empty_answer
        assert result.model_dump()["empty_answer"] is True
        (end,) = [e for e in trace_lines(trace_path) if e["type"] == "run_end"]
        assert end["empty_answer"] is True

    spoken = await Agent(ScriptedModel({"*": [{"content": "Hello."}]})).run("Say something.")
    assert not spoken.empty_answer


def test_ask_with_an_empty_streamed_answer_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    # llama-cpp-python's server streams `delta.content: ""`, then `finish_reason: stop`.
    with ProviderServer({"*": [{"content": ""}]}) as server:
        done = orchestrator(
            "ask",
            "Say hello.",
            "--model",
            "openai-compatible:m",
            "--model-option",
            f"base_url={server.openai_url}",
            cwd=tmp_path,
        )

    assert done.stdout.strip() == ""
    assert done.returncode == 3, done.stderr
    assert "final answer was empty" in done.stderr


def write_job(folder: Path, steps: str, script: str) -> Path:
    (folder / "script.yaml").write_text(textwrap.dedent(script))
    spec = folder / "job.yaml"
    spec.write_text(
        "name: empty\nmodel: scripted:script.yaml\nsteps:\n" + textwrap.indent(steps, "  ")
    )
    return spec


async def test_a_step_whose_output_a_later_step_uses_fails_when_it_is_empty(
    tmp_path: Path,
) -> None:
    spec = write_job(
        tmp_path,
        textwrap.dedent(
            """\
            - id: gather
              task: Gather the figures.
            - id: tidy
              task: Tidy the folder.
            - id: order
              task: Put things in order.
              depends_on: [tidy]
            - id: write
              task: "Write it up: {steps.gather.output}"
              depends_on: [gather]
            """
        ),
        """\
        gather:
          - content: ""
        tidy:
          - content: ""
        order:
          - content: Ordered.
        write:
          - content: Never asked.
        """,
    )
    result = await run_job(load_job(spec))

    assert result.step("gather").status == "error"
    assert result.step("gather").reason == "its answer was empty, and 'write' uses it"
    assert result.step("write").status == "skipped"
    # `order` only runs after `tidy`; it does not use its answer, so `tidy` stays completed.
    assert result.step("tidy").status == "completed" and result.step("tidy").empty_answer
    assert result.step("order").status == "completed"
    assert result.status == "failed"


def test_run_warns_on_stderr_for_each_step_that_answered_nothing(tmp_path: Path) -> None:
    spec = write_job(
        tmp_path,
        "- id: only\n  task: Do it.\n",
        "only:\n  - content: ' '\n",
    )
    done = orchestrator("run", spec, "--quiet", cwd=tmp_path)

    assert done.returncode == 0
    assert "warning: step only (the job's output) completed with an empty answer" in done.stderr


async def test_a_forked_task_whose_dependent_uses_an_empty_answer_fails(tmp_path: Path) -> None:
    fork = {
        "name": "fork",
        "arguments": {
            "tasks": [
                {"id": "a", "task": "Find it."},
                {"id": "b", "task": "Use it.", "depends_on": ["a"]},
            ]
        },
    }
    model = ScriptedModel(
        {
            "planner": [{"tool_calls": [fork]}, {"content": "Done."}],
            "planner/a": [{"content": ""}],
            "planner/b": [{"content": "Used."}],
        }
    )
    result = await Orchestrator(model).run("Find and use.")

    a, b = result.children
    assert (a.status, a.reason) == ("error", "its answer was empty, and 'b' uses it")
    assert b.status == "skipped"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
