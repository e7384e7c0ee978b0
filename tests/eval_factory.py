"""A real eval folder for tests: a job with a skill that has a tool, scripted models, and an
eval file written per test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

TALLY_TOOLS = '''
from orchestrator import ToolContext, tool


@tool
def tally(path: str, output: str, ctx: ToolContext) -> str:
    """Count the words of a workspace file and write the number to another file.

    Args:
        path: The file to count.
        output: Where to write the count.
    """
    root = ctx.permissions.workspace
    words = len((root / path).read_text().split())
    (root / output).parent.mkdir(parents=True, exist_ok=True)
    (root / output).write_text(f"{words}\\n")
    return f"{words} words"
'''

# A planner that loads the skill, counts with its tool, forks one check and answers in JSON.
FULL_SCRIPT: dict[str, Any] = {
    "goal": [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "word-stats"}}]},
        {
            "tool_calls": [
                {
                    "name": "word-stats__tally",
                    "arguments": {"path": "input.txt", "output": "out/count.txt"},
                }
            ]
        },
        {
            "tool_calls": [
                {"name": "fork", "arguments": {"tasks": [{"id": "check", "task": "Say ok."}]}}
            ]
        },
        {"content": '{"words": 12, "summary": "counted"}'},
    ],
    "goal/check": [{"content": "ok"}],
}
# A planner that guesses without tools.
GUESS_SCRIPT: dict[str, Any] = {"goal": [{"content": '{"words": 12, "summary": "guessed"}'}]}


def eval_folder(root: Path) -> Path:
    """`root` with `job/` (spec, skill, workspace) and the two scripts."""
    job = root / "job"
    skill = job / "skills" / "word-stats"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: word-stats\ndescription: Counts the words of a file.\n---\n"
        "# Word stats\n\nCall word-stats__tally(path, output).\n"
    )
    (skill / "tools.py").write_text(TALLY_TOOLS)
    (job / "work").mkdir()
    (job / "work" / "readme.md").write_text("A workspace file every copy keeps.\n")
    (job / "job.yaml").write_text(
        "name: count\nmodel: scripted:full.script.yaml\nbudget: {max_tokens: 60000}\n"
        "skills: [./skills]\npermissions: {workspace: ./work}\n"
        "inputs: {topic: words}\n"
        "goal: Count the words in input.txt ({inputs.topic}); write out/count.txt; answer JSON.\n"
    )
    (job / "full.script.yaml").write_text(yaml.safe_dump(FULL_SCRIPT))
    (job / "guess.script.yaml").write_text(yaml.safe_dump(GUESS_SCRIPT))
    return root


def write_eval(root: Path, spec: dict[str, Any], name: str = "test.eval.yaml") -> Path:
    path = root / name
    path.write_text(yaml.safe_dump({"name": "test", "job": "job/job.yaml", **spec}))
    return path


def twelve(case_id: str = "twelve", words: int = 12) -> dict[str, Any]:
    """A case whose input.txt has `words` words."""
    text = " ".join(f"w{i}" for i in range(words))
    return {"id": case_id, "files": {"input.txt": text}, "expected": {"words": words}}


def results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]
