"""Bad input from outside ends in a clear observation or status, never a crash or a hang:
YAML alias bombs in a SKILL.md, arguments nested 100,000 levels deep, text that is not valid
Unicode, and a model adapter that raises what it should not."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from provider_server import ProviderServer
from trace_lines import into, trace_lines

from orchestrator import Agent, Message, Trace, tool
from orchestrator.models import ModelRequest, ScriptedModel
from orchestrator.models.base import ModelResponse
from orchestrator.skills import SkillCatalog
from orchestrator.skills.skill_md import read_skill_folder
from orchestrator.tasks import ForkExtension, SubagentRegistry


def bomb(levels: int = 9) -> str:
    """A frontmatter whose last alias stands for 9**levels values."""
    lines = ["name: bomb", "description: Looks harmless.", "metadata:"]
    lines.append('  l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]')
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"  l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_a_frontmatter_alias_bomb_is_left_out_fast(tmp_path: Path) -> None:
    for name, frontmatter in (("bomb", bomb()), ("fine", "name: fine\ndescription: Fine.\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(f"---\n{frontmatter}---\nBody.\n")
    # In a child process, so a regression fails on its timeout instead of hanging the suite.
    code = f"""
        import json
        from orchestrator import SkillCatalog
        catalog = SkillCatalog([{str(tmp_path)!r}], include_builtin=False)
        warnings = [str(w) for w in catalog.warnings]
        print(json.dumps({{"names": catalog.names, "warnings": warnings}}))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    found = json.loads(done.stdout)
    assert found["names"] == ["fine"]
    (warning,) = found["warnings"]
    assert "aliases expand it by" in warning and "yaml-too-large" in warning
    assert "skill left out" in warning


@tool
def echo(data: Any = None) -> str:
    """Echo what it is given."""
    return "echoed"


async def test_arguments_nested_too_deeply_are_an_invalid_arguments_observation() -> None:
    deep = '{"data": ' + "[" * 100_000 + "]" * 100_000 + "}"
    turns = [{"tool_calls": [{"name": "echo", "arguments": deep}]} for _ in range(3)]
    model = ScriptedModel({"agent": [*turns, {"content": "gave up"}]})
    result = await Agent(model, [echo]).run("go")

    assert result.status == "completed"
    answers = [m for m in result.messages if m.role == "tool"]
    assert len(answers) == 3
    assert {m.error_type for m in answers} == {"invalid_json"}
    assert "nested too deeply" in (answers[0].content or "")


async def test_a_reply_with_a_lone_surrogate_is_recorded_and_returned(tmp_path: Path) -> None:
    model = ScriptedModel({"agent": [{"content": "broken \ud800 text"}]})
    trace = tmp_path / "run.jsonl"
    result = await Agent(model, trace=trace).run("go")

    assert result.status == "completed"
    assert result.output == "broken \ufffd text"
    ends = [e for e in trace_lines(trace) if e["type"] == "run_end"]
    assert ends[0]["output"] == "broken \ufffd text"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_lone_surrogate_from_a_real_server_is_made_safe(stream: bool) -> None:
    script = {"agent": [{"content": "from the wire \ud83d and a pair \ud83d\ude00"}]}
    with ProviderServer(script) as server:
        model = server.adapter("openai", "sk-test", stream=stream)
        events: list[dict[str, Any]] = []
        result = await Agent(model, trace=Trace(listeners=[into(events)])).run("go")

    assert result.status == "completed"
    assert result.output == "from the wire \ufffd and a pair \U0001f600"
    assert result.output.encode("utf-8")


@tool
def broken() -> str:
    """Return text that is not valid Unicode."""
    return "tool says \udfff"


async def test_a_lone_surrogate_from_a_tool_and_the_task_is_made_safe(tmp_path: Path) -> None:
    turns = [{"tool_calls": [{"name": "broken", "arguments": {}}]}, {"content": "ok"}]
    trace = tmp_path / "run.jsonl"
    result = await Agent(ScriptedModel({"agent": turns}), [broken], trace=trace).run("task \udfff")

    assert result.status == "completed"
    assert result.messages[0] == Message.user("task \ufffd")
    assert result.messages[2].content == "tool says \ufffd"
    assert [e["type"] for e in trace_lines(trace)][-1] == "run_end"


TASKS = [{"id": "bad", "task": "x"}, {"id": "good", "task": "y"}]


class Misbehaving:
    """A model adapter of a user's own that raises what it should not, for one agent."""

    name = "misbehaving"

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.scripted = ScriptedModel(
            {
                "planner": [
                    {
                        "tool_calls": [
                            {
                                "name": "fork",
                                "arguments": {
                                    "tasks": [
                                        {"id": "bad", "task": "x"},
                                        {"id": "good", "task": "y"},
                                    ]
                                },
                            }
                        ]
                    },
                    {"content": "the planner goes on"},
                ],
                "planner/good": [{"content": "good done"}],
            },
            latency=0.05,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == "planner/bad":
            raise self.error
        return await self.scripted.complete(request)


class OddError(BaseException):
    """Not an Exception: nothing should catch it by accident, nothing should die of it."""


@pytest.mark.parametrize(
    "error",
    [asyncio.CancelledError(), OddError("odd"), SystemExit(2)],
    ids=["cancel", "odd", "exit"],
)
async def test_a_stray_error_from_an_adapter_fails_that_agent_only(error: BaseException) -> None:
    model = Misbehaving(error)
    fork = ForkExtension(SubagentRegistry())
    result = await Agent(model, name="planner", extensions=[fork]).run("go")

    assert result.status == "completed"
    assert result.output == "the planner goes on"
    statuses = {child.id: (child.status, child.reason) for child in result.children}
    assert statuses["good"] == ("completed", None)
    assert statuses["bad"][0] == "error"
    assert f"the model adapter raised {type(error).__name__}" in (statuses["bad"][1] or "")


async def test_a_real_cancellation_still_cancels() -> None:
    model = ScriptedModel({"agent": [{"content": "late"}]}, latency=5)
    task = asyncio.create_task(Agent(model).run("go"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


HUGE_SKILL = 200 * 1024 * 1024


def _huge_skill(root: Path) -> Path:
    """A SKILL.md of 200 MB with a valid frontmatter, made sparse: cheap to make, dear to
    read whole."""
    folder = root / "skills" / "huge"
    folder.mkdir(parents=True)
    path = folder / "SKILL.md"
    with path.open("wb") as file:
        file.write(b"---\nname: huge\ndescription: A skill of 200 MB.\n---\n# Huge\n")
        file.truncate(HUGE_SKILL)
    return path


def _peak_kib(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """`orchestrator ARGS`, and the peak memory (KiB) of that process alone."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run([sys.executable, '-m', 'orchestrator', *sys.argv[1:]],"
        " capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )
    *_, peak = done.stdout.split()
    return done, int(peak)


def test_a_skill_file_of_200_mb_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    _huge_skill(tmp_path)
    size = f"{HUGE_SKILL:,} bytes"

    checked, peak = _peak_kib("skills", "check", "skills/huge", cwd=tmp_path)
    assert checked.returncode != 0
    assert size in checked.stdout and "[file-too-large]" in checked.stdout
    assert peak < HUGE_SKILL // 1024  # KiB: less than the file itself (whole, it was 3x)

    listed, peak = _peak_kib("skills", "list", "--skills", "skills", cwd=tmp_path)
    assert "huge:" not in listed.stdout and size in listed.stdout + listed.stderr
    assert peak < HUGE_SKILL // 1024

    assert "huge" not in SkillCatalog([tmp_path / "skills"], include_builtin=False).names
    reading = read_skill_folder(tmp_path / "skills" / "huge")
    assert reading.info is None and size in reading.problems[0].message


async def test_a_skill_file_grown_to_200_mb_after_the_scan_is_not_loaded(tmp_path: Path) -> None:
    path = _huge_skill(tmp_path)
    with path.open("r+b") as file:
        file.truncate(200)
    catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    assert "huge" in catalog.names
    with path.open("r+b") as file:
        file.truncate(HUGE_SKILL)
    model = ScriptedModel(
        {"*": [{"tool_calls": [{"name": "load_skill", "arguments": {"name": "huge"}}]},
               {"content": "done"}]}
    )  # fmt: skip

    await Agent(model, skills=catalog).run("Use the huge skill.")

    loaded = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    assert loaded.is_error and f"{HUGE_SKILL:,} bytes" in (loaded.content or "")
