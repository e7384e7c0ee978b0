"""What a job really costs in input tokens once the providers' prompt caches are counted.

One job, for synthetic catalogs of 10, 100 and 1,000 skills (bench/skills_tokens.py): a
planner loads a skill and calls one of its tools twice, then forks three sub-agents that each
run that skill (named in their task) and call its tool four times, then answers. Each way of
giving the model its tools runs the same scripted decisions:

- `ours`: the skill index, tools loaded on demand behind a stable tools array (`call_skill_tool`),
  Anthropic breakpoints;
- `ours, appended`: the index, a loaded skill's schemas appended to the tools array (the
  previous design; `SkillsExtension(stable_tools=False)`);
- `eager`: every skill's tools in the tools array from the first request, no index: what
  LangGraph, Pydantic AI and the OpenAI Agents SDK send when given a catalog's tools. Their
  prefix is stable, so they cache well; they are priced here with breakpoints set as ours,
  their best case.

The requests the model received are written as each provider's wire body by our own adapters,
and bench/cache_rules.py prices them: "effective input tokens" = uncached + 0.1 x cache reads
+ 1.25 x cache writes. Requests count as sent one after another (the sub-agents' first requests
share a prefix that the first of them warms, agent/model_call.py).

Beside it, the same job really forked (`forked`): the planner's `fork` starts the three
sub-agents (the built-in general one, the skill preloaded), so they share the planner's tools
array. Each provider's cached share is set against the ceiling: the most any cache could serve,
each request's longest prefix shared with an earlier one (`anthropic_ceiling`,
`openai_ceiling`), with no minimum, no steps and no breakpoints. What Anthropic's cache serves
of it depends on where the breakpoints are; OpenAI's, on the 128-token steps alone (each
request loses what its shared prefix runs past a step, about 64 tokens on average).

    python bench/cache_cost.py [--sizes 10 100 1000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cache_rules import anthropic_ceiling, anthropic_tally, openai_ceiling, openai_tally
from bench.skills_tokens import PLANNER_SYSTEM, write_catalog
from orchestrator import Agent, Orchestrator
from orchestrator.models import AnthropicOptions, ScriptedModel
from orchestrator.models.anthropic import build_body as anthropic_body
from orchestrator.models.base import ModelRequest
from orchestrator.models.openai import OpenAIOptions
from orchestrator.models.openai import build_body as openai_body
from orchestrator.skills import SkillCatalog, SkillsExtension

WAYS = ("ours", "ours, appended", "eager")
SUB_AGENTS = ("north", "south", "east")


def _calls(tool: str, count: int, via: bool) -> list[dict[str, Any]]:
    def call(i: int) -> dict[str, Any]:
        arguments = {"query": f"open items {i}"}
        if via:
            return {"name": "call_skill_tool", "arguments": {"tool": tool, "arguments": arguments}}
        return {"name": tool, "arguments": arguments}

    return [{"tool_calls": [call(i)]} for i in range(count)]


def _search_tool(catalog: SkillCatalog) -> tuple[str, str]:
    """The first skill with a search tool, and that tool's name."""
    return next(
        (name, t.name)
        for name in catalog.names
        for t in catalog.load(name).tools
        if t.name.split("__")[1].startswith("search")
    )


def _requests(catalog: SkillCatalog, way: str) -> list[ModelRequest]:
    """Run the planner's and sub-agents' decisions; the requests their models received."""
    skill, search = _search_tool(catalog)
    every_tool = [t for name in catalog.names for t in catalog.load(name).tools]
    requests: list[ModelRequest] = []
    for agent in ("planner", *SUB_AGENTS):
        planner = agent == "planner"
        steps = _calls(search, 2 if planner else 4, via=planner and way == "ours")
        if planner and way != "eager":
            steps = [{"tool_calls": [{"name": "load_skill", "arguments": {"name": skill}}]}, *steps]
        model = ScriptedModel({agent: [*steps, {"content": f"{agent} done"}]})
        task = "Summarise open items." if planner else f"[{agent}] Summarise this region's items."
        if way == "eager":
            runner = Agent(model, every_tool, name=agent, system=PLANNER_SYSTEM)
        else:
            extension = SkillsExtension(
                catalog, stable_tools=way == "ours", preload=() if planner else (skill,)
            )
            runner = Agent(model, name=agent, system=PLANNER_SYSTEM, skills=extension)
        runner.run_sync(task)
        requests += model.requests
    return requests


def forked_requests(catalog: SkillCatalog) -> list[ModelRequest]:
    """The job forked: the planner loads the skill, calls its tool twice through the
    dispatcher, forks the three sub-agents (each with the skill preloaded, four calls of its
    tool), then answers; the requests the model received, in order."""
    skill, search = _search_tool(catalog)
    tasks = [
        {"id": agent, "task": f"[{agent}] Summarise this region's items.", "skills": [skill]}
        for agent in SUB_AGENTS
    ]
    planner = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": skill}}]},
        *_calls(search, 2, via=True),
        {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
        {"content": "planner done"},
    ]
    script = {"planner": planner}
    for agent in SUB_AGENTS:
        script[agent] = [*_calls(search, 4, via=False), {"content": f"{agent} done"}]
    model = ScriptedModel(script)
    with tempfile.TemporaryDirectory(prefix="cache-bench-work-") as workspace:
        # A workspace of its own: skills inside a run's workspace are not imported.
        orchestrator = Orchestrator(
            model,
            skills=catalog,
            builtin=False,
            system=PLANNER_SYSTEM,
            permissions={"workspace": workspace},
        )
        result = orchestrator.run_sync("Summarise open items.")
    if result.status != "completed":
        raise RuntimeError(f"the forked job ended {result.status}: {result.error}")
    return model.requests


def against_ceiling(catalog: SkillCatalog) -> dict[str, Any]:
    """The forked job's requests on each provider's wire: cached, and the ceiling."""
    requests = forked_requests(catalog)
    marked = AnthropicOptions(prompt_cache=True)
    bodies = {
        "anthropic": [anthropic_body("m", r, marked) for r in requests],
        "openai": [openai_body("m", r, OpenAIOptions()) for r in requests],
    }
    rules = {
        "anthropic": (anthropic_tally, anthropic_ceiling),
        "openai": (openai_tally, openai_ceiling),
    }
    row: dict[str, Any] = {"skills": len(catalog), "requests": len(requests)}
    for provider, (tally, ceiling) in rules.items():
        served, most = tally(bodies[provider]), ceiling(bodies[provider])
        row[provider] = {
            **served.as_dict(),
            "ceiling_share": round(most.read_share, 4),
            "of_ceiling": round(served.read_tokens / most.read_tokens, 4),
        }
    return row


def measure(size: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="cache-bench-") as folder:
        catalog = SkillCatalog(
            [write_catalog(Path(folder) / "skills", size, 4)], include_builtin=False
        )
        for way in WAYS:
            requests = _requests(catalog, way)
            marked = AnthropicOptions(prompt_cache=True)
            anthropic = anthropic_tally([anthropic_body("m", r, marked) for r in requests])
            openai = openai_tally([openai_body("m", r, OpenAIOptions()) for r in requests])
            rows.append(
                {
                    "skills": size,
                    "way": way,
                    "requests": len(requests),
                    "input_tokens": anthropic.input_tokens,
                    "anthropic": anthropic.as_dict(),
                    "openai": openai.as_dict(),
                }
            )
        rows.append({"way": "forked", **against_ceiling(catalog)})
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| skills | tools given | requests | input tokens | Anthropic: cached | Anthropic: "
        "effective | OpenAI: cached | OpenAI: effective |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        if row["way"] == "forked":
            continue
        a, o = row["anthropic"], row["openai"]
        lines.append(
            f"| {row['skills']:,} | {row['way']} | {row['requests']} | {row['input_tokens']:,} | "
            f"{a['read_share']:.0%} | {a['effective_input_tokens']:,} | {o['read_share']:.0%} | "
            f"{o['effective_input_tokens']:,} |"
        )
    lines += [
        "",
        "| skills | forked job: requests | input tokens | ceiling | Anthropic: cached | of the "
        "ceiling | OpenAI: cached | of the ceiling |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        if row["way"] != "forked":
            continue
        a, o = row["anthropic"], row["openai"]
        lines.append(
            f"| {row['skills']:,} | {row['requests']} | {a['input_tokens']:,} | "
            f"{a['ceiling_share']:.1%} | {a['read_share']:.1%} | {a['of_ceiling']:.1%} | "
            f"{o['read_share']:.1%} | {o['of_ceiling']:.1%} |"
        )
    return "\n".join(lines)


def smoke() -> list[dict[str, Any]]:
    """The benchmark at its smallest size (10 skills), for the test suite. Below that eager
    schemas can cost less than the index, the dispatcher and a load turn."""
    return measure(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = [row for size in args.sizes for row in measure(size)]
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
