"""`orchestrator skills show NAME --as-model`: a skill as the model gets it, compared with what
a scripted run of the same skills actually sent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from skill_factory import ANTHROPIC_SKILLS, synthetic_skills, write_skill

from orchestrator import Agent
from orchestrator.events import MessageEvent, ModelCall
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions
from orchestrator.skills import SkillCatalog, SkillsExtension
from orchestrator.tokens import default_counter
from orchestrator.trace import read_trace

COUNTER_TOOLS = '''
from orchestrator import tool

@tool
def count(text: str, unique: bool = False) -> int:
    """Count the words of a text.

    Args:
        text: The text.
        unique: Count each word once.
    """
    words = text.split()
    return len(set(words) if unique else words)
'''


def as_model(*args: str | Path, cwd: Path) -> dict[str, Any]:
    done = orchestrator("skills", "show", *args, "--as-model", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    view: dict[str, Any] = json.loads(done.stdout)
    return view


def sent_by_a_run(
    folder: Path, name: str, tmp_path: Path, disclosure: str = "progressive"
) -> tuple[str, str, list[dict[str, Any]]]:
    """(system prompt, load_skill result, tools array) as a scripted run's trace holds them."""
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": name}}]},
                {"content": "done"},
            ]
        }
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    trace = tmp_path / f"run-{disclosure}.jsonl"
    agent = Agent(
        model,
        skills=SkillsExtension(SkillCatalog([folder]), disclosure=disclosure),  # type: ignore[arg-type]
        permissions=Permissions(workspace=tmp_path / "work"),
        trace=trace,
    )
    assert agent.run_sync("go").status == "completed"
    events = list(read_trace(trace))
    messages = [e.message for e in events if isinstance(e, MessageEvent)]
    system = next(m.content for m in messages if m.role == "system")
    result = next(m.content for m in messages if m.role == "tool")
    specs = next(e.tool_specs for e in events if isinstance(e, ModelCall) and e.tool_specs)
    return system or "", result or "", [s.model_dump(mode="json") for s in specs]


def test_a_corpus_skill_as_the_model_gets_it(tmp_path: Path) -> None:
    if not ANTHROPIC_SKILLS.is_dir():
        pytest.skip(f"the shared corpus is not beside the repository ({ANTHROPIC_SKILLS})")
    folder = tmp_path / "skills"
    shutil.copytree(ANTHROPIC_SKILLS / "webapp-testing", folder / "webapp-testing")
    view = as_model("webapp-testing", "--skills", folder, cwd=tmp_path)
    system, result, tools = sent_by_a_run(folder, "webapp-testing", tmp_path)
    assert view["load_result"] == result
    assert view["tools"] == tools
    assert view["index_line"] in system.splitlines()
    assert view["in_index"] is True
    counter = default_counter()
    assert view["tokens"]["index_line"] == counter.count_text(view["index_line"]) + 1
    assert view["tokens"]["tool_schemas"] == 0
    assert 0 < view["tokens"]["instructions"] < view["tokens"]["load_result"]


def test_a_skill_with_tools_in_each_mode(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "counter", description="Counts words.", tools=COUNTER_TOOLS)
    progressive = as_model("counter", "--skills", folder, cwd=tmp_path)
    _, result, tools = sent_by_a_run(folder, "counter", tmp_path)
    assert progressive["load_result"] == result
    assert progressive["tools"] == tools
    assert '"unique":{' in result  # the schemas travel in the load result
    assert "counter__count" not in [t["name"] for t in tools]
    eager = as_model("counter", "--skills", folder, "--disclosure", "eager", cwd=tmp_path)
    _, result, tools = sent_by_a_run(folder, "counter", tmp_path, "eager")
    assert eager["load_result"] == result
    assert eager["tools"] == tools
    assert "counter__count" in [t["name"] for t in tools]  # in the tools array instead
    assert eager["tokens"]["tool_schemas"] == progressive["tokens"]["tool_schemas"] > 0


def test_the_text_view_shows_each_level_and_the_cap(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    write_skill(folder, "counter", description="Counts words.", tools=COUNTER_TOOLS)
    synthetic_skills(folder, 60)
    done = orchestrator("skills", "show", "counter", "--skills", folder, "--as-model", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "level 0, the index line" in out and "- counter: Counts words." in out
    assert 'level 1, load_skill("counter")' in out
    assert "Call one by its name, or through call_skill_tool" in out
    assert "index line" in out and "instructions" in out and "tool schemas" in out
    capped = orchestrator(
        "skills", "show", "skill-0059", "--skills", folder, "--as-model", cwd=tmp_path
    )
    assert capped.returncode == 0, capped.stderr
    assert "left out of the index by its cap of 2,000 tokens" in capped.stdout
    assert "search_skills" in capped.stdout


MARKING_TOOLS = '''
import os
from pathlib import Path

from orchestrator import tool

for place in (Path(__file__).resolve().parents[2], Path(os.environ.get("HOME", "/tmp"))):
    try:
        (place / "imported-outside.marker").write_text("the skill's code ran here")
    except OSError:
        pass


@tool
def mark(text: str) -> str:
    """Mark a text."""
    return text
'''


def test_showing_a_skill_as_the_model_gets_it_runs_its_code_only_in_the_sandbox(
    tmp_path: Path,
) -> None:
    """`skills show --as-model` loads the skill as a run would, from a sandboxed process: a
    `tools.py` that writes outside its folder on import leaves nothing behind, and the view
    still lists its tool."""
    folder = tmp_path / "skills"
    write_skill(folder, "marker", description="Marks texts.", tools=MARKING_TOOLS)
    home = tmp_path / "home"
    home.mkdir()
    done = orchestrator(
        "skills",
        "show",
        "marker",
        "--skills",
        folder,
        "--as-model",
        "--json",
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert "marker__mark" in view["load_result"] or "marker__mark" in json.dumps(view["tools"])
    assert not list(tmp_path.rglob("imported-outside.marker")), "the skill's code ran outside"
