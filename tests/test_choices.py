"""The one merge rule (tasks/subagents.py): choices override, limits narrow."""

from __future__ import annotations

from pathlib import Path

from orchestrator import Orchestrator, TokenBudget, ToolContext
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions
from orchestrator.tasks import TaskRequest, TaskSpec
from orchestrator.tasks.subagents import RULES, Choices, merged


def test_the_most_specific_choice_wins_and_the_smallest_limit_holds() -> None:
    call = Choices(compaction="summarize", max_steps=30)
    task = Choices(output_mode="tool", note=False)
    definition = Choices(compaction="mask", note=True, max_steps=5, max_tokens=9_000)
    run = Choices(compaction="mask", note=False, max_steps=12, output_retries=2)
    chosen = merged(call, task, definition, run)
    assert chosen == Choices(
        compaction="summarize",  # the call's, over the definition's and the run's
        output_mode="tool",
        note=False,  # the task's False is a choice, not "nothing said"
        output_retries=2,
        max_steps=5,  # the smallest cap any level gives, the call's larger one included
        max_tokens=9_000,
    )
    assert merged() == Choices()


def test_every_setting_has_its_rule() -> None:
    assert RULES == {
        "model": "override",
        "output": "override",
        "output_mode": "override",
        "output_retries": "override",
        "compaction": "override",
        "note": "override",
        "questions": "override",
        "max_steps": "narrow",
        "max_tokens": "narrow",
    }


def test_a_definition_asks_fewer_steps_never_more_and_a_step_choice_beats_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    for name, steps in (("brief", 2), ("long", 50)):
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: Works.\nmax_steps: {steps}\n"
            "compaction: summarize\nnote: true\n---\nWork.\n"
        )
    orchestrator = Orchestrator(ScriptedModel({}), subagents=[folder], builtin=False, max_steps=8)

    ctx = ToolContext(
        agent="planner",
        permissions=Permissions(workspace=tmp_path),
        budget=TokenBudget(),
        model=orchestrator.model,
    )

    def built(agent: str, **call: object) -> tuple[int, str, bool]:
        spec = TaskSpec(id="t", agent=agent, task="go")
        request = TaskRequest(spec=spec, agent=agent, path="planner/t", prompt="go", depth=1)
        made = orchestrator.fork.build_agent(request, ctx, **call)  # type: ignore[arg-type]
        return made.max_steps, made.compaction, "note" in [t.name for t in made.tools]

    assert built("brief") == (2, "summarize", True)
    assert built("long") == (8, "summarize", True)  # never over the run's 8
    assert built("long", compaction="mask", note=False) == (8, "mask", False)
