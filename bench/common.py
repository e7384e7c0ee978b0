"""What every harness shares: the scripts, a step clock, the 3-skill job, the tool functions.

Peers replay the same scripts as our `ScriptedModel` (`bench/loop_overhead.py`,
`bench/fanout.py`): a `ScriptBook` picks a conversation's script by its first user message and
its turn by how many replies the model has already given in it, so a peer's fake model is as
deterministic as ours and safe to share between concurrent sub-agents.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import Message, TokenCounter, ToolCall, ToolSpec
from orchestrator.skills import qualified_tool_name

Turn = Mapping[str, Any]
Script = Mapping[str, Sequence[Turn]]
FALLBACK = "*"
# The usage (input, output tokens) every peer's fake model reports, as a provider would.
REPORTED_USAGE = (10, 5)


class ScriptBook:
    """Turns of a script, looked up by (first user message, replies so far)."""

    def __init__(self, script: Script, prompts: Mapping[str, str] | None = None) -> None:
        self.script = script
        self.prompts = dict(prompts or {})

    def turn(self, prompt: str, index: int) -> Turn:
        key = self.prompts.get(prompt, FALLBACK)
        turns = self.script[key]
        if index >= len(turns):
            raise RuntimeError(f"script {key!r} has {len(turns)} turns; reply {index + 1} asked")
        return turns[index]

    @staticmethod
    def calls(turn: Turn) -> list[tuple[str, dict[str, Any]]]:
        """The turn's tool calls as (name, arguments)."""
        return [(c["name"], dict(c.get("arguments", {}))) for c in turn.get("tool_calls") or ()]


@dataclass
class StepClock:
    """Times a run's steps from the moments its model calls start, and the time spent inside."""

    starts: list[float] = field(default_factory=list)
    model_seconds: float = 0.0

    def tick(self) -> float:
        now = time.perf_counter()
        self.starts.append(now)
        return now

    def done(self, began: float) -> None:
        self.model_seconds += time.perf_counter() - began

    def figures(self, total: float, steps: int) -> dict[str, float]:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        if len(self.starts) != steps:
            raise RuntimeError(f"expected {steps} model calls, saw {len(self.starts)}")
        return {
            "us_per_step": total / steps * 1e6,
            "median_step_us": statistics.median(gaps) * 1e6,
            "first_100_us": statistics.median(gaps[:100]) * 1e6,
            "last_100_us": statistics.median(gaps[-100:]) * 1e6,
            "model_share": self.model_seconds / total,
        }


def summarize(samples: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Median of each figure over the samples, with its spread as [min, max]."""
    summary: dict[str, Any] = {"runs": len(samples)}
    for key in samples[0]:
        values = [s[key] for s in samples]
        summary[key] = statistics.median(values)
        summary[f"{key}_spread"] = [min(values), max(values)]
    return summary


def repeat(
    run: Callable[[], Any],
    runs: int,
    budget_s: float,
    min_runs: int = 2,
    deadline: float | None = None,
) -> tuple[list[Any], bool]:
    """Call `run` up to `runs` times; also True if it stopped early.

    It stops early once `budget_s` is spent and `min_runs` are done, or, after one run at
    least, when another run would end past `deadline` (a `time.time()` the suite must keep).
    """
    results: list[Any] = []
    began = time.perf_counter()
    while len(results) < runs:
        started = time.perf_counter()
        results.append(run())
        now = time.perf_counter()
        if len(results) >= min_runs and now - began > budget_s:
            return results, True
        if deadline is not None and time.time() + (now - started) > deadline:
            return results, len(results) < runs
    return results, False


# --- the 3-skill job and the tool functions of a catalog -----------------------------------

PLANNER_SYSTEM = "You are the planner. Reach the user's goal with the tools you have."
JOB_TASK = "Find the open items in the first three trackers and summarize them."
JOB_ANSWER = "Open items: none in any of the three trackers."


@dataclass(frozen=True)
class Job:
    """A job that uses three skills: one search call in each, made in one turn, then an answer."""

    skills: tuple[str, ...]
    calls: tuple[tuple[str, str], ...]  # (qualified tool name, JSON arguments)

    def eager_script(self) -> dict[str, list[dict[str, Any]]]:
        """All tools up front: call the three tools, then answer."""
        return {FALLBACK: [{"tool_calls": self._tool_calls()}, {"content": JOB_ANSWER}]}

    def progressive_script(self) -> dict[str, list[dict[str, Any]]]:
        """Skills disclosed on demand: load the three skills, call their tools, then answer."""
        loads = [{"name": "load_skill", "arguments": {"name": s}} for s in self.skills]
        turns = [{"tool_calls": loads}, {"tool_calls": self._tool_calls()}, {"content": JOB_ANSWER}]
        return {FALLBACK: turns}

    def _tool_calls(self) -> list[dict[str, Any]]:
        return [{"name": name, "arguments": json.loads(args)} for name, args in self.calls]


def job_for(catalog: Path) -> Job:
    """The job on the first three skills of a catalog written by `skills_tokens.write_catalog`."""
    skills = tuple(sorted(p.name for p in catalog.iterdir() if p.is_dir())[:3])
    calls = []
    for skill in skills:
        plural = skill.split("-", 1)[0] + "s"
        arguments = json.dumps({"query": "open items", "status": "open", "limit": 5})
        calls.append((qualified_tool_name(skill, f"search_{plural}"), arguments))
    return Job(skills, tuple(calls))


def tool_functions(catalog: Path) -> list[tuple[str, Callable[..., Any]]]:
    """Every tool function of every skill folder, plain (without our `@tool`), with its name.

    This is what a user of a peer framework would import: the same functions, named
    `{skill}__{function}` as our loader names them so names stay unique across skills.
    """
    functions = []
    for folder in sorted(p for p in catalog.iterdir() if p.is_dir()):
        for fn in _module_functions(folder / "tools.py", folder.name):
            functions.append((qualified_tool_name(folder.name, fn.__name__), fn))
    return functions


def _module_functions(path: Path, skill: str) -> list[Callable[..., Any]]:
    source = path.read_text(encoding="utf-8").replace("from orchestrator import tool", "")
    module = f"bench_peer_tools_{skill.replace('-', '_')}"
    namespace: dict[str, Any] = {"__name__": module, "tool": _plain}
    exec(compile(source, str(path), "exec"), namespace)
    return [v for v in namespace.values() if callable(v) and getattr(v, "__module__", "") == module]


def _plain(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


# --- counting a peer's requests with our counter -------------------------------------------


@dataclass
class Request:
    """One request a fake model received, in our types, so every framework is counted alike."""

    messages: list[Message]
    tools: list[ToolSpec]


def spec(name: str, description: str | None, parameters: Mapping[str, Any]) -> ToolSpec:
    return ToolSpec(name=name, description=description or "", parameters=dict(parameters))


def call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> ToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=call_id, name=name, arguments=raw)


def request_tokens(requests: Sequence[Request], replies: Sequence[Message]) -> dict[str, int]:
    """First request's input tokens, and the whole job's input plus output tokens."""
    counter = TokenCounter()
    inputs = [counter.count_request(r.messages, r.tools) for r in requests]
    outputs = [counter.count_message(m) for m in replies]
    return {"first_request": inputs[0], "job": sum(inputs) + sum(outputs)}


def reply_message(turn: Turn) -> Message:
    """The assistant message of a scripted turn (ids are not counted, so any will do)."""
    calls = [call(f"call_{i}", n, a) for i, (n, a) in enumerate(ScriptBook.calls(turn))]
    return Message.assistant(turn.get("content"), calls)
