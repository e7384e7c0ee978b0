"""No freezing the process, and time limits that hold. The model is hostile (a catastrophic
pattern for grep) and so is the code it reaches (a tool that blocks, a `tools.py` that hangs at
import, a tool that calls `sys.exit()`).

Each scenario that could freeze runs in a child process with a generous timeout, so a regression
fails here instead of hanging the suite. What is asserted is behaviour: the call's result, the
run's status, and whether the blocked code had finished when the run returned (it writes a
marker file when it does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Agent, Permissions, SkillCatalog, tool
from orchestrator.models import ScriptedModel


def call(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


def run_script(code: str, cwd: Path) -> dict[str, Any]:
    """Run `code` (which prints one JSON line last) in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_catastrophic_grep_pattern_answers_at_once(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("a" * 50_000 + "b\n")
    found = run_script(
        f"""
        import json
        from orchestrator import Agent, Permissions
        from orchestrator.models import ScriptedModel
        turns = [
            {{"tool_calls": [{{"name": "load_skill", "arguments": {{"name": "files"}}}}]}},
            {{"tool_calls": [{{"name": "files__grep", "arguments": {{"pattern": "(a+)+$"}}}}]}},
            {{"tool_calls": [{{"name": "files__grep", "arguments": {{"pattern": "(a)\\\\1"}}}}]}},
            {{"content": "done"}},
        ]
        agent = Agent(ScriptedModel({{"agent": turns}}), skills=[], time_limit=20,
                      permissions=Permissions(workspace={str(tmp_path)!r}))
        result = agent.run_sync("search")
        tools = [m.content for m in result.messages if m.role == "tool"]
        print(json.dumps({{"status": result.status, "tools": tools}}))
        """,
        tmp_path,
    )
    assert found["status"] == "completed"
    assert found["tools"][1] == "No match for '(a+)+$'."
    assert "not a valid regular expression" in found["tools"][2]
    assert "backreferences" in found["tools"][2]


BLOCKING_RUN = """
import json, time
from pathlib import Path
from orchestrator import Agent, tool

@tool
def slow() -> str:
    \"\"\"Take a long time.\"\"\"
    time.sleep(15)
    Path("finished.txt").write_text("the tool finished")
    return "late"

turns = [
    {{"tool_calls": [{{"name": "slow", "arguments": {{}}}}]}},
    {{"content": "gave up waiting"}},
]
from orchestrator.models import ScriptedModel
agent = Agent(ScriptedModel({{"agent": turns}}), [slow], {limit})
result = agent.run_sync("go")
tools = [(m.error_type, m.content) for m in result.messages if m.role == "tool"]
print(json.dumps({{"status": result.status, "tools": tools,
                  "finished": Path("finished.txt").exists()}}))
"""


@pytest.mark.parametrize(
    ("limit", "status", "kind"),
    [("tool_timeout=1", "completed", "timeout"), ("time_limit=1", "cancelled", "aborted")],
)
@pytest.mark.slow
def test_a_blocking_sync_tool_cannot_hold_the_run(
    tmp_path: Path, limit: str, status: str, kind: str
) -> None:
    found = run_script(BLOCKING_RUN.format(limit=limit), tmp_path)
    assert found["status"] == status
    assert found["tools"][0][0] == kind
    # The run returned, and its process exited, while the tool was still asleep.
    assert found["finished"] is False
    assert not (tmp_path / "finished.txt").exists()


HANGING_IMPORT = {
    "sleeps": "import time\ntime.sleep(60)\n",
    "spins": "while True:\n    pass\n",
}


@pytest.mark.parametrize("how", sorted(HANGING_IMPORT))
@pytest.mark.slow
def test_a_tools_py_that_hangs_at_import_leaves_the_catalog_usable(
    tmp_path: Path, how: str
) -> None:
    skills = tmp_path / "skills"
    for name, tools in (("stuck", HANGING_IMPORT[how]), ("fine", "")):
        folder = skills / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill.\n---\nUse.\n")
        (folder / "tools.py").write_text(tools)
    found = run_script(
        f"""
        import json
        from orchestrator import Agent, Permissions, SkillCatalog
        from orchestrator.models import ScriptedModel
        catalog = SkillCatalog([{str(skills)!r}])
        catalog.import_timeout = 1
        turns = [
            {{"tool_calls": [{{"name": "load_skill", "arguments": {{"name": "stuck"}}}}]}},
            {{"tool_calls": [{{"name": "load_skill", "arguments": {{"name": "fine"}}}}]}},
            {{"tool_calls": [{{"name": "load_skill", "arguments": {{"name": "stuck"}}}}]}},
            {{"content": "done"}},
        ]
        agent = Agent(ScriptedModel({{"agent": turns}}), skills=catalog, time_limit=30,
                      permissions=Permissions(workspace={str(tmp_path / "ws")!r}))
        result = agent.run_sync("go")
        tools = [(m.error_type, m.content) for m in result.messages if m.role == "tool"]
        print(json.dumps({{"status": result.status, "tools": tools}}))
        """,
        _workspace(tmp_path),
    )
    assert found["status"] == "completed"
    first, second, third = found["tools"]
    assert first[0] == "tool_error"
    assert "did not finish within 1 s" in first[1]
    assert second[0] is None and "# Skill: fine" in second[1]
    assert third[0] == "tool_error"  # left out for the rest of the run, without waiting again
    assert "did not finish within 1 s" in third[1]


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return tmp_path / "ws"


@tool
def exits() -> str:
    """Call sys.exit."""
    sys.exit(3)


@tool
def interrupts() -> str:
    """Raise KeyboardInterrupt."""
    raise KeyboardInterrupt


@tool
async def exits_async() -> str:
    """Raise SystemExit from async code."""
    raise SystemExit("bye")


@tool
async def interrupts_async() -> str:
    """Raise KeyboardInterrupt from async code."""
    raise KeyboardInterrupt


async def test_a_tool_that_exits_fails_its_call_not_the_process(tmp_path: Path) -> None:
    hostile = [exits, interrupts, exits_async, interrupts_async]
    turns = [
        {"tool_calls": [{"name": t.name, "arguments": {}} for t in hostile]},
        {"content": "still here"},
    ]
    agent = Agent(ScriptedModel({"agent": turns}), hostile)
    result = await agent.run("go")

    assert result.status == "completed"
    assert result.output == "still here"
    answers = [m for m in result.messages if m.role == "tool"]
    assert [m.error_type for m in answers] == ["tool_error"] * 4
    assert "tried to exit: SystemExit (3)" in (answers[0].content or "")
    assert "tried to exit: KeyboardInterrupt" in (answers[1].content or "")
    assert "tried to exit: SystemExit" in (answers[2].content or "")
    assert "tried to exit: KeyboardInterrupt" in (answers[3].content or "")


async def test_a_skill_whose_import_exits_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "quits"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: quits\ndescription: Quits.\n---\nUse.\n")
    (folder / "tools.py").write_text("import sys\nsys.exit(1)\n")
    turns = [call("load_skill", name="quits"), {"content": "done"}]
    agent = Agent(
        ScriptedModel({"agent": turns}),
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=_workspace(tmp_path)),
    )
    result = await agent.run("go")

    assert result.status == "completed"
    refusal = result.messages[-2]
    assert refusal.error_type == "tool_error"
    assert "failed to import: SystemExit" in (refusal.content or "")
