"""The cost of a skill's first load when its tools come from an MCP server.

For `mcp-server-time` and `mcp-server-git` (on a one-commit temporary repository), each run
takes a fresh server pool, as a new run does, and measures

- start + list: starting the server process, the SDK's protocol negotiation and `tools/list`
  (the part a first `load_skill` waits for; later loads in the run reuse it);
- first call: one `tools/call` on the started server (`get_current_time`, `git_log`);
- stop: shutting the server down at the run's end;

and reports the medians (and spread) of N runs, plus what the server's tool schemas cost in
tokens once loaded: the tokens a planner does not send before the load. For scale, the same
medians of a bare `python -c "import mcp.server"` (a Python process importing the SDK's
server side, which both servers do before anything else) give the share of start + list that
is the server's own interpreter start.

    python bench/mcp_first_load.py [--repeats 7] [--json FILE]

Needs the `[mcp]` extra and the two servers (`pip install -e ".[dev]"` has all three).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator.agent import ToolContext
from orchestrator.mcp.connection import Connection
from orchestrator.mcp.elicitation import CallQuestions
from orchestrator.mcp.schema import normalise
from orchestrator.messages import ToolSpec
from orchestrator.skills.servers import ServerPool
from orchestrator.skills.skill import ServerConfig
from orchestrator.tokens import default_counter

BIN = Path(sys.executable).parent


def _repo(folder: Path) -> Path:
    env = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", *env, "-C", str(folder), "commit", "-q", "--allow-empty", "-m", "x"])
    return folder


def _servers(repo: Path) -> dict[str, tuple[ServerConfig, str, dict[str, Any]]]:
    git = ServerConfig(command=str(BIN / "mcp-server-git"), args=["--repository", str(repo)])
    time_ = ServerConfig(command=str(BIN / "mcp-server-time"))
    return {
        "mcp-server-time": (time_, "get_current_time", {"timezone": "UTC"}),
        "mcp-server-git": (git, "git_log", {"repo_path": str(repo), "max_count": 1}),
    }


def _one_run(config: ServerConfig, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    pool = ServerPool()
    connection = pool.connection("bench", "bench", lambda: Connection("bench", config))
    began = time.perf_counter()
    pool.run_sync(connection.ensure())
    started = time.perf_counter()
    # A bench's call asks no one: a server's question would be declined.
    questions = CallQuestions(ToolContext(agent="bench", on_input="deny"), "bench", 600.0)
    pool.run_sync(connection.call(tool, arguments, questions))
    called = time.perf_counter()
    pool.close()
    stopped = time.perf_counter()
    return {
        "start_list_s": started - began,
        "first_call_s": called - started,
        "stop_s": stopped - called,
        "tools": connection.tools,
    }


def _schema_tokens(tools: list[dict[str, Any]]) -> int:
    specs = [
        ToolSpec(
            name=f"skill__{t['name']}",
            description=str(t.get("description") or ""),
            parameters=normalise(t.get("inputSchema")),
        )
        for t in tools
    ]
    return default_counter().count_tools(specs)


def _baseline(repeats: int) -> float:
    """Median seconds of a Python process that imports the SDK's server package and exits."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        servers = _servers(_repo(Path(scratch) / "repo"))
        results: dict[str, Any] = {}
        for label, (config, tool, arguments) in servers.items():
            runs = [_one_run(config, tool, arguments) for _ in range(repeats)]
            row: dict[str, Any] = {"runs": repeats, "tools": len(runs[0]["tools"])}
            for key in ("start_list_s", "first_call_s", "stop_s"):
                values = [r[key] for r in runs]
                row[key] = {"median": statistics.median(values), "min": min(values),
                            "max": max(values)}  # fmt: skip
            row["schema_tokens"] = _schema_tokens(runs[0]["tools"])
            results[label] = row
    baseline = _baseline(repeats)
    for row in results.values():
        row["python_import_sdk_s"] = baseline
        row["start_over_python"] = row["start_list_s"]["median"] / baseline
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        "| server | tools | schema tokens | start + list (median) | first call | stop "
        "| start + list / python importing the SDK |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, row in results.items():

        def ms(key: str, row: dict[str, Any] = row) -> str:
            return f"{row[key]['median'] * 1000:.0f} ms"

        lines.append(
            f"| {label} | {row['tools']} | {row['schema_tokens']} | {ms('start_list_s')} "
            f"(min {row['start_list_s']['min'] * 1000:.0f}, max "
            f"{row['start_list_s']['max'] * 1000:.0f}) | {ms('first_call_s')} | {ms('stop_s')} "
            f"| {row['start_over_python']:.2f}x ({row['python_import_sdk_s'] * 1000:.0f} ms) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    results = measure(args.repeats)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
