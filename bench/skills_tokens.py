"""Progressive disclosure vs. eager tool schemas: the planner's first request, and scan time.

For synthetic catalogs of 10, 100 and 1,000 skills (each with several tools whose schemas
look like real ones: enums, optional fields, lists, documented arguments), this measures

- eager: the first request of a planner given every skill's tools up front;
- progressive: the first request of a planner given the catalog (`Agent(skills=...)`): the
  skill index (capped) in the system prompt plus the three meta-tools;
- the time to scan the catalog (frontmatter only), median of several runs.

Tokens are the loop's own count of the request (`ScriptedModel.requests[0].input_tokens`),
with the default offline encoding.

    python bench/skills_tokens.py [--sizes 10 100 1000] [--tools 4] [--repeats 7] [--json FILE]

`smoke()` runs the same code at a tiny size, for the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import Agent
from orchestrator.agent import Tool
from orchestrator.models import ScriptedModel
from orchestrator.skills import DEFAULT_INDEX_TOKENS, SkillCatalog, SkillsExtension

PLANNER_SYSTEM = "You are the planner. Reach the user's goal with the tools you have."
TASK = "Prepare the monthly summary of open invoices and send it to the finance team."
DOMAINS = [
    "invoice", "shipment", "ticket", "contract", "employee", "campaign", "asset", "incident",
    "order", "vendor", "lead", "device", "course", "patient", "property", "claim",
]  # fmt: skip

TOOL_TEMPLATES = [
    '''
@tool
def search_{plural}(
    query: str,
    status: Literal["open", "closed", "pending", "archived"] | None = None,
    created_after: str | None = None,
    owner: str | None = None,
    limit: int = 20,
) -> str:
    """Search {plural} of the {system} by text and filters; returns matching ids and titles.

    Args:
        query: Free text matched against titles, descriptions and comments.
        status: Only {plural} in this state.
        created_after: Only {plural} created on or after this date (YYYY-MM-DD).
        owner: Only {plural} owned by this user (email address or user id).
        limit: Maximum number of results to return (1-100).
    """
    return ""
''',
    '''
@tool
def get_{singular}(
    {singular}_id: str,
    fields: list[str] | None = None,
    include_history: bool = False,
) -> str:
    """Fetch one {singular} from the {system} with all its fields and linked records.

    Args:
        {singular}_id: The identifier returned by search_{plural}.
        fields: Only return these fields (all fields when left out).
        include_history: Also return the change history, newest first.
    """
    return ""
''',
    '''
@tool
def update_{singular}(
    {singular}_id: str,
    changes: dict[str, str],
    comment: str | None = None,
    notify_owner: bool = True,
) -> str:
    """Change fields of a {singular} in the {system}; the change is recorded in its history.

    Args:
        {singular}_id: The identifier of the {singular} to change.
        changes: Field names mapped to their new values.
        comment: Why the change was made, shown in the history.
        notify_owner: Send the owner an email about the change.
    """
    return ""
''',
    '''
@tool
def export_{singular}_report(
    period_start: str,
    period_end: str,
    format: Literal["pdf", "csv", "xlsx"] = "pdf",
    group_by: Literal["owner", "status", "month"] = "status",
    recipients: list[str] | None = None,
) -> str:
    """Build a report of {plural} for a period and optionally email it to recipients.

    Args:
        period_start: First day of the period (YYYY-MM-DD).
        period_end: Last day of the period (YYYY-MM-DD).
        format: File format of the report.
        group_by: How rows of the report are grouped.
        recipients: Email addresses to send the report to.
    """
    return ""
''',
    '''
@tool
def create_{singular}(
    title: str,
    description: str,
    priority: Literal["low", "normal", "high", "urgent"] = "normal",
    owner: str | None = None,
    tags: list[str] | None = None,
) -> str:
    """Create a new {singular} in the {system} and return its identifier.

    Args:
        title: A short title, at most 120 characters.
        description: The full description, markdown allowed.
        priority: How urgent the {singular} is.
        owner: Who is responsible (email address); the caller when left out.
        tags: Labels to attach, for filtering later.
    """
    return ""
''',
]


def write_catalog(root: Path, size: int, tools_per_skill: int) -> Path:
    """`size` skill folders, each with a SKILL.md and a tools.py of `tools_per_skill` tools."""
    for i in range(size):
        singular = DOMAINS[i % len(DOMAINS)]
        plural = f"{singular}s"
        system = f"{singular} tracker {i}"
        folder = root / f"{singular}-tracker-{i:04d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {folder.name}\n"
            f"description: Find, read, update and report on {plural} in the {system}. Use "
            f"when the user asks about {plural}, their status, owners or monthly reports.\n"
            f"metadata:\n  keywords: {plural}, {singular} reports, tracker {i}\n---\n"
            f"# {system.title()}\n\nSearch first, then read the {singular} you need.\n",
            encoding="utf-8",
        )
        templates = [TOOL_TEMPLATES[(i + k) % len(TOOL_TEMPLATES)] for k in range(tools_per_skill)]
        source = "from typing import Literal\n\nfrom orchestrator import tool\n" + "".join(
            t.format(singular=singular, plural=plural, system=system) for t in templates
        )
        (folder / "tools.py").write_text(source, encoding="utf-8")
    return root


def first_request_tokens(agent: Agent, model: ScriptedModel) -> int:
    agent.run_sync(TASK)
    return model.requests[0].input_tokens or 0


def progressive_tokens(catalog: SkillCatalog, index_tokens: int) -> int:
    model = ScriptedModel({"planner": [{"content": "ok"}]})
    extension = SkillsExtension(catalog, index_tokens=index_tokens)
    agent = Agent(model, name="planner", system=PLANNER_SYSTEM, skills=extension)
    return first_request_tokens(agent, model)


def eager_tokens(tools: list[Tool]) -> int:
    model = ScriptedModel({"planner": [{"content": "ok"}]})
    agent = Agent(model, tools, name="planner", system=PLANNER_SYSTEM)
    return first_request_tokens(agent, model)


def scan_times(root: Path, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        SkillCatalog([root], include_builtin=False)
        times.append((time.perf_counter() - began) * 1000)
    return times


def measure(size: int, tools_per_skill: int, repeats: int, index_tokens: int) -> dict[str, Any]:
    """One catalog size: eager and progressive first-request tokens, and scan times."""
    with tempfile.TemporaryDirectory(prefix="skills-bench-") as folder:
        root = write_catalog(Path(folder) / "skills", size, tools_per_skill)
        times = scan_times(root, repeats)
        catalog = SkillCatalog([root], include_builtin=False)
        progressive = progressive_tokens(catalog, index_tokens)
        tools = [t for name in catalog.names for t in catalog.load(name).tools]
        eager = eager_tokens(tools)
    return {
        "skills": size,
        "tools": len(tools),
        "eager_tokens": eager,
        "progressive_tokens": progressive,
        "ratio": progressive / eager,
        "tokens_per_tool": (eager - progressive_tokens_base()) / max(1, len(tools)),
        "index_cap": index_tokens,
        "scan_ms_median": statistics.median(times),
        "scan_ms_min": min(times),
        "scan_ms_max": max(times),
    }


def progressive_tokens_base() -> int:
    """The first request with no tools and no skills: what both variants share."""
    model = ScriptedModel({"planner": [{"content": "ok"}]})
    return first_request_tokens(Agent(model, name="planner", system=PLANNER_SYSTEM), model)


def run(
    sizes: tuple[int, ...] = (10, 100, 1000),
    tools_per_skill: int = 4,
    repeats: int = 7,
    index_tokens: int = DEFAULT_INDEX_TOKENS,
) -> list[dict[str, Any]]:
    return [measure(size, tools_per_skill, repeats, index_tokens) for size in sizes]


def smoke() -> list[dict[str, Any]]:
    """The benchmark at a tiny size: two small catalogs, one scan each."""
    return run(sizes=(3, 12), tools_per_skill=2, repeats=1, index_tokens=300)


def report(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'skills':>6} {'tools':>6} {'eager':>9} {'progressive':>11} {'ratio':>7} "
        f"{'tok/tool':>8} {'scan ms (median, min-max)':>26}"
    ]
    for row in rows:
        lines.append(
            f"{row['skills']:>6} {row['tools']:>6} {row['eager_tokens']:>9,} "
            f"{row['progressive_tokens']:>11,} {row['ratio']:>7.2%} {row['tokens_per_tool']:>8.0f} "
            f"{row['scan_ms_median']:>12.1f} ({row['scan_ms_min']:.1f}-{row['scan_ms_max']:.1f})"
        )
    biggest = rows[-1]
    lines.append(
        f"\nat {biggest['skills']} skills: the first request costs {biggest['ratio']:.2%} of the "
        f"eager one (target <= 2%); the index is capped at {biggest['index_cap']} tokens; "
        f"a scan takes {biggest['scan_ms_median']:.1f} ms (target < 200 ms)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--tools", type=int, default=4, help="tools per skill")
    parser.add_argument("--repeats", type=int, default=7, help="scans per size")
    parser.add_argument("--index-tokens", type=int, default=DEFAULT_INDEX_TOKENS)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rows = run(tuple(args.sizes), args.tools, args.repeats, args.index_tokens)
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
