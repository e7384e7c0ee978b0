"""Our side of every workload, with the same functions as each module in `bench/peers/`.

- `loop_overhead(steps)`: one run of one agent making `steps` sequential single-tool steps.
- `fanout(width, latency)`: one run of a planner forking `width` sub-agents; wall seconds.
- `tool_tokens(catalog, job)`: tokens of the planner's first request and of a 3-skill job,
  with progressive disclosure and with every schema up front.
- `load_catalog(catalog)`: what it takes before a planner can start: a scan of the folders.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from orchestrator import Agent, SkillCatalog
from orchestrator.models import ScriptedModel
from orchestrator.skills import SkillsExtension

from . import fanout as fanout_bench
from . import loop_overhead as loop_bench
from .common import JOB_TASK, PLANNER_SYSTEM, Job

NOTES = {
    "loop": "all-in: includes the scripted model counting usage with tiktoken, as a provider "
    "reports it (peers' fake models report a fixed usage)",
    "scan": "frontmatter of every SKILL.md; tools are imported when a skill is loaded",
}


def loop_overhead(steps: int) -> dict[str, float]:
    return loop_bench.one_run(steps, None)


def fanout(width: int, latency: float) -> float:
    return asyncio.run(fanout_bench.one_run(width, latency))


def tool_tokens(catalog_root: Path, job: Job) -> dict[str, Any]:
    catalog = SkillCatalog([catalog_root], include_builtin=False)
    progressive = _job_tokens(job.progressive_script(), skills=SkillsExtension(catalog))
    tools = [t for name in catalog.names for t in catalog.load(name).tools]
    eager = _job_tokens(job.eager_script(), tools=tools)
    return {
        "tools": len(tools),
        "first_request": progressive["first_request"],
        "job": progressive["job"],
        "first_request_eager": eager["first_request"],
        "job_eager": eager["job"],
    }


def _job_tokens(script: dict[str, Any], **agent_options: Any) -> dict[str, int]:
    model = ScriptedModel(script)
    agent = Agent(model, name="planner", system=PLANNER_SYSTEM, **agent_options)
    result = agent.run_sync(JOB_TASK)
    if result.status != "completed" or any(m.is_error for m in result.messages):
        raise RuntimeError(f"the 3-skill job ended {result.status}: {result.messages[-2:]}")
    model.assert_all_used()
    return {
        "first_request": model.requests[0].input_tokens or 0,
        "job": result.usage.total_tokens,
    }


def load_catalog(catalog_root: Path) -> int:
    return len(SkillCatalog([catalog_root], include_builtin=False))
