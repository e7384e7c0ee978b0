"""`max_parallel` holds for a job's whole tree: steps, the tasks they fork, and theirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, load_job
from orchestrator.models import ModelRequest, ScriptedModel
from orchestrator.models.base import ModelResponse


class Counting:
    """A model that counts how many of its calls are in flight at once."""

    name = "counting"

    def __init__(self, script: dict[str, list[dict[str, Any]]]) -> None:
        self.scripted = ScriptedModel(script, latency=0.05)
        self.in_flight = 0
        self.peak = 0
        self.agents: set[str] = set()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.agents.add(request.agent)
        try:
            return await self.scripted.complete(request)
        finally:
            self.in_flight -= 1


def fork(*ids: str) -> dict[str, Any]:
    tasks = [{"id": i, "task": f"Do {i}."} for i in ids]
    return {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]}


SCRIPT = {
    "left": [fork("l1", "l2"), {"content": "left done"}],
    "right": [fork("r1", "r2"), {"content": "right done"}],
    **{f"{side}/{side[0]}{n}": [{"content": "ok"}] for side in ("left", "right") for n in (1, 2)},
}
JOB = """\
name: wide
model: scripted:script.yaml
budget: {{max_parallel: {limit}}}
steps:
  - {{id: left, planner: true, task: "Split the left half."}}
  - {{id: right, planner: true, task: "Split the right half."}}
"""


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_the_limit_holds_across_steps_and_their_forks(tmp_path: Path, limit: int) -> None:
    (tmp_path / "script.yaml").write_text("{}\n")
    (tmp_path / "job.yaml").write_text(JOB.format(limit=limit))
    job = load_job(tmp_path / "job.yaml")
    model = Counting(SCRIPT)
    result = await Orchestrator.from_job(job, model=model).run_job(job)

    assert result.status == "completed"
    assert len(model.agents) == 6  # every step and every forked task really ran
    assert model.peak == limit


async def test_a_tree_deeper_than_the_pool_is_wide_finishes(tmp_path: Path) -> None:
    # One slot, and each agent forks one more level: a parent lends its slot while it waits.
    script = {
        "planner": [fork("a"), {"content": "top done"}],
        "planner/a": [fork("b"), {"content": "a done"}],
        "planner/a/b": [{"content": "b done"}],
    }
    model = Counting(script)
    result = await Orchestrator(model, max_parallel=1, max_depth=3).run("go")

    assert result.status == "completed"
    assert model.peak == 1
    assert [c.status for c in result.children] == ["completed"]
